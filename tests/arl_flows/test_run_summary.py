"""What a user reads after a run: the summary lines, `arl runs show`, `arl prior show` and the report."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from arl_flows.config import load_config
from arl_flows.report import best_candidates, build_report, verified_by_step
from arl_flows.training import StepSummary
from storage.ledger import Ledger
from storage.records import Prompt, RewardEstimate, SpendRecord, Tier, TrainingStepRecord, Trajectory, Verdict
from tests.arl_flows.cli.test_cli_run import _main

# Step 0: three molecules, two answered by the top tier (the reference table); step 1: two molecules, none answered.
STEP0 = [("CCO", 0.9, 0.0, 3.6), ("c1ccccc1", 0.4, 0.0, 5.1), ("CC=O", 0.7, 0.1, None)]
STEP1 = [("CCN", 0.95, 0.05, None), ("CC#N", 0.2, 0.2, None)]
FAST = {"CCO": 2.1, "c1ccccc1": 3.9, "CC=O": 1.4, "CCN": 2.4, "CC#N": 4.4}


def _verdict(smiles: str, verifier: str, tier: Tier, value: float) -> Verdict:
    return Verdict(candidate_key=f"molecules:{smiles}", verifier=verifier, version="1", params_hash="p", tier=tier,
                   status="ok", value=value)


@pytest.fixture
def run_ledger(sqlite_url: str) -> tuple[Ledger, str]:
    """A finished two-step run of the quick profile (rdkit-eht, gfn2-xtb, reference-table), written by hand."""
    ledger = Ledger(sqlite_url)
    config = load_config(None, "quick")
    run = ledger.create_run("summary", config.model_dump(mode="json") | {"steps": 2})
    prompt = Prompt(id="molecules:p0", suite="molecules", text="gap 3-4", goal={"low": 3.0, "high": 4.0})
    ledger.add_prompts([prompt])
    for step, rows in enumerate((STEP0, STEP1)):
        trajs = [Trajectory(run_id=run.id, prompt_id=prompt.id, step=step, group_id=f"g{step}", final_answer=smi,
                            candidate_key=f"molecules:{smi}") for smi, *_ in rows]
        ledger.add_trajectories(trajs)
        verdicts = [_verdict(smi, "rdkit-eht", Tier.fast, FAST[smi]) for smi, *_ in rows]
        verdicts += [_verdict(smi, "reference-table", Tier.lab, top) for smi, _, _, top in rows if top is not None]
        spend = [SpendRecord(run_id=run.id, step=step, tier=Tier.lab, verifier="reference-table", cost_s=12.0, calls=1),
                 SpendRecord(run_id=run.id, step=step, tier=Tier.fast, verifier="rdkit-eht", cost_s=0.1, calls=len(rows))]
        ledger.put_verdicts(verdicts, spend=spend)
        ledger.add_reward_estimates([RewardEstimate(trajectory_id=t.id, run_id=run.id, step=step, mean=mean, std=std)
                                     for t, (_, mean, std, _) in zip(trajs, rows)])
        means = [m for _, m, _, _ in rows]
        ledger.record_step(TrainingStepRecord(run_id=run.id, step=step, metrics={
            "reward/mean": sum(means) / len(means), "reward/max": max(means), "reward/std": 0.3, "reward/validity": 1.0}))
    return ledger, run.id


def test_best_candidates_mark_rewards_the_top_tier_never_answered(run_ledger) -> None:
    ledger, run_id = run_ledger
    top = {c["answer"]: c for c in best_candidates(ledger, run_id, n=10)}
    assert [a for a, c in top.items() if c["verified"]] == ["CCO", "c1ccccc1"]
    assert top["CCO"]["top_value"] == 3.6 and top["CCN"]["top_value"] is None and not top["CCN"]["verified"]
    per_step = verified_by_step(ledger, run_id)
    assert [(r["step"], r["verified"], r["candidates"]) for r in per_step] == [(0, 2, 3), (1, 0, 2)]
    assert per_step[0]["best"] == {"answer": "CCO", "value": 3.6, "reward": 0.9} and per_step[1]["best"] is None


def test_the_summary_says_a_step_had_no_top_answer_because_its_calls_failed(run_ledger) -> None:
    """The quick run's summary blamed the budget for a step whose three reference-table calls had all failed."""
    from arl_flows.cli.train import _verified_lines

    ledger, run_id = run_ledger
    assert "step(s) 1: no reference-table answer" in "\n".join(_verified_lines(ledger, run_id))
    ledger.put_verdicts([
        Verdict(candidate_key=f"molecules:{smi}", verifier="reference-table", version="1", params_hash="p", tier=Tier.lab,
                status="failed", feedback="not in reference table") for smi, *_ in STEP1])
    per_step = verified_by_step(ledger, run_id)
    assert [(r["failed"], r["failure"]) for r in per_step] == [(0, None), (2, "not in reference table")]
    lines = "\n".join(_verified_lines(ledger, run_id))
    assert "step 1: 2 reference-table call(s) failed (not in reference table)" in lines and "step(s) 1" not in lines


