"""``arl bench scheduler --maximize/--minimize``: cost to confirm the pool's top (bottom) fraction, against the oracle."""

from __future__ import annotations

import pytest
import json

from typer.testing import CliRunner

from arl_flows.cli import app


@pytest.mark.slow  # 30 s on 2 loaded cores, about 15 s idle
def test_bench_scheduler_finds_the_top_fraction_of_a_maximized_value(tmp_path) -> None:
    cache, out = tmp_path / "verdicts.db", tmp_path / "report.json"
    common = ["bench", "scheduler", "--limit", "40", "--held-out", "40", "--cache", str(cache), "--top-cost", "10",
              "--policies", "voi,all,oracle", "--top-fraction", "0.1", "--json", str(out)]
    runner = CliRunner()
    reports = {}
    for direction in ("--maximize", "--minimize"):
        result = runner.invoke(app, [*common, direction])
        assert result.exit_code == 0, result.output
        reports[direction] = report = json.loads(out.read_text())
        assert report["hits"] == 4 and report["window"] is None
        assert report["objective"]["terms"][0]["kind"] == direction.removeprefix("--")
        assert report["objective"]["terms"][0]["midpoint"] == report["target"]["cut"]
        oracle, voi, everything = (report["policies"][p] for p in ("oracle", "voi", "all"))
        assert oracle["calls"] == {"reference-table": 4}  # the oracle asks the top tier about the 4 hits only
        assert voi["final_recall"] == 1.0 and everything["final_recall"] == 1.0
        for level in ("0.5", "0.8", "0.95"):
            assert oracle["cost_to_recall"][level] <= voi["cost_to_recall"][level] <= everything["total_cost"]
            assert voi["ratio_to_oracle"][level] >= 1.0
    top, bottom = reports["--maximize"]["target"], reports["--minimize"]["target"]
    assert top["cut"] > bottom["cut"] and top["top_fraction"] == 0.1


def test_bench_rejects_a_bad_top_fraction_and_both_directions() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["bench", "scheduler", "--maximize", "--minimize"])
    assert result.exit_code != 0 and "not both" in str(result.exception)
    result = runner.invoke(app, ["bench", "scheduler", "--maximize", "--top-fraction", "0.9"])
    assert result.exit_code != 0 and "--top-fraction" in str(result.exception)
