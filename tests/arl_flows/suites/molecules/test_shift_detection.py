"""Shift detection with the shipped network (Surrogate.shift, the stack's shift noise, the blend with the cold Δ-model).

Every test has its in-distribution control: QM9 molecules from the network's test split, with their true gaps.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from arl_flows.suites.molecules.graph import GraphModelConfig
from arl_flows.suites.molecules.pretrained import LOWER_TIERS, load_lower_tiers, load_shipped, split_of
from verifiers.scheduler import Observation, Surrogate, SurrogatePrior

TOP = "pyscf-b3lyp"
DRUGLIKE = Path(__file__).resolve().parents[4] / "benchmarks" / "data" / "pools" / "druglike_moses.smiles.csv"


@pytest.fixture(scope="module")
def test_rows() -> list[dict]:
    return [r for r in load_lower_tiers() if split_of(r["smiles"]) == "test" and np.isfinite(r["gfn2-xtb"])
            and np.isfinite(r["rdkit-eht"])]


def _surrogate(**prior) -> Surrogate:
    shipped = load_shipped(LOWER_TIERS, GraphModelConfig())
    assert shipped is not None, "the shipped surrogate is missing or does not match the default network shape"
    s = Surrogate(list(LOWER_TIERS), TOP, prior=SurrogatePrior(**prior))
    s.attach_learned(shipped)
    return s


def _obs(rows: list[dict], top=None) -> list[Observation]:
    out = []
    for r in rows:
        values = {t: r[t] for t in LOWER_TIERS}
        if top is not None:
            values[TOP] = top(r)
        out.append(Observation(f"molecules:{r['smiles']}", np.zeros(0), values, r["smiles"]))
    return out


@pytest.mark.slow  # the shipped network on a few hundred molecules, and its shift reference
def test_molecules_far_from_the_training_data_get_wider_stds_and_qm9_molecules_do_not(test_rows) -> None:
    with open(DRUGLIKE, newline="") as fh:
        druglike = [r["smiles"] for r in csv.DictReader(fh)][:30]
    far = [Observation(f"molecules:{s}", np.zeros(0), {}, s) for s in druglike]
    near = [Observation(f"molecules:{r['smiles']}", np.zeros(0), {}, r["smiles"]) for r in test_rows[::50][:30]]
    s, plain = _surrogate(), _surrogate(shift_widen=0.0)
    far_factor, near_factor = s.shift((), far), s.shift((), near)
    # A score is a ratio to the calibration split's 90th percentile: a test-split molecule is as far out as the
    # network's calibration vouches for, so most are not widened at all.
    assert np.median(far_factor) > 1.15 and np.mean(far_factor > 1.0) > 0.9, far_factor
    assert np.median(near_factor) == 1.0 and np.mean(near_factor > 1.0) < 0.2, near_factor
    ratio_far = s.predict(far)[1] / plain.predict(far)[1]
    ratio_near = s.predict(near)[1] / plain.predict(near)[1]
    assert np.median(ratio_far) > 1.15 and np.median(ratio_near) == pytest.approx(1.0)


@pytest.mark.slow
def test_the_runs_residuals_widen_a_wrong_model_and_leave_a_right_one(test_rows) -> None:
    rng = np.random.default_rng(0)
    history, probe = test_rows[:80], test_rows[1000:1200]
    noise = {r["smiles"]: rng.normal(0.0, 0.5) for r in history + probe}
    shifted = lambda r: r["gap_ev"] + noise[r["smiles"]]  # noqa: E731  errors the network cannot know
    wrong, right = _surrogate(), _surrogate()
    wrong.add(_obs(history, shifted))
    # The control on 240 answers: on the first 80 alone the network's own intervals happen to miss 15 (19%, where
    # a calibrated model misses 8 on average; the next three windows of 80 miss 3, 6 and 5), which the run then
    # reads as noise of its own (tau 0.14): the 90% quantile of 80 residuals is that noisy.
    right.add(_obs(test_rows[:240], lambda r: r["gap_ev"]))
    assert wrong._stack(LOWER_TIERS).tau > 0.3
    assert right._stack(LOWER_TIERS).tau < 0.1  # control: the model's own stds already cover
    cal_wrong = wrong.calibration(_obs(probe, shifted), pattern=list(LOWER_TIERS))
    cal_right = right.calibration(_obs(probe, lambda r: r["gap_ev"]), pattern=list(LOWER_TIERS))
    assert 0.82 <= cal_wrong["coverage_90"] <= 0.97, cal_wrong
    assert 0.82 <= cal_right["coverage_90"] <= 0.97, cal_right


@pytest.mark.slow
def test_a_shipped_model_that_is_wrong_here_gives_way_to_the_runs_cold_delta_model(test_rows) -> None:
    history, probe = test_rows[:60], test_rows[1000:1200]
    other = lambda r: 2.0 * r["gfn2-xtb"] - 3.0  # noqa: E731  another property, a function of the cheap tier
    wrong, right = _surrogate(), _surrogate()
    wrong.add(_obs(history, other))
    right.add(_obs(history, lambda r: r["gap_ev"]))
    assert wrong._stack(LOWER_TIERS).weight < 0.05
    assert right._stack(LOWER_TIERS).weight > 0.95  # control: the right model keeps its weight
    cal = wrong.calibration(_obs(probe, other), pattern=list(LOWER_TIERS))
    assert cal["mean_abs_error"] < 0.1, cal  # the cold Δ-model learned it; the network alone is off by eV


def test_training_fingerprints_are_kept_on_disk_and_a_damaged_copy_is_recomputed(tmp_path, monkeypatch) -> None:
    from rdkit import DataStructs

    from arl_flows.suites.molecules.pretrained import _fingerprints, _training_fingerprints

    monkeypatch.setenv("ARL_CACHE_DIR", str(tmp_path))
    smiles = ["CCO", "not a molecule", "c1ccccc1O", "CC(=O)N"]
    fresh = _fingerprints(smiles)
    assert _training_fingerprints(smiles) == fresh
    (cached,) = (tmp_path / "fingerprints").glob("*.npz")
    again = _training_fingerprints(smiles)  # read back from the disk copy
    assert again[1] is None and all(DataStructs.TanimotoSimilarity(a, b) == 1.0 for a, b in
                                    zip([again[i] for i in (0, 2, 3)], [fresh[i] for i in (0, 2, 3)]))
    others = ["C", "N", "O", "F"]
    assert _training_fingerprints(others) == _fingerprints(others)  # other molecules: another copy
    (other,) = set(cached.parent.glob("*.npz")) - {cached}
    cached.write_bytes(other.read_bytes())  # the disk copy is what a new process reads
    assert _training_fingerprints(smiles) == _fingerprints(others)
    whole = other.read_bytes()
    for damaged in (b"damaged", b"", whole[: len(whole) // 2]):  # not a zip, empty, truncated: recomputed, never an error
        cached.write_bytes(damaged)
        assert _training_fingerprints(smiles) == fresh
    assert sorted(p.name for p in cached.parent.iterdir()) == sorted([cached.name, other.name])  # no partial files left
