"""The druglike space's shipped surrogate: xTB learned from many cheap labels, DFT from a correction fitted on few."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from arl_flows.suites.molecules.graph import GraphModel, GraphModelConfig
from arl_flows.suites.molecules.multifidelity import (
    LABELS_CSV,
    TOP,
    MultiFidelitySurrogate,
    load_druglike,
    load_moses_lower_tiers,
)
from arl_flows.suites.molecules.learner import shipped_model
from arl_flows.suites.molecules.pretrained import LOWER_TIERS, ShippedSurrogate, load_shipped, split_of
from verifiers.scheduler.learned import (
    CalibratedModel,
    EnsembleModel,
    FineTunableModel,
    ShiftAwareModel,
    TrainingAwareModel,
)

POOL = Path(__file__).resolve().parents[4] / "benchmarks" / "data" / "pools" / "druglike_moses.csv"


@pytest.fixture(scope="module")
def shipped() -> MultiFidelitySurrogate:
    got = load_druglike(LOWER_TIERS, GraphModelConfig())
    assert got is not None, "the druglike surrogate ships in arl_flows/suites/molecules/data/surrogate_druglike/"
    return got


def _pool(n: int = 60) -> list[dict[str, str]]:
    with open(POOL, newline="") as fh:
        return list(csv.DictReader(fh))[:n]


def test_each_shipped_model_loads_by_its_name(shipped: MultiFidelitySurrogate) -> None:
    assert isinstance(shipped_model(LOWER_TIERS, GraphModelConfig(), "multifidelity"), MultiFidelitySurrogate)
    assert isinstance(shipped_model(LOWER_TIERS, GraphModelConfig()), ShippedSurrogate)  # qm9, the default
    assert load_shipped(LOWER_TIERS, GraphModelConfig()) is shipped_model(LOWER_TIERS, GraphModelConfig(), "qm9")
    assert shipped_model(("rdkit-eht",), GraphModelConfig(), "multifidelity") is None  # another ladder
    assert load_druglike(LOWER_TIERS, GraphModelConfig(hidden=32)) is None  # another shape
    for capability in (CalibratedModel, EnsembleModel, ShiftAwareModel, TrainingAwareModel):
        assert isinstance(shipped, capability)
    assert not isinstance(shipped, FineTunableModel)  # the run learns the correction in its stack instead


def test_a_run_starts_from_the_surrogate_its_options_name() -> None:
    """QM9's network is every space's default (measured better on the druglike pool); the option picks the other."""
    from arl_flows.config import build_config
    from arl_flows.suites import suite_for
    from verifiers.scheduler import SchedulerConfig

    learned = SchedulerConfig().learned

    def start(options: dict) -> object:
        suite = suite_for(build_config({"suite": "molecules", "options": options}))
        return suite.surrogate_learner(list(LOWER_TIERS), learned, 0).pretrained()

    assert isinstance(start({"space": "druglike", "surrogate": "multifidelity"}), MultiFidelitySurrogate)
    assert isinstance(start({"space": "druglike"}), ShippedSurrogate)
    assert isinstance(start({}), ShippedSurrogate)
    with pytest.raises(ValueError, match="surrogate"):
        build_config({"suite": "molecules", "options": {"surrogate": "chemprop"}})


def test_given_xtb_the_prediction_is_the_dft_correction(shipped: MultiFidelitySurrogate) -> None:
    corr = shipped.report["correction"]
    rows = _pool(20)
    values = np.array([[float(r["eht_gap_ev"]), float(r["xtb_gap_ev"])] for r in rows])
    mean, std, spread = shipped.predict_full([r["smiles"] for r in rows], values)
    np.testing.assert_allclose(mean, corr["a"] + corr["b"] * values[:, 1])
    assert np.all(std >= corr["sigma"]) and np.all(spread == 0)
    # Without xTB the network's estimate goes through the same correction, and the std holds its error too.
    hidden = values.copy()
    hidden[:, 1] = math.nan
    mean2, std2, spread2 = shipped.predict_full([r["smiles"] for r in rows], hidden)
    assert np.all(std2 > std) and np.all(spread2 > 0)
    assert 0.5 < corr["b"] < 1.5 and corr["n"] >= 20  # a correction of xTB, fitted on tens of DFT labels


def test_on_molecules_it_never_saw_it_predicts_dft_better_than_the_qm9_network() -> None:
    """The reference pool (MOSES test, DFT computed by our top tier): neither network trained on it."""
    rows = _pool(60)
    smiles = [r["smiles"] for r in rows]
    dft = np.array([float(r["dft_gap_ev"]) for r in rows])
    eht_only = np.array([[float(r["eht_gap_ev"]), math.nan] for r in rows])
    both = np.array([[float(r["eht_gap_ev"]), float(r["xtb_gap_ev"])] for r in rows])
    druglike = shipped_model(LOWER_TIERS, GraphModelConfig(), "multifidelity")
    qm9 = shipped_model(LOWER_TIERS, GraphModelConfig(), "qm9")
    assert not any(druglike.seen(s) for s in smiles)
    for values in (eht_only, both):
        mae_druglike = float(np.mean(np.abs(druglike.predict(smiles, values)[0] - dft)))
        mae_qm9 = float(np.mean(np.abs(qm9.predict(smiles, values)[0] - dft)))
        assert mae_druglike < 0.6 and mae_druglike < mae_qm9, (mae_druglike, mae_qm9)
    # Its 90% intervals, before any answer of a run, cover most of them (the run's stack then recalibrates).
    mean, std = druglike.predict(smiles, both)
    assert np.mean(np.abs(dft - mean) <= 1.645 * std) >= 0.75


def test_it_knows_its_training_data_and_flags_molecules_far_from_it(shipped: MultiFidelitySurrogate) -> None:
    table = load_moses_lower_tiers(LABELS_CSV)
    trained = next(r["smiles"] for r in table if split_of(r["smiles"]) == "train" and not np.isfinite(r[TOP]))
    held = next(r["smiles"] for r in table if split_of(r["smiles"]) == "test" and not np.isfinite(r[TOP]))
    assert shipped.seen(trained) and not shipped.seen(held) and not shipped.seen("")
    qm9_small = ["CCO", "OC=O", "N#CC#N", "CC(C)=O"]
    drug = [r["smiles"] for r in _pool(8)]
    nan = np.full((4, 2), math.nan)
    far = shipped.shift_scores(qm9_small, nan)[:, 0]
    near = shipped.shift_scores(drug[:4], nan)[:, 0]
    assert np.nanmedian(far) > np.nanmedian(near)
    given = np.array([[1.0, 3.0]] * 4)
    assert np.all(np.isnan(shipped.shift_scores(drug[:4], given)[:, 1]))  # xTB shown: the network is not asked


def test_the_training_script_writes_a_loadable_surrogate(tmp_path: Path) -> None:
    from benchmarks import train_druglike_surrogate as train

    train.main(["--epochs", "1", "--members", "1", "--limit", "300", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "report.json").read_text())
    assert set(report["patterns"]) == {"", "rdkit-eht", "rdkit-eht+gfn2-xtb"}
    assert report["correction"]["n"] == report["dft_labelled"]["rdkit-eht+gfn2-xtb"]["n"] >= 20
    assert report["config"]["members"] == 1 and report["training"]["cpu_s"] > 0
    model = GraphModel(["rdkit-eht"], GraphModelConfig(members=1))
    assert model.load(tmp_path / "xtb_ensemble.pt")
    mean, std = MultiFidelitySurrogate(model, report).predict(["CC(=O)Nc1ccc(O)cc1"], np.array([[3.5, math.nan]]))
    assert np.isfinite(mean).all() and (std > 0).all()
    # --keep-network refits the calibration and the correction around the same weights, with their training record.
    train.main(["--members", "1", "--limit", "300", "--out", str(tmp_path), "--keep-network"])
    again = json.loads((tmp_path / "report.json").read_text())
    assert again["weights_sha256"] == report["weights_sha256"] and again["training"] == report["training"]
    assert again["correction"]["a"] == pytest.approx(report["correction"]["a"])
    with pytest.raises(SystemExit, match="--keep-network: no trained network of this shape"):
        train.main(["--members", "2", "--limit", "300", "--out", str(tmp_path), "--keep-network"])


def test_the_correction_needs_dft_labels(tmp_path: Path) -> None:
    from benchmarks import train_druglike_surrogate as train

    with pytest.raises(SystemExit, match="needs at least 5 DFT-labelled molecules"):
        train.fit_correction(np.array([3.0, 3.5]), np.array([5.0, 5.6]))
    with pytest.raises(SystemExit, match="no such file; run python -m benchmarks.moses_lower_tiers export"):
        train.main(["--table", str(tmp_path / "missing.csv.gz")])
