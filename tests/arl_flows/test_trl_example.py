"""examples/trl_grpo.py: TRL's real GRPOTrainer for 2 steps with TieredReward, then the ledger is checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arl_flows.integrations import TieredReward
from arl_flows.report import build_report
from storage.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
TINY_PRIOR = ROOT / "tests" / "data" / "tiny_prior"


@pytest.mark.slow(seconds=65)
def test_trl_grpo_example_writes_its_run_and_reuses_verdicts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    summary_path = tmp_path / "summary.json"
    env = os.environ | {"ARL_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trl_grpo.py"), "--max-steps", "2", "--ledger", url,
         "--model", str(TINY_PRIOR), "--warm-start", "20", "--budget-per-call", "40", "--output-dir", str(tmp_path / "trl"),
         "--summary-json", str(summary_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    ledger = Ledger(url)
    run = ledger.run_summary(summary["run_id"])
    assert run["status"] == "completed" and run["name"] == "trl-grpo"
    assert run["steps_done"] == 3  # the warm start, then one reward call per GRPO step
    assert run["trajectories"] == 2 * 2 * 4  # steps x prompts x generations

    # Every completion has at least its fast-tier verdict; every verdict computed was billed to the run.
    rows = [t for step in (1, 2) for t, _ in ledger.step_trajectories(run["id"], step)]
    keys = {t.candidate_key for t in rows}
    judged = {v.candidate_key for v in ledger.verdicts_for(keys)}
    assert keys <= judged
    steps = ledger.training_steps(run["id"])
    billed = sum(s.metrics["verify/spend"] for s in steps)
    assert billed > 0 and sum(run["spend_by_tier"].values()) == pytest.approx(billed, rel=1e-6)
    assert all(s["reward_mean"] is not None for s in run["steps"][1:])
    report = build_report(ledger, run["id"])
    assert run["id"] in report.markdown and "spend.png" in report.images

    # A completion the run already verified is a cache hit for the next trainer: nothing new, nothing spent.
    valid = next(t for t in rows if not t.candidate_key.startswith("molecules:invalid:"))
    with TieredReward("molecules", objective=(3.0, 4.0), budget_per_call=40.0, ledger_url=url,
                      tiers=["rdkit-eht", ("gfn2-xtb", {"threads": 1, "workers": 1}), ("reference-table", {"cost_per_call": 12.0})]) as again:
        again(["p"], [valid.final_answer])
        detail = again.last_details[0]
        assert detail.candidate_key == valid.candidate_key
        assert detail.cached >= 1 and detail.new == 0 and again.last_call.spend_s == 0.0


@pytest.mark.slow(seconds=80)
def test_the_example_runs_against_an_installed_wheel(installed_wheel, tmp_path: Path) -> None:  # noqa: ANN001
    """ARL from a wheel in a fresh venv (tests/conftest.py), the example run from another directory."""
    python, site = installed_wheel.python, installed_wheel.site
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    example = elsewhere / "trl_grpo.py"
    example.write_text((ROOT / "examples" / "trl_grpo.py").read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ARL_", "PYTHON"))}
    env |= {"ARL_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    probe = "import arl_flows.integrations as m; print(m.__file__)"
    where = subprocess.run([str(python), "-c", probe], cwd=elsewhere, env=env, capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(site)), where.stdout
    done = subprocess.run([str(python), str(example), "--max-steps", "1", "--model", "tiny", "--ledger", url,
                           "--summary-json", "s.json"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = json.loads((elsewhere / "s.json").read_text())["run_id"]
    assert Ledger(url).run_summary(run_id)["trajectories"] == 2 * 4
