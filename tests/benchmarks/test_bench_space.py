"""``--space`` on ``arl bench ...`` and novel hits counted apart in the benchmarks' reports."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from arl_flows.cli import app
from benchmarks.commands import _pool_inputs, _space_defaults, _with_space
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


def test_the_space_reaches_the_runs_and_picks_the_pool_the_window_and_the_top_cost() -> None:
    assert _with_space({}, None) == {} and space_of({}) == "qm9"
    config = {"options": {"prior": "x", "space": "qm9"}, "steps": 3}
    assert _with_space(config, "druglike") == {"options": {"prior": "x", "space": "druglike"}, "steps": 3}
    assert space_of(_with_space(config, "druglike")) == "druglike"
    # No --space leaves the config's space; a given one wins, qm9 included (it used to count as "not given").
    druglike = {"options": {"space": "druglike"}}
    assert space_of(_with_space(druglike, None)) == "druglike" and space_of(_with_space(druglike, "qm9")) == "qm9"
    # No --window: the space's (druglike: its example run's, where the pool's DFT gaps lie; qm9: 3-4 eV).
    assert _pool_inputs(None, None, None, None)[:3] == (3.0, 4.0, "qm9")
    assert _pool_inputs(None, "druglike", None, None)[:3] == (4.5, 5.5, "druglike")
    assert _pool_inputs((2.0, 3.0), "druglike", None, None)[:2] == (2.0, 3.0)
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


@pytest.mark.slow  # EHT and xTB live on 6 drug-sized molecules: ~10 s on 2 loaded cores
def test_the_druglike_learning_history_is_the_reference_pool_with_its_own_dft(tmp_path) -> None:
    from arl_flows.config import load_config
    from arl_flows.ladder import build_ladder
    from arl_flows.suites.molecules import make_candidate
    from benchmarks.learning import VerdictMemo, _held_out_pool, base_run_overrides
    from benchmarks.molecule_pool import load_pool, space_reference_pool
    from verifiers import registry

    base = load_config(overrides=_with_space(base_run_overrides("druglike"), "druglike"))
    ladder = build_ladder(base)
    top = ladder[-1]
    memo = VerdictMemo(tmp_path / "verdicts.db")
    other = registry.create("pyscf-b3lyp", {"basis": "6-31g", "threads": 1})  # not the pool's level
    try:
        held = _held_out_pool("druglike", top, ladder, memo, 6, seed=3)
        with pytest.raises(ValueError, match=r"make the last tier pyscf-b3lyp at the pool's level"):
            _held_out_pool("druglike", other, [*ladder[:-1], other], memo, 6, seed=3)
    finally:
        for v in (*ladder, other):
            getattr(v, "close", lambda: None)()
    assert top.name == "pyscf-b3lyp" and top.params.basis.lower() == "6-31g*"
    pool = {make_candidate(s).key: gap for s, gap in load_pool(space_reference_pool("druglike"))}
    assert len(held) == 6
    for candidate, values in held:
        assert set(values) == {v.name for v in ladder}
        assert values[top.name] == pool[candidate.key]  # the pool's own DFT ...
    # ... never recomputed: the memo holds the cheap tiers' verdicts only.
    assert {name for name, *_ in (key[1:] for key in memo.verdicts)} == {v.name for v in ladder[:-1]}
    assert memo.computed_s < 60  # seconds of EHT and xTB, not minutes of DFT per molecule


def test_bench_learning_in_another_space_takes_its_example_settings_and_checks_the_top_tier(tmp_path) -> None:
    from benchmarks.commands import EXAMPLES, _workdir_and_overrides

    # Without --config, --space druglike runs with the space's example settings: its window, token limit and ladder.
    settings = _workdir_and_overrides(tmp_path, EXAMPLES / "druglike.toml")
    assert settings["options"]["space"] == "druglike" and settings["scheduler"]["target_low"] > 4.0
    assert settings["tiers"][-1]["verifier"] == "pyscf-b3lyp"
    # A ladder the space cannot run, or whose top tier is not at the reference pool's level, is one line before any
    # training.
    for top, expected in (
        ('{ verifier = "reference-or-dft" }', "tiers[1] (reference-or-dft): basis '6-31G' has no functions for Br"),
        ('{ verifier = "pyscf-b3lyp", params = { density_fitting = false } }', "but the top tier is pyscf-b3lyp with xc=B3LYPG"),
    ):
        config = tmp_path / "ladder.toml"
        config.write_text(f'tiers = [{{ verifier = "rdkit-eht" }}, {top}]\n')
        result = CliRunner().invoke(
            app, ["bench", "learning", "--space", "druglike", "--config", str(config), "--workdir", str(tmp_path / "w"),
                  "--cache", str(tmp_path / "v.db"), "--seeds", "1", "--regimes", "cascade"]
        )
        assert result.exit_code != 0
        message = result.output + str(result.exception)
        assert expected in message and "Traceback" not in message and len(str(result.exception).splitlines()) <= 1
