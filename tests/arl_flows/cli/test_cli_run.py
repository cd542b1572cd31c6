"""The user's view: `arl run`, `arl runs`, `arl report`, `arl lab` and clear errors for bad configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from storage.ledger import Ledger
from storage.records import LabRequest, Status, Tier, Verdict
from tests.helpers.cli_runner import arl, arl_run_subprocess

def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the console-script entry point (which maps user errors to one line and exit code 2)."""
    code, out, err = arl(args)
    return code, out + err


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("stepz = 3\n", "stepz: unknown field"),
        ('suite = "chess"\n', "suite: no suite named 'chess'; installed: code, molecules"),
        ("steps = 0\n", "steps: Input should be greater than or equal to 1"),
        ("[scheduler]\ntarget_low = 5.0\ntarget_high = 4.0\n", "target_low (5.0) must be below target_high"),
        ("[trainer.loss]\nloss_type = 'ppo'\n", "trainer.loss.loss_type"),
        ("tiers = [{ verifier = 'rdkit-eht' }]\n", "at least two verifiers"),
        ("steps = \n", "is not valid TOML"),
        ("tiers = [{ verifier = 'rdkit-eht' }, { verifier = 'no-such-tier' }]\n", "tiers: no verifier named 'no-such-tier'"),
        ("tiers = [{ verifier = 'rdkit-eht' }, { verifier = 'nomodule_xyz:Tier' }]\n", "tiers: cannot import module 'nomodule_xyz'"),
        ("tiers = [{ verifier = 'pyscf-b3lyp' }, { verifier = 'rdkit-eht' }]\n", "cheapest first"),
        ("tiers = [{ verifier = 'rdkit-eht', params = { bogus = 1 } }, { verifier = 'gfn2-xtb' }]\n", "tiers[0] (rdkit-eht): bogus: unknown field"),
        ("suite = 'code'\npolicy_path = '/nonexistent/model'\n", "not a local transformers model directory"),
    ],
)
def test_bad_config_is_one_clear_line_and_exit_2(tmp_path: Path, capsys, toml: str, expected: str) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(toml)
    code, out = _main(["run", "--config", str(cfg), "--url", f"sqlite:///{tmp_path / 'l.db'}"], capsys)
    assert code == 2
    assert expected in out
    assert "Traceback" not in out and len(out.strip().splitlines()) <= 3


