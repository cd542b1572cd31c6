"""``arl bench pipeline`` at a tiny size: both modes run, spend within the same budget, learn, and report."""

from __future__ import annotations

import json

import pytest

from benchmarks.pipeline import MODES, PipelineBenchConfig, pipeline_benchmark, write_json

BUDGET = 60.0
COST = 15.0


def test_sync_and_async_spend_the_same_budget_and_both_learn(flow_home, overrides, tmp_path) -> None:
    run = overrides()
    run.pop("prior")  # the suite's shipped prior: most of its molecules are valid, so the cluster gets calls
    bench = PipelineBenchConfig(
        budget=BUDGET, budget_per_step=30.0, max_steps=3, latency_s=0.2, slots=3, cost_per_call=COST,
        audit_points=3, history=30, streaming={"max_ahead": 2},
        run_overrides={k: run[k] for k in ("rollout", "trainer")},
    )
    report = pipeline_benchmark(bench, workdir=tmp_path / "work", cache=tmp_path / "audit.db")
    out = tmp_path / "pipeline.json"
    write_json(report, out)
    report = json.loads(out.read_text())
    assert set(MODES) | {"ratios", "settings"} <= set(report)
    for mode in MODES:
        r = report[mode]
        assert {"wall_s", "top10_auc", "steps", "utilisation", "learner_idle_share", "staleness"} <= set(r)
        assert r["steps"] > 0 and r["wall_s"] > 0
        assert 0.0 <= r["top10_auc"] <= 1.0 and 0.0 <= r["learner_idle_share"] <= 1.0
        assert 0.0 < r["total_spend"] <= BUDGET + 1e-6  # the same budget, never exceeded
        assert r["spend_by_tier"].get("high_fidelity", 0.0) > 0  # the cluster was paid: the top tier was used
        assert set(r["utilisation"]) == {"rdkit-eht", "simulated-cluster"}
        assert all(0.0 <= u <= 1.0 + 1e-6 for u in r["utilisation"].values())
        assert sum(r["staleness"].values()) > 0
    assert set(report["sync"]["staleness"]) == {"0"}  # the synchronous step learns on-policy only
    assert {"async/sync wall", "async/sync top10_auc"} <= set(report["ratios"])
    assert report["ratios"]["async/sync wall"] == pytest.approx(report["async"]["wall_s"] / report["sync"]["wall_s"])
    # The runs' measurements were written before the audit, so an audit stopped part way does not lose them.
    unaudited = json.loads((tmp_path / "work" / "pipeline-modes-s0.json").read_text())
    assert unaudited["audited"] is False and "provenance" in unaudited
    for mode in MODES:
        assert unaudited[mode]["wall_s"] == report[mode]["wall_s"] and "top10_auc" not in unaudited[mode]


def test_the_command_is_registered_and_says_what_the_cluster_models() -> None:
    from typer.testing import CliRunner

    from arl_flows.cli import app

    result = CliRunner().invoke(app, ["bench", "pipeline", "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "REMOTE DFT QUEUE OR LAB" in " ".join(result.output.split())


def test_bad_modes_are_refused_in_one_line() -> None:
    from typer.testing import CliRunner

    from arl_flows.cli import UserError, app

    result = CliRunner().invoke(app, ["bench", "pipeline", "--modes", "sync,batch"])
    assert isinstance(result.exception, UserError)  # `arl` prints it as one line (arl_flows.cli.main)
    assert "--modes" in str(result.exception) and "batch" in str(result.exception)
