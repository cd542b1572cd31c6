"""The druglike prior: its tokenizer covers MOSES, the space picks it, `arl prior --space`, and a tiny pretrain."""

from __future__ import annotations

import csv
import gzip
import json
import warnings
from pathlib import Path

import pytest

from arl_flows.suites.molecules.options import MoleculeOptions, PretrainConfig, default_prior_config
from arl_flows.suites.molecules.prior import (
    DRUGLIKE_LABELS,
    DRUGLIKE_PRIOR_DIR,
    SHIPPED_PRIOR_DIR,
    LowQualityPrior,
    druglike_goal_labels,
    load_or_pretrain,
    prior_cache_key,
    pretrain,
    shipped_prior,
)
from arl_flows.suites.molecules.smiles import build_smiles_tokenizer, split_smiles
from tests.helpers.cli_runner import arl, assert_no_traceback, assert_user_error



def _moses_sample() -> list[str]:
    """MOSES molecules shipped with the package: the fast-tier-labeled subset of MOSES train."""
    with gzip.open(DRUGLIKE_LABELS, "rt", newline="") as fh:
        return [row["smiles"] for row in csv.DictReader(fh)]


def test_the_tokenizer_round_trips_moses_molecules() -> None:
    smiles = _moses_sample()
    assert len(smiles) >= 1000
    tokenizer = build_smiles_tokenizer()  # base vocabulary only: MOSES's symbols must be in it or be learned
    learned = build_smiles_tokenizer(smiles)
    assert {"Cl", "Br", "[nH]"} <= set(learned.get_vocab()) and all("Cl" in split_smiles(s) for s in smiles if "Cl" in s)
    for s in smiles:
        ids = learned(s, add_special_tokens=False)["input_ids"]
        assert learned.unk_token_id not in ids, s
        assert learned.decode(ids) == s
    unknown = {t for s in smiles for t in split_smiles(s)} - set(tokenizer.get_vocab())
    assert not unknown or all(t.startswith("[") or t.startswith("%") for t in unknown), unknown


def test_the_druglike_space_picks_its_prior() -> None:
    qm9, druglike = MoleculeOptions(), MoleculeOptions(space="druglike")
    assert qm9.prior == PretrainConfig() and druglike.prior == default_prior_config("druglike")
    assert prior_cache_key(qm9.prior) == json.loads((SHIPPED_PRIOR_DIR / "pretrain_report.json").read_text())["config_hash"]
    assert prior_cache_key(druglike.prior) != prior_cache_key(qm9.prior)
    # A field set in [options.prior] overrides the space's default; the rest stays the space's.
    tuned = MoleculeOptions(space="druglike", prior={"seed": 3})
    assert tuned.prior.seed == 3 and tuned.prior.n_positions == druglike.prior.n_positions
    with pytest.raises(ValueError, match="differs from the run's space"):
        MoleculeOptions(space="qm9", prior={"space": "druglike"})


def test_the_druglike_prior_ships_above_its_gate_and_writes_kekule_smiles() -> None:
    config = default_prior_config("druglike")
    assert shipped_prior(config) == DRUGLIKE_PRIOR_DIR and config.smiles_form == "kekule"
    report = json.loads((DRUGLIKE_PRIOR_DIR / "pretrain_report.json").read_text())
    assert report["steps"] == config.max_steps and not report["truncated"] and report["molecules"] > 1_500_000
    assert report["labeled_molecules"] == len(_moses_sample()) and len(report["goal_steering"]) == 3
    # Above the validity gate (docs/benchmarks.md, "Druglike prior"): it loads without a LowQualityPrior warning.
    assert report["validity"] >= config.min_validity and report["grammar"]["validity"] >= 0.95
    assert report["invalid_kinds"]["aromaticity"] == 0.0  # Kekule SMILES: nothing left to kekulize
    with warnings.catch_warnings():
        warnings.simplefilter("error", LowQualityPrior)
        policy, loaded = load_or_pretrain(config)
    assert loaded.config_hash == prior_cache_key(config) and policy.tokenizer.unk_token_id not in policy.tokenizer("CCCl")["input_ids"]


def test_goal_labels_are_on_the_dft_scale_and_ordered_like_the_fast_tier() -> None:
    labels = druglike_goal_labels()
    with gzip.open(DRUGLIKE_LABELS, "rt", newline="") as fh:
        raw = [float(row["eht_gap_ev"]) for row in csv.DictReader(fh)]
    assert len(labels) == len(raw)
    order = sorted(range(len(raw)), key=raw.__getitem__)
    assert [labels[i][1] for i in order] == sorted(g for _, g in labels)  # a rising line: the order is kept