def test_missing_config_file_and_unknown_profile(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    code, out = _main(["run", "--config", str(tmp_path / "nope.toml"), "--url", url], capsys)
    assert code == 2 and "does not exist" in out
    code, out = _main(["run", "--profile", "turbo", "--url", url], capsys)
    assert code == 2 and "unknown profile 'turbo'" in out and "quick" in out
    code, out = _main(["run", "--resume", "no-such-run", "--url", url], capsys)
    assert code == 2 and "no run with id" in out


def test_examples_are_valid_configs() -> None:
    from arl_flows.config import load_config

    root = Path(__file__).resolve().parents[3] / "examples"
    for path in sorted(root.glob("*.toml")):
        assert load_config(path).steps >= 1, path


@pytest.mark.slow(seconds=150)  # 150 s with its fixtures on 2 busy cores (2026-12-06), about 58 s idle
def test_arl_run_end_to_end_then_show_report_and_lab(prefect_harness, flow_home, overrides, tmp_path: Path, capsys) -> None:
    tomli_w = pytest.importorskip("tomli_w")
    cfg = tmp_path / "run.toml"
    cfg.write_text(tomli_w.dumps(overrides(steps=2, name="cli-run")))
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    out = arl_run_subprocess(cfg, url, prefect_harness, flow_home)
    assert "run id:" in out and "completed" in out and "Traceback" not in out
    assert "reward mean " in out and "sampling noise" in out
    # Output to a pipe: a line per step, not a bar that only a terminal redraws.
    assert "step 0 (1 of 2) done in" in out and "step 1 (2 of 2) done in" in out
    # The spend line names what ran at each tier (the tiny prior's molecules rarely get past the fast tier; the
    # ladder order is tested on the ledger) and the summary says what the top tier verified.
    flat = " ".join(out.split())
    assert "spend: rdkit-eht (fast) " in flat and "reference-table verified " in flat, flat[-1500:]
    run_id = Ledger(url).list_runs()[0].id
    # Prefect's own logs went to the run's folder, not the terminal.
    assert (flow_home / "runs" / run_id / "prefect.log").is_file() and "| INFO" not in out

    code, out = _main(["runs", "show", run_id[:10], "--url", url, "--json"], capsys)
    shown = json.loads(out)
    assert shown["status"] == "completed" and shown["steps_done"] == 2
    assert shown["trajectories"] == 16 and "fast" in shown["spend_by_tier"]
    assert shown["spend_by_verifier"][0]["verifier"] == "rdkit-eht" and "top_candidates" in shown
    assert sum(shown["verdicts_by_status"].values()) >= 1 and "best_reward" in shown
    assert [s["step"] for s in shown["steps"]] == [0, 1]
    for step in shown["steps"]:
        assert 0.0 <= step["validity"] <= 1.0 and step["reward_max"] >= step["reward_mean"]
        assert "fast" in step["spend_by_tier"] and step["calls_by_tier"]["fast"] >= 1
    assert sum(s["spend_by_tier"].get("fast", 0.0) for s in shown["steps"]) == pytest.approx(shown["spend_by_tier"]["fast"])

    code, out = _main(["runs", "list", "--url", url, "--json"], capsys)
    assert json.loads(out)[0]["id"] == run_id

    code, out = _main(["report", run_id, "--url", url, "--out", str(tmp_path / "rep")], capsys)
    assert code == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Spend by tier" in md and (tmp_path / "rep" / "reward.png").stat().st_size > 1000
    assert (tmp_path / "rep" / "spend.png").exists()

    # Lab: list, a bad submission, a good one.
    ledger = Ledger(url)
    ledger.put_verdicts([Verdict(candidate_key="molecules:CC#N", verifier="lab", version="1", params_hash="p",
                                 tier=Tier.lab, status=Status.pending, request_id="r-cli")])
    ledger.create_lab_requests([LabRequest(id="r-cli", candidate_key="molecules:CC#N", payload="CC#N", verifier="lab",
                                           version="1", params_hash="p", run_id=run_id)])
    code, out = _main(["lab", "list", "--url", url, "--json"], capsys)
    assert [r["id"] for r in json.loads(out)] == ["r-cli"]
    code, out = _main(["lab", "submit", "--request", "r-cli", "--value", "abc", "--url", url], capsys)
    assert code == 2 and "must be a number" in out
    code, out = _main(["lab", "submit", "--request", "nope", "--value", "1.0", "--url", url], capsys)
    assert code == 2 and "no lab request" in out
    code, out = _main(["lab", "submit", "--request", "r-cli", "--value", "9.1", "--url", url], capsys)
    assert code == 0 and "9.1" in out
    code, out = _main(["lab", "submit", "--request", "r-cli", "--value", "9.2", "--url", url], capsys)
    assert code == 2 and "already has a result" in out
    code, out = _main(["db", "check", "--url", url], capsys)
    assert code == 0 and "consistent" in out
    code, out = _main(["run", "--resume", run_id, "--url", url], capsys)
    assert code == 2 and "already completed" in out


def test_command_line_overrides_win_over_the_profile() -> None:
    from arl_flows.config import load_config

    quick = load_config(None, "quick")
    assert quick.steps == 3 and quick.tiers[-1].verifier == "reference-table"
    one = load_config(None, "quick", overrides={"steps": 1, "name": "smoke"})
    assert (one.steps, one.name) == (1, "smoke") and one.tiers == quick.tiers and one.trainer == quick.trainer
