"""The window reward and its moments under a Gaussian belief (hand-checked values)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from verifiers.scheduler import hit_probability, reward_moments, window_score


@pytest.mark.parametrize(
    ("y", "softness", "expected"),
    [(3.5, 0.5, 1.0), (4.5, 0.5, math.exp(-0.5)), (2.0, 0.5, math.exp(-2.0)), (4.5, 0.0, 0.0), (4.0, 0.0, 1.0)],
)
def test_window_score_matches_the_chemistry_suite_shape(y, softness, expected) -> None:
    assert float(window_score(y, 3.0, 4.0, softness)) == pytest.approx(expected)
    from arl_flows.suites.molecules.chemistry import window_score as chem_score

    assert float(window_score(y, 3.0, 4.0, softness)) == pytest.approx(chem_score(y, 3.0, 4.0, softness))


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
