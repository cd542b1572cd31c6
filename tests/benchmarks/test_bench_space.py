"""``--space`` on ``arl bench ...`` and novel hits counted apart in the benchmarks' reports."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from arl_flows.cli import app
from benchmarks.commands import _space_defaults, _with_space
from benchmarks.molecule_pool import novel_hits, space_of
from benchmarks.tiers import load_druglike_sample


@pytest.mark.parametrize("command", ["scheduler", "advantages", "learning", "pipeline"])
def test_an_unknown_space_is_one_line_naming_the_known_ones(command) -> None:
    result = CliRunner().invoke(app, ["bench", command, "--space", "zinc"])
    assert result.exit_code != 0
    message = result.output + str(result.exception)  # the CLI entry point prints a UserError as one line
    assert "known spaces: druglike, qm9" in message and "Traceback" not in message


def test_novel_hits_are_those_in_neither_the_space_training_set_nor_qm9() -> None:
    moses_test = [f"molecules:{smiles}" for smiles, _ in load_druglike_sample()[:5]]
    qm9 = ["molecules:c1ccncc1", "molecules:CCO"]
    assert novel_hits(qm9, "qm9") == 0 and novel_hits(qm9, "druglike") == 0
    assert novel_hits(moses_test, "druglike") == 5  # MOSES test is disjoint from MOSES train
    assert novel_hits(moses_test + qm9, "qm9") == 5


def test_the_space_reaches_the_runs_and_picks_the_pool_and_the_top_cost() -> None:
    assert _with_space({}, "qm9") == {} and space_of({}) == "qm9"
    config = {"options": {"prior": "x", "space": "qm9"}, "steps": 3}
    assert _with_space(config, "druglike") == {"options": {"prior": "x", "space": "druglike"}, "steps": 3}
    assert space_of(_with_space(config, "druglike")) == "druglike"
    assert _space_defaults("qm9", None, None) == (None, 10.5)
    pool, cost = _space_defaults("druglike", None, None)
    assert pool.name == "druglike_moses.csv" and cost > 60  # minutes per DFT call at drug size
    assert _space_defaults("druglike", pool, 5.0) == (pool, 5.0)


@pytest.mark.slow  # the cheap tiers on 24 drug-sized molecules: ~10 s on 2 loaded cores
def test_bench_scheduler_in_the_druglike_space_checks_its_rules_and_counts_novel_hits(tmp_path) -> None:
    pool, out = tmp_path / "pool.csv", tmp_path / "report.json"
    molecules = load_druglike_sample()[:24]
    with open(pool, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["smiles", "gap_ev"])
        # Made-up top-tier values (the pool file is the truth of the benchmark): half of them in the window.
        writer.writerows((smiles, 3.5 if i % 2 else 5.5) for i, (smiles, _) in enumerate(molecules))
    result = CliRunner().invoke(app, [
        "bench", "scheduler", "--space", "druglike", "--pool", str(pool), "--limit", "16", "--held-out", "8",
        "--window", "3", "4", "--policies", "all,oracle", "--no-learned", "--cache", str(tmp_path / "v.db"),
        "--json", str(out),
    ])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["space"] == "druglike" and report["top_cost"] > 60
    assert report["pool"] == 16 and report["novel_hits"] == report["hits"] > 0  # MOSES test: all novel
    assert "novel" in result.output
