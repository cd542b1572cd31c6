"""The prior's MOSES metrics: internal diversity, scaffold novelty, FCD, and `arl prior evaluate` on a saved prior."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from rdkit import Chem, DataStructs
from rdkit.Chem import rdFingerprintGenerator

from arl_flows.suites.molecules.novelty import murcko_scaffold, scaffold_index_file, scaffolds_of, training_index
from arl_flows.suites.molecules.prior import DRUGLIKE_LABELS, DRUGLIKE_PRIOR_DIR, evaluate_prior
from arl_flows.suites.molecules.sample_quality import (
    FCDReference,
    chemnet_statistics,
    fcd,
    fcd_reference,
    internal_diversity,
    invalid_kinds,
    sample_metrics,
    scaffold_novelty,
)
from tests.helpers.cli_runner import arl, assert_no_traceback, assert_user_error

TINY_PRIOR_DIR = Path(__file__).resolve().parents[3] / "data" / "tiny_prior"
DRUGS = ["CC(=O)Nc1ccc(O)cc1", "CC(C)Cc1ccc(C(C)C(=O)O)cc1", "CN1CCC[C@H]1c1cccnc1", "O=C(O)c1ccccc1OC(C)=O",
         "Cn1cnc2c1c(=O)n(C)c(=O)n2C", "CCN(CC)CCNC(=O)c1ccc(N)cc1"]
METRIC_KEYS = {"invalid_kinds", "validity", "uniqueness", "novelty", "internal_diversity", "scaffold_novelty", "fcd",
               "goal_set_copies"}


def _mols(smiles: list[str]) -> list[Chem.Mol]:
    return [Chem.MolFromSmiles(s) for s in smiles]


def _moses_train_sample(n: int) -> list[str]:
    """MOSES train molecules shipped with the package (the goal-labeled subset)."""
    with gzip.open(DRUGLIKE_LABELS, "rt", newline="") as fh:
        return [row["smiles"] for _, row in zip(range(n), csv.DictReader(fh))]


def test_internal_diversity_is_zero_for_identical_molecules_and_positive_for_distinct_ones() -> None:
    assert internal_diversity(_mols(["c1ccccc1O"] * 5)) == pytest.approx(0.0, abs=1e-12)
    assert internal_diversity(_mols(DRUGS)) > 0.5  # unrelated drugs share few Morgan bits
    assert internal_diversity([]) is None


def test_internal_diversity_of_two_molecules_is_half_their_tanimoto_distance() -> None:
    # MOSES averages over every ordered pair, each molecule with itself included: (1 + t + t + 1) / 4.
    a, b = _mols(["CCOc1ccccc1", "CCOc1ccccc1C"])
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=1024)
    t = DataStructs.TanimotoSimilarity(generator.GetFingerprint(a), generator.GetFingerprint(b))
    assert 0 < t < 1
    assert internal_diversity([a, b]) == pytest.approx((1 - t) / 2, rel=1e-6)


def test_scaffold_novelty_counts_distinct_scaffolds_absent_from_the_training_set() -> None:
    training = ["c1ccc(CCN)cc1", "O=C(O)C1CCCCC1"]
    scaffolds = scaffolds_of(training)
    assert scaffolds == {"c1ccccc1", "C1CCCCC1"}
    assert scaffold_novelty(_mols(training + ["c1ccccc1C(C)C"]), scaffolds) == 0.0  # same scaffolds, other side chains
    assert scaffold_novelty(_mols(["c1ccc(cc1)Cc1ccncc1", "Oc1ccccc1"]), scaffolds) == 0.5  # one new scaffold of two
    assert murcko_scaffold(Chem.MolFromSmiles("CCCCO")) is None and scaffold_novelty(_mols(["CCO"]), scaffolds) is None


def test_moses_training_molecules_have_no_novel_scaffold_in_the_shipped_index() -> None:
    index = training_index(scaffold_index_file("moses_train.npy"))
    assert len(index) > 100_000
    train = _moses_train_sample(200)
    assert scaffold_novelty(_mols(train), index) == 0.0
    assert scaffold_novelty(_mols(["C1CC2CCC1C2c1ccc2c(c1)C1CC1C2"]), index) == 1.0  # a made-up polycycle


def test_fcd_is_near_zero_for_the_reference_itself_and_grows_away_from_it(tmp_path: Path) -> None:
    drugs = _moses_train_sample(60)
    reference = chemnet_statistics(drugs, "60 MOSES train molecules")
    reference.save(tmp_path / "ref.npz")
    loaded = FCDReference.load(tmp_path / "ref.npz")  # float32, upper triangle
    assert loaded.source == reference.source and np.allclose(loaded.sigma, loaded.sigma.T)
    assert np.allclose(loaded.sigma, reference.sigma, atol=1e-5)
    assert fcd(drugs, loaded) == pytest.approx(0.0, abs=1e-2)
    small = ["C", "CC", "CO", "CCO", "CN", "CCN", "C=O", "CC#N", "OCCO", "CCCC"]
    assert fcd(small, loaded) > 5.0  # tiny molecules are far from MOSES
    assert fcd(["CCO"], loaded) is None


def test_the_shipped_fcd_reference_is_moses_test() -> None:
    reference = fcd_reference("druglike")
    assert reference is not None and "test" in reference.source and reference.mu.shape == (512,)
    assert fcd_reference("qm9") is None
    metrics = sample_metrics(DRUGS + ["not a smiles"], set(), scaffolds_of(DRUGS[:2]), reference)
    assert set(metrics) == METRIC_KEYS and metrics["validity"] == pytest.approx(6 / 7)
    assert metrics["fcd"] > 0 and 0 < metrics["scaffold_novelty"] < 1 and metrics["internal_diversity"] > 0
    assert metrics["invalid_kinds"]["syntax"] == pytest.approx(1 / 7, abs=1e-4) == sum(metrics["invalid_kinds"].values())


def test_invalid_samples_are_counted_by_what_they_broke() -> None:
    kinds = invalid_kinds(["C1CC", "CC(C", "c1cccc1", "C(C)(C)(C)(C)C", "CCO", "C%", "", "CC)C"])
    assert kinds == {"unclosed_ring": 0.125, "unbalanced_branch": 0.25, "syntax": 0.25, "valence": 0.125,
                     "aromaticity": 0.125, "other": 0.0}
    assert set(invalid_kinds(["CCO"]).values()) == {0.0}


def test_the_shipped_druglike_report_has_the_moses_metrics() -> None:
    report = json.loads((DRUGLIKE_PRIOR_DIR / "pretrain_report.json").read_text())
    assert METRIC_KEYS | {"fcd_reference"} <= set(report)
    assert 0 < report["internal_diversity"] < 1 and 0 <= report["scaffold_novelty"] <= 1 and report["fcd"] > 0
    code, out, err = arl(["prior", "show", "--space", "druglike", "--json"])
    assert code == 0, err[-2000:]
    assert json.loads(out)["report"]["fcd"] == report["fcd"]
    code, out, err = arl(["prior", "show", "--space", "druglike"])
    assert code == 0 and "internal diversity" in out and "scaffold novelty" in out and "FCD" in out


def test_evaluate_recomputes_a_saved_prior_and_updates_its_report(tmp_path: Path) -> None:
    prior = tmp_path / "prior"
    shutil.copytree(TINY_PRIOR_DIR, prior)
    config, metrics = evaluate_prior(prior, samples=12)
    assert config.space == "qm9" and metrics["samples"] == 12 and METRIC_KEYS <= set(metrics)
    assert metrics["fcd"] is None and metrics["fcd_reference"] is None  # no FCD reference for QM9
    assert metrics["goal_set_copies"] is None  # a qm9 prior's goal set is its whole training set: novelty says it
    code, out, err = arl(["prior", "evaluate", "--dir", str(prior), "--samples", "12", "--update-report", "--json",
                          "--no-grammar"])
    assert_no_traceback(code, out, err)
    assert code == 0, err[-2000:]
    shown = json.loads(out)
    assert {k: shown[k] for k in METRIC_KEYS} == {k: metrics[k] for k in METRIC_KEYS}  # seeded: the same samples
    report = json.loads((prior / "pretrain_report.json").read_text())
    assert report["internal_diversity"] == metrics["internal_diversity"] and report["samples"] == 12
    # by default the CLI samples under the SMILES grammar, as runs do, and writes the report's grammar block
    _, constrained = evaluate_prior(prior, samples=12, grammar=True)
    code, out, err = arl(["prior", "evaluate", "--dir", str(prior), "--samples", "12", "--update-report", "--json"])
    assert code == 0, err[-2000:]
    shown = json.loads(out)
    assert shown["grammar"] is True
    assert {k: shown[k] for k in METRIC_KEYS} == {k: constrained[k] for k in METRIC_KEYS}
    updated = json.loads((prior / "pretrain_report.json").read_text())
    assert {k: updated["grammar"][k] for k in METRIC_KEYS} == {k: constrained[k] for k in METRIC_KEYS}
    assert {k: updated[k] for k in METRIC_KEYS} == {k: report[k] for k in METRIC_KEYS}  # the top level stays unconstrained


@pytest.mark.parametrize("make", ["missing", "empty", "file"])
def test_evaluate_with_a_bad_dir_is_one_line(tmp_path: Path, make: str) -> None:
    target = tmp_path / "prior"
    if make == "empty":
        target.mkdir()
    elif make == "file":
        target.write_text("not a prior")
    code, out, err = arl(["prior", "evaluate", "--dir", str(target)])
    assert_user_error(code, err, out=out)
    assert "--dir" in err and str(target) in err


def test_update_report_on_a_broken_report_is_one_line_before_any_sampling(tmp_path: Path) -> None:
    prior = tmp_path / "prior"
    shutil.copytree(TINY_PRIOR_DIR, prior)
    (prior / "pretrain_report.json").write_text("[1, 2]")
    code, out, err = arl(["prior", "evaluate", "--dir", str(prior), "--update-report"])
    assert_user_error(code, err, out=out)
    assert "--update-report" in err and (prior / "pretrain_report.json").read_text() == "[1, 2]"
    code, out, err = arl(["prior", "evaluate", "--dir", str(prior), "--space", "druglike"])
    assert_user_error(code, err, out=out)
    assert "is a qm9 prior" in err


def test_update_report_never_rewrites_the_shipped_prior_by_default() -> None:
    """Without --dir the prior evaluated is the shipped one, inside the installed package: --update-report names it
    and stops (newcomer pass), before any sampling."""
    from arl_flows.suites.molecules.prior import SHIPPED_PRIOR_DIR

    before = (SHIPPED_PRIOR_DIR / "pretrain_report.json").read_bytes()
    code, out, err = arl(["prior", "evaluate", "--update-report"])
    assert_user_error(code, err, out=out)
    assert "name that directory with --dir" in err and "shipped with the package" in err
    assert (SHIPPED_PRIOR_DIR / "pretrain_report.json").read_bytes() == before
