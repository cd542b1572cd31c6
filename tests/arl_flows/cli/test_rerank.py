"""Best-of-N: ``arl rerank`` and ``arl_flows.integrations.rerank`` with the real ladder, scheduler and ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arl_flows.cli import app
from arl_flows.integrations import rerank
from storage.ledger import Ledger

runner = CliRunner()


def _arl(args: list[str]) -> tuple[int, str, str]:
    """The console entry point's error handling (``run_app``) on ``args``: exit code, stdout, stderr."""
    import sys

    from arl_flows.cli._errors import run_app

    with runner.isolation() as (out, err, _):
        saved, sys.argv = sys.argv, ["arl", *args]
        try:
            run_app(app)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.argv = saved
            sys.stdout.flush()
            sys.stderr.flush()
        return code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace")
TIERS = ["--tiers", "rdkit-eht,reference-table", "--tier-param", "reference-table.cost_per_call=2"]


def _write(tmp_path: Path, lines: list[object]) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_molecules_rerank_returns_top_k_with_posterior_tier_and_spend(tmp_path: Path) -> None:
    # Benzene's QM9 gap (about 6.8 eV) is in the window; the others are far outside it or invalid.
    path = _write(tmp_path, [{"prompt": "gap 6-7.5", "window": [6.0, 7.5], "candidates": ["C", "c1ccccc1", "CC(", "N#N"]}])
    url = f"sqlite:///{tmp_path / 'l.db'}"
    out = runner.invoke(app, ["rerank", "--input", str(path), "--n", "4", "--k", "2", "--budget", "100", "--json",
                              "--ledger", url, *TIERS])
    assert out.exit_code == 0, out.output
    [result] = json.loads(out.output)
    assert result["n"] == 4 and len(result["top"]) == 2
    best = result["top"][0]
    assert best["completion"] == "c1ccccc1" and best["tier"] == "lab" and best["rank"] == 1
    assert 6.0 <= best["value_mean"] <= 7.5 and best["std"] >= 0.0
    assert result["spend_s"] == pytest.approx(sum(Ledger(url).spend_by_tier(result["run_id"]).values()))
    assert result["spend_s"] <= 100.0


def test_the_budget_limits_top_tier_calls_and_a_second_pass_is_free(tmp_path: Path) -> None:
    items = [{"window": [3.0, 4.0], "candidates": ["CCO", "c1ccncc1", "CC(=O)C", "OCC#N", "CCN"]}]
    url = f"sqlite:///{tmp_path / 'l.db'}"
    tiers = ["rdkit-eht", ("reference-table", {"cost_per_call": 2.0})]
    [first] = rerank(items, suite="molecules", n=5, budget=4.5, tiers=tiers, ledger_url=url)
    assert first.calls["reference-table"] <= 2 and first.spend_s <= 4.5
    [again] = rerank(items, suite="molecules", n=5, budget=4.5, tiers=tiers, ledger_url=url)
    assert again.spend_s <= first.spend_s  # known verdicts are free; only new top-tier calls cost
    assert again.top[0].cached or again.calls["reference-table"] > 0


def test_code_rerank_picks_the_correct_answer(tmp_path: Path) -> None:
    from arl_flows.suites.code import get_task

    right = f"<think>formula</think><code>{get_task('sum-to-n').reference}</code>"
    items = [{"task_id": "sum-to-n", "candidates": ["<think>x</think><code>print(0)</code>", "no tags at all", right]}]
    [result] = rerank(items, suite="code", n=3, budget=60.0, ledger_url=f"sqlite:///{tmp_path / 'l.db'}")
    assert result.top[0].completion == right and result.top[0].tier == "high_fidelity"


@pytest.mark.parametrize("budget", [0.1, 0.2])
def test_code_rerank_without_the_hidden_tests_prefers_the_solution_to_a_printed_answer(tmp_path: Path, budget: float) -> None:
    """At a budget that never reaches the hidden tests, a print of the expected output no longer ties a solution.

    Both print the right text; before, both scored 1.05 +- 0.6 after the execution tier and first-seen order put
    the print first. The execution tier now also calls the function the prompt's print statement calls.
    """
    from arl_flows.suites.code import get_task

    task = get_task("sum-to-n")
    printer = "<think>the answer</think><code>def solve(*args):\n    return None\nprint('5050')\n</code>"
    right = f"<think>formula</think><code>{task.reference}</code>"
    items = [{"task_id": "sum-to-n", "candidates": [printer, right]}]
    ladder = [{"verifier": "code-format", "params": {}}, {"verifier": "code-exec", "params": {}}]
    [result] = rerank(items, suite="code", n=2, k=2, budget=budget, tiers=ladder, ledger_url=f"sqlite:///{tmp_path / 'l.db'}")
    best, other = result.top
    assert best.completion == right and other.completion == printer, result.top
    assert best.reward > other.reward + 0.3