def test_a_resumed_runs_summary_holds_the_steps_before_the_resume(run_ledger) -> None:
    """After `arl run --resume`, the summary listed only the resumed steps and judged the trend on them alone."""
    from arl_flows.cli.train import _earlier_steps, _summary_table
    from arl_flows.training import StepSummary

    ledger, run_id = run_ledger
    resumed = [StepSummary(step=1, reward_mean=0.575, reward_max=0.95, validity=1.0, seconds=2.0)]
    earlier = _earlier_steps(ledger, run_id, resumed)
    assert [(r.step, round(r.reward_mean, 4)) for r in earlier] == [(0, round((0.9 + 0.4 + 0.7) / 3, 4))]
    out = io.StringIO()
    Console(file=out, width=200).print(_summary_table({"id": run_id, "name": "summary", "status": "completed"}, earlier + resumed))
    assert "(before the resume)" in out.getvalue() and "0.667" in out.getvalue()
    assert _earlier_steps(ledger, run_id, [StepSummary(step=0)]) == []  # a fresh run: nothing before it


def test_report_has_units_error_bars_parity_structures_and_estimate_marks(run_ledger) -> None:
    ledger, run_id = run_ledger
    report = build_report(ledger, run_id)
    md = report.markdown
    assert {"reward.png", "parity.png", "best.png"} <= set(report.images)
    assert all(report.images[name].startswith(b"\x89PNG") for name in ("parity.png", "best.png"))
    assert "| lab | `reference-table` | 24.00 | 2 |" in md  # what ran at the lab tier, named
    assert md.index("| fast | `rdkit-eht`") < md.index("| lab | `reference-table`")  # ladder order
    assert "reference-table (eV)" in md and "rdkit-eht (eV)" in md and "two standard errors" in md
    assert re.search(r"- verdicts by status: \d+ ok\n", md)  # words, not a Python dict
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| `")}
    assert "**estimate**" in rows["`CCN`"] and "**estimate**" in rows["`CC=O`"]
    assert "**estimate**" not in rows["`CCO`"] and "0.900 ± 0.000" in rows["`CCO`"]


def test_a_reused_report_folder_keeps_no_figure_of_an_earlier_report(tmp_path) -> None:  # noqa: ANN001
    from arl_flows.report import REPORT_IMAGES, Report

    first = "# ARL run `first`\n" + "".join(f"![{name}]({name})\n" for name in REPORT_IMAGES)
    Report(first, {name: b"\x89PNG old" for name in REPORT_IMAGES}).write(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    Report("# ARL run `second`\n![reward](reward.png)\n", {"reward.png": b"\x89PNG new"}).write(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "report.md", "reward.png"]  # a user's file stays
    assert (tmp_path / "reward.png").read_bytes() == b"\x89PNG new"


def test_a_report_keeps_a_users_file_named_like_a_figure_that_no_earlier_report_linked(tmp_path) -> None:  # noqa: ANN001
    from arl_flows.report import Report

    (tmp_path / "best.png").write_bytes(b"my own plot")
    (tmp_path / "spend.png").mkdir()  # a folder of a figure's name: left alone, no error
    Report("# a run\n", {"reward.png": b"\x89PNG"}).write(tmp_path)
    assert (tmp_path / "best.png").read_bytes() == b"my own plot" and (tmp_path / "spend.png").is_dir()
    (tmp_path / "report.md").write_text("# my notes, linking ![mine](best.png)\n")  # not a report ARL wrote
    Report("# ARL run `x`\n", {"reward.png": b"\x89PNG"}).write(tmp_path)
    assert (tmp_path / "best.png").read_bytes() == b"my own plot"


def test_reward_trend_says_when_a_move_is_inside_sampling_noise() -> None:
    from arl_flows.cli.train import _reward_trend

    def rows(means: list[float], std: float) -> list[StepSummary]:
        return [StepSummary(step=i, reward_mean=m, metrics={"reward/std": std}) for i, m in enumerate(means)]

    noisy = _reward_trend(rows([0.585, 0.52, 0.53, 0.72, 0.586, 0.599], 0.45), per_step=32)
    assert "+0.008" in noisy and "within sampling noise" in noisy and "too few to show learning" in noisy
    clear = _reward_trend(rows([0.30, 0.40, 0.50, 0.60, 0.70, 0.80], 0.1), per_step=32)
    assert "rose by more than sampling noise" in clear and "+0.450" in clear
    fell = _reward_trend(rows([0.80, 0.70, 0.60, 0.50, 0.40, 0.30], 0.1), per_step=32)
    assert "fell by more than sampling noise" in fell
    assert _reward_trend(rows([0.5], 0.1), per_step=32) == ""


def test_progress_prints_a_line_per_step_when_output_is_not_a_terminal(monkeypatch) -> None:
    import arl_flows.cli.train as train

    out = io.StringIO()
    monkeypatch.setattr(train, "console", Console(file=out, force_terminal=False, width=200))
    view = train._ProgressView(160.0)
    with view.progress:
        view.progress.update(view.task, total=2)  # what the "run" event sets (without pointing Prefect's logs at a run)
        for step in range(2):
            view("step", StepSummary(step=step, reward_mean=0.5, reward_max=0.9, validity=1.0, seconds=3.0,
                                     spend={"fast": 0.1, "simulation": 0.2, "high_fidelity": 9.0}, budget_left=100.0))
    text = out.getvalue()
    assert "step 0 (1 of 2) done in 3 s: reward 0.500" in text and "step 1 (2 of 2) done" in text
    assert "spend fast 0.1s, simulation 0.2s, high_fidelity 9.0s" in text  # ladder order, not alphabetical


def test_runs_show_lists_the_top_candidates_and_what_ran(run_ledger, sqlite_url, capsys, monkeypatch) -> None:
    ledger, run_id = run_ledger
    monkeypatch.setenv("COLUMNS", "200")
    code, out = _main(["runs", "show", run_id[:10], "--url", sqlite_url], capsys)
    assert code == 0 and "top candidates" in out
    lines = out.splitlines()
    ccn = next(line for line in lines if " CCN " in line)
    cco = next(line for line in lines if " CCO " in line)
    assert "est." in ccn and "est." not in cco and "3.600" in cco
    assert "spend/fast" in out and "(reference-table, 2 calls)" in out
    assert out.index("spend/fast") < out.index("spend/lab")
    code, out = _main(["runs", "show", run_id[:10], "--url", sqlite_url, "--json", "--top", "2"], capsys)
    shown = json.loads(out)
    assert [c["answer"] for c in shown["top_candidates"]] == ["CCN", "CCO"]
    assert [c["verified"] for c in shown["top_candidates"]] == [False, True]


def test_prior_show_prints_the_data_hash(capsys) -> None:
    from arl_flows.suites.molecules.prior import SHIPPED_PRIOR_DIR

    report = json.loads((SHIPPED_PRIOR_DIR / "pretrain_report.json").read_text())
    code, out = _main(["prior", "show"], capsys)
    assert code == 0 and f"sha256 {report['data_sha256']}" in " ".join(out.split())
    assert f"{report['molecules']} molecules" in out