def test_a_tiny_druglike_pretrain_runs_on_a_moses_csv(tmp_path: Path) -> None:
    data = tmp_path / "train.csv"
    data.write_text("SMILES\n" + "\n".join(_moses_sample()[:300]) + "\n")
    config = default_prior_config("druglike").model_copy(update=dict(
        n_layer=1, n_embd=32, n_head=2, batch_size=16, max_steps=4, warmup_steps=1, eval_samples=10,
        min_validity=0.0, data=str(data)))
    policy, report = pretrain(config)
    assert report.steps == 4 and report.molecules == 300 and report.labeled_molecules == len(_moses_sample())
    assert len(report.goal_steering) == 3 and all(row["samples"] > 0 for row in report.goal_steering)
    assert 0 <= report.novelty <= 1 and policy.tokenizer.convert_tokens_to_ids("Cl") != policy.tokenizer.unk_token_id
    assert report.goal_set_copies is not None and 0 <= report.goal_set_copies <= 1
    assert report.grammar is not None and report.grammar["goal_set_copies"] is not None
    assert report.fcd_reference is not None and "test" in report.fcd_reference  # MOSES's metrics come with every pretrain
    # data is where the molecules came from, not which prior: the same key from another path.
    assert prior_cache_key(config) == prior_cache_key(config.model_copy(update={"data": "/elsewhere/train.csv.gz"}))


def test_a_druglike_pretrain_without_data_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARL_HOME", str(tmp_path))
    with pytest.raises(ValueError, match="pass --data"):
        load_or_pretrain(default_prior_config("druglike").model_copy(update={"seed": 5}), root=tmp_path)
    code, out, err = arl(["prior", "pretrain", "--space", "druglike", "--seed", "5"])
    assert_user_error(code, err, out=out)
    assert "--data" in err and "pretraining" not in out  # refused before it says it starts (newcomer pass)
    code, out, err = arl(["prior", "pretrain", "--space", "druglike", "--seed", "5", "--data", str(tmp_path / "nope.csv")])
    assert_user_error(code, err, out=out)
    assert "is not a file" in err
    code, out, err = arl(["prior", "pretrain", "--seed", "5", "--data", str(tmp_path / "nope.csv")])
    assert_user_error(code, err, out=out)
    assert "--space druglike" in err


def test_prior_show_takes_the_space() -> None:
    shown = {}
    for space in ("qm9", "druglike"):
        code, out, err = arl(["prior", "show", "--space", space, "--json"])
        assert_no_traceback(code, out, err)
        assert code == 0, err[-2000:]
        shown[space] = json.loads(out)
    assert shown["qm9"]["space"] == "qm9" and shown["qm9"]["path"] == str(SHIPPED_PRIOR_DIR)
    assert shown["druglike"]["space"] == "druglike" and shown["druglike"]["path"] == str(DRUGLIKE_PRIOR_DIR)
    assert shown["druglike"]["source"] == "shipped with the package"
    assert {"validity", "uniqueness", "novelty"} <= set(shown["druglike"]["report"])
    code, out, err = arl(["prior", "show", "--space", "zinc"])
    assert_user_error(code, err, out=out)
    assert "known spaces: druglike, qm9" in err
    assert "validation error" not in err and "pydantic" not in err  # the space's own line, not the options model's


def test_the_druglike_example_loads_and_dry_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from arl_flows.config import load_config

    example = Path(__file__).resolve().parents[4] / "examples" / "druglike.toml"
    for profile in ("default", "quick"):
        config = load_config(example, profile)
        assert config.suite_options.space == "druglike" and shipped_prior(config.suite_options.prior) == DRUGLIKE_PRIOR_DIR
        assert [t.verifier for t in config.tiers][:2] == ["rdkit-eht", "gfn2-xtb"]
    monkeypatch.setenv("ARL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ARL_DATABASE_URL", raising=False)
    code, out, err = arl(["run", "--config", str(example), "--profile", "quick", "--dry-run"])
    assert code == 0, err[-2000:]
    assert out.startswith("dry run: the config is valid") and "rdkit-eht" in out


def test_kekule_training_smiles_keep_rdkit_s_reasons_for_the_evaluation() -> None:
    from arl_flows.suites.molecules.prior import kekule_smiles
    from arl_flows.suites.molecules.sample_quality import invalid_kinds

    assert kekule_smiles(["c1ccncc1", "Cc1ccccc1Cl"]) == ["C1=CC=NC=C1", "CC1=CC=CC=C1Cl"]
    with pytest.raises(ValueError, match="does not parse"):
        kekule_smiles(["c1cc"])
    # The conversion silences RDKit only while it runs: the report's evaluation still reads why a sample fails.
    assert invalid_kinds(["C1CC", "CC(C"])["unclosed_ring"] == 0.5
