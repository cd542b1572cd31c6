"""The window reward and its moments under a Gaussian belief (hand-checked values)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from verifiers.scheduler import hit_probability, reward_moments, window_score


# (value, softness, expected score) for the window [3, 4]: inside, on an edge, one and two softness outside,
# hard edges, far away, and values that are no number.
WINDOW_TABLE = [
    (3.5, 0.5, 1.0),
    (3.0, 0.5, 1.0),
    (4.0, 0.0, 1.0),
    (3.0, 0.0, 1.0),
    (4.5, 0.5, math.exp(-0.5)),
    (2.0, 0.5, math.exp(-2.0)),
    (4.5, 0.0, 0.0),
    (2.999, 0.0, 0.0),
    (40.0, 0.5, 0.0),
    (math.inf, 0.5, 0.0),
    (-math.inf, 0.0, 0.0),
    (math.nan, 0.5, 0.0),
    (math.nan, 0.0, 0.0),
]


@pytest.mark.parametrize(("y", "softness", "expected"), WINDOW_TABLE)
def test_window_score_table(y, softness, expected) -> None:
    assert float(window_score(y, 3.0, 4.0, softness)) == pytest.approx(expected, abs=1e-12)


def test_window_score_is_elementwise_and_the_window_term_uses_it() -> None:
    from verifiers.objectives import Term

    ys = np.array([row[0] for row in WINDOW_TABLE if row[1] == 0.5])
    expected = [row[2] for row in WINDOW_TABLE if row[1] == 0.5]
    assert window_score(ys, 3.0, 4.0, 0.5) == pytest.approx(expected, abs=1e-12)
    term = Term(property="gap_ev", kind="window", low=3.0, high=4.0, softness=0.5)
    assert term.desirability(ys) == pytest.approx(expected, abs=1e-12)


def test_window_score_refuses_a_reversed_window() -> None:
    with pytest.raises(ValueError, match="low 4.0 is above high 3.0; swap them"):
        window_score(3.5, 4.0, 3.0)


def test_hit_probability() -> None:
    p = hit_probability(np.array([3.5, 5.0, 3.5]), np.array([0.5, 1.0, 0.0]), 3.0, 4.0)
    assert p == pytest.approx([2 * norm.cdf(1.0) - 1, norm.cdf(-1.0) - norm.cdf(-2.0), 1.0])


def test_tail_mixture_of_hit_probability() -> None:
    core = hit_probability(8.0, 0.5, 3.0, 4.0)
    mixed = hit_probability(8.0, 0.5, 3.0, 4.0, tail_rate=0.1, tail_scale=6.0)
    assert mixed == pytest.approx(0.9 * core + 0.1 * hit_probability(8.0, 3.0, 3.0, 4.0))
    assert mixed > 100 * core


def test_reward_moments_hard_window_is_bernoulli_and_soft_matches_monte_carlo() -> None:
    m, v = reward_moments(np.array([3.2]), np.array([0.4]), 3.0, 4.0)
    p = hit_probability(3.2, 0.4, 3.0, 4.0)
    assert (m[0], v[0]) == pytest.approx((p, p * (1 - p)))
    rng = np.random.default_rng(0)
    draws = window_score(rng.normal(4.3, 0.6, 400_000), 3.0, 4.0, 0.5)
    m, v = reward_moments(np.array([4.3]), np.array([0.6]), 3.0, 4.0, 0.5)
    assert m[0] == pytest.approx(draws.mean(), abs=2e-3)
    assert v[0] == pytest.approx(draws.var(), abs=2e-3)
    m0, v0 = reward_moments(np.array([4.3]), np.array([0.0]), 3.0, 4.0, 0.5)
    assert (m0[0], v0[0]) == pytest.approx((math.exp(-0.5 * (0.3 / 0.5) ** 2), 0.0))  # 0.3 eV above the window


@pytest.mark.parametrize(("mean", "std"), [(3.42, 15.0), (3.42, 5.0), (9.0, 40.0), (3.5, 0.05), (-20.0, 3.0), (4.2, 0.01)])
def test_soft_reward_moments_are_exact_for_a_belief_much_wider_than_the_window(mean: float, std: float) -> None:
    """A cold start's belief (about 15 eV of std before any calibration) on a 1 eV window: the Gauss-Hermite rule
    that stood here put no node near the window and scored 1e-16 instead of 0.06, so nothing was worth escalating."""
    from scipy.integrate import quad

    def moment(k: int) -> float:
        f = lambda y: float(window_score(y, 3.0, 4.0, 0.5)) ** k * norm.pdf(y, mean, std)  # noqa: E731
        lo, hi = mean - 12 * std, mean + 12 * std  # the belief's mass; the window's edges split the integral
        return quad(f, lo, hi, points=[e for e in (3.0, 4.0) if lo < e < hi] or None, limit=500, epsabs=1e-13)[0]

    m, v = reward_moments(np.array([mean]), np.array([std]), 3.0, 4.0, softness=0.5)
    assert m[0] == pytest.approx(moment(1), abs=1e-9, rel=1e-7)
    assert v[0] == pytest.approx(moment(2) - moment(1) ** 2, abs=1e-9, rel=1e-6)
