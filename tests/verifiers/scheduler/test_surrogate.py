"""The surrogate learns the map between tiers and its intervals mean what they say."""

from __future__ import annotations

import numpy as np
import pytest

from verifiers.scheduler import Observation, Surrogate


def _pairs(n: int, seed: int, slope: float = 1.0, bias: float = 0.0, noise: float = 0.1, start: int = 0) -> list[Observation]:
    rng = np.random.default_rng(seed)
    y = rng.normal(6.0, 1.2, n)
    fast = slope * y + bias + rng.normal(0.0, noise, n)
    return [Observation(f"k{start + i}", np.zeros(0), {"fast": float(f), "top": float(t)}) for i, (f, t) in enumerate(zip(fast, y))]


def test_no_history_gives_a_wide_honest_prior() -> None:
    s = Surrogate(["fast"], "top")
    mean, std = s.predict([Observation("q", values={"fast": 5.0}), Observation("r", values={})])
    assert mean[0] == pytest.approx(5.0)  # prior: the top tier agrees with the tier below
    assert std.min() > 5.0


def test_learns_a_linear_bias_between_tiers() -> None:
    s = Surrogate(["fast"], "top")
    s.add(_pairs(300, seed=1, bias=1.5, noise=0.1))
    mean, std = s.predict([Observation("q", values={"fast": 6.5}), Observation("r", values={"fast": 8.0})])
    assert mean == pytest.approx([5.0, 6.5], abs=0.05)
    assert 0.05 < std[0] < 0.2


def test_learns_a_slope_and_offset() -> None:
    s = Surrogate(["fast"], "top")
    s.add(_pairs(300, seed=2, slope=0.5, bias=2.0, noise=0.05))
    mean, _ = s.predict([Observation("q", values={"fast": 0.5 * 7.0 + 2.0})])
    assert mean[0] == pytest.approx(7.0, abs=0.1)


def test_observed_top_value_is_exact() -> None:
    s = Surrogate(["fast"], "top")
    mean, std = s.predict([Observation("q", values={"fast": 1.0, "top": 4.2})])
    assert (mean[0], std[0]) == (4.2, 0.0)


@pytest.mark.parametrize("noise", [0.1, 0.5])
def test_intervals_cover_at_their_nominal_rate(noise: float) -> None:
    s = Surrogate(["fast"], "top")
    s.add(_pairs(400, seed=3, slope=0.8, bias=-0.5, noise=noise))
    cal = s.calibration(_pairs(4000, seed=4, slope=0.8, bias=-0.5, noise=noise, start=10_000))
    assert cal["n"] == 4000
    assert 0.44 <= cal["coverage_50"] <= 0.56
    assert 0.86 <= cal["coverage_90"] <= 0.94


def test_more_tiers_sharpen_the_posterior() -> None:
    rng = np.random.default_rng(5)
    obs = []
    for i in range(300):
        y = rng.normal(6, 1.2)
        obs.append(Observation(f"k{i}", np.zeros(0), {"fast": y + rng.normal(0, 0.6), "sim": y + rng.normal(0, 0.1), "top": y}))
    s = Surrogate(["fast", "sim"], "top")
    s.add(obs)
    assert s.typical_std(("fast", "sim")) < 0.5 * s.typical_std(("fast",))


def test_features_must_match_the_featurizer() -> None:
    s = Surrogate(["fast"], "top", n_features=3)
    with pytest.raises(ValueError, match="features"):
        s.add([Observation("k", np.zeros(2), {"fast": 1.0, "top": 1.0})])


def test_calibration_needs_top_values() -> None:
    with pytest.raises(ValueError, match="top-tier value"):
        Surrogate(["fast"], "top").calibration([Observation("k", values={"fast": 1.0})])


def test_gross_errors_become_a_wide_tail_component() -> None:
    rng = np.random.default_rng(6)
    clean = _pairs(600, seed=6, noise=0.1)
    s = Surrogate(["fast"], "top")
    s.add(clean)
    assert s._model(("fast",)).tail_rate == 0.0  # Gaussian noise alone gives no tail
    dirty = [
        Observation(o.key, o.features, {"fast": o.values["fast"] + (rng.normal(0, 3.0) if i % 20 == 0 else 0.0), "top": o.values["top"]})
        for i, o in enumerate(clean)
    ]
    s = Surrogate(["fast"], "top")
    s.add(dirty)
    _, _, rate, scale = s.predict_with_tails([Observation("q", values={"fast": 6.0})])
    assert 0.01 < rate[0] < 0.1 and scale[0] > 4.0


def test_a_value_wrong_by_orders_of_magnitude_is_left_out_of_the_fit() -> None:
    """attack pass: one lab value of 3500 (meV for eV) or 1e200 dragged every later run's Gaussian fit with it."""
    clean = _pairs(100, seed=7, bias=0.5, noise=0.1)
    wrong = [Observation("meV", np.zeros(0), {"fast": 6.5, "top": 3500.0}), Observation("typo", np.zeros(0), {"fast": 6.0, "top": 1e200})]
    rare = Observation("rare", np.zeros(0), {"fast": 15.5, "top": 15.0})  # a real, rare value: 7 stds out, kept
    query = [Observation("q", values={"fast": 6.5})]
    s, ref = Surrogate(["fast"], "top"), Surrogate(["fast"], "top")
    s.add([*clean, *wrong, rare])
    ref.add([*clean, rare])
    assert s.gross_values == {"meV": 3500.0, "typo": 1e200} and ref.gross_values == {}
    assert s.n_pairs == 103  # the verdicts are kept; only the fits leave them out
    assert s.predict(query)[0] == pytest.approx(ref.predict(query)[0]) and s.predict(query)[1] == pytest.approx(ref.predict(query)[1])
    assert s.predict(query)[0][0] == pytest.approx(6.0, abs=0.1)
    # No spread to judge by (a pass/fail property answered mostly 1), or too few answers: nothing is left out.
    binary = Surrogate(["fast"], "top")
    binary.add([Observation(f"b{i}", np.zeros(0), {"fast": 1.0, "top": float(i % 5 != 0)}) for i in range(40)])
    few = Surrogate(["fast"], "top")
    few.add([*clean[:6], wrong[0]])
    assert binary.gross_values == {} and few.gross_values == {}