@pytest.mark.parametrize(
    ("lines", "args", "message"),
    [
        (["not json"], [], "line 1: not JSON"),
        ([{"candidates": "CCO"}], [], "line 1: candidates"),
        ([{"candidates": ["CCO"], "window": [4, 3, 2]}], [], "line 1: window"),
        ([], [], "holds no prompts"),
        ([{"candidates": ["[/bold]CCO"]}], ["--budget", "nan"], "--budget nan"),
        ([{"candidates": ["CCO"]}], ["--window", "4", "3"], "--window 4.0 3.0"),
        ([{"candidates": ["CCO"]}], ["--suite", "[red]x"], "--suite"),
        ([{"candidates": ["x"]}], ["--suite", "code"], "needs a task_id"),
        ([{"candidates": ["CCO"]}], ["--tiers", "rdkit-eht,no-such-tier"], "no-such-tier"),
        ([{"candidates": ["CCO"]}], ["--tier-param", "x=1"], "--tier-param needs --tiers"),
        ([{"task_id": "[/x]nope", "candidates": ["a"]}], ["--suite", "code"], "nope"),
    ],
)
def test_bad_input_is_one_line_without_a_traceback(tmp_path: Path, lines: list[object], args: list[str], message: str) -> None:
    path = _write(tmp_path, lines) if lines else tmp_path / "empty.jsonl"
    if not lines:
        path.write_text("# nothing\n")
    code, out, err = _arl(["rerank", "--input", str(path), "--ledger", f"sqlite:///{tmp_path / 'l.db'}", *args])
    assert code == 2, err
    assert "Traceback" not in out + err and "internal error" not in err and message in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 or lines[-1].startswith("Error: "), err


def test_an_input_file_in_another_encoding_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"candidates": ["CCO"]}\n{"candidates": ["C\xe9C"]}\n')
    code, out, err = _arl(["rerank", "--input", str(path), "--ledger", f"sqlite:///{tmp_path / 'l.db'}"])
    assert code == 2 and err.strip() == f"error: --input {path} is not UTF-8 text (line 2); save it as UTF-8", err


def test_rich_output_escapes_user_text(tmp_path: Path) -> None:
    path = _write(tmp_path, [{"prompt": "[bold red]hi[/]", "window": [6.0, 7.5], "candidates": ["c1ccccc1", "[/x]"]}])
    out = runner.invoke(app, ["rerank", "--input", str(path), "--n", "2", "--k", "2", "--ledger",
                              f"sqlite:///{tmp_path / 'l.db'}", *TIERS])
    assert out.exit_code == 0, out.output
    assert "[bold red]hi[/]" in out.output and "[/x]" in out.output


def test_a_line_without_candidates_is_sampled_from_a_policy(tmp_path: Path) -> None:
    policy = Path(__file__).resolve().parents[2] / "data" / "tiny_prior"
    path = _write(tmp_path, [{"prompt": "sample me", "window": [4.0, 5.0]}])
    out = runner.invoke(app, ["rerank", "--input", str(path), "--n", "4", "--k", "4", "--budget", "20", "--json",
                              "--policy-path", str(policy), "--ledger", f"sqlite:///{tmp_path / 'l.db'}", *TIERS])
    assert out.exit_code == 0, out.output
    [result] = json.loads(out.stdout)  # stderr may carry a model-loading progress bar
    assert result["n"] == 4 and 1 <= len(result["top"]) <= 4  # duplicates among the samples count once
    assert [t["rank"] for t in result["top"]] == list(range(1, len(result["top"]) + 1))
    assert all(" " not in t["completion"] for t in result["top"])


def test_tiers_take_tier_names_and_name_an_unknown_verifier_first() -> None:
    """`arl verify --tiers fast,high_fidelity` worked and `arl rerank` with the same said "no verifier named 'fast'";
    `--tiers bogus` was blamed on the ladder's length instead of the name."""
    from arl_flows.cli._common import UserError, load_suite
    from arl_flows.cli.rerank import _tier_list

    suite = load_suite("molecules", {})
    ladder = _tier_list("fast,high_fidelity", ["pyscf-b3lyp.basis=\"sto-3g\""], suite)
    assert [r["verifier"] for r in ladder] == ["rdkit-eht", "pyscf-b3lyp"] and ladder[1]["params"]["basis"] == "sto-3g"
    for tiers, message in (("bogus", "--tiers: no verifier named 'bogus'"), ("fast,lab", "has no lab tier")):
        with pytest.raises(UserError, match=message):
            _tier_list(tiers, [], suite)
