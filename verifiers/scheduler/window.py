"""The target window and the reward it induces, under a Gaussian belief.

The scheduler's reward for a candidate is a window score of its top-tier
value ``y``: 1 inside ``[low, high]`` and a Gaussian fall-off of width
``softness`` outside (0 gives a hard 0/1 window): the ``window`` term of
:mod:`verifiers.objectives`, whose ``window_score`` this module re-exports.
When ``y`` is only known as a posterior ``N(mean, std^2)`` the reward is a random variable too; these
functions give its probability of a hit and its mean and variance, the
latter by Gauss-Hermite quadrature (exact enough for a smooth score).
"""

from __future__ import annotations

import numpy as np

from verifiers.objectives import window_score
from verifiers.scheduler import _normal as normal

__all__ = ["hit_probability", "reward_moments", "window_score"]

# Probabilists' Gauss-Hermite nodes: E[f(Z)], Z ~ N(0, 1) ~= sum(w * f(z)).
_GH_Z, _GH_W = np.polynomial.hermite_e.hermegauss(24)
_GH_W = _GH_W / _GH_W.sum()


def hit_probability(
    mean: np.ndarray,
    std: np.ndarray,
    low: float,
    high: float,
    tail_rate: np.ndarray | float = 0.0,
    tail_scale: np.ndarray | float = 1.0,
) -> np.ndarray:
    """P(low <= y <= high) for y ~ N(mean, std^2) (a zero std gives the indicator).

    With ``tail_rate`` > 0 the belief is the mixture ``(1 - rate) N(mean, std^2) +
    rate N(mean, (tail_scale std)^2)`` that the surrogate uses for gross errors.
    """
    tail_rate = np.asarray(tail_rate, dtype=float)
    if np.any(tail_rate > 0):
        core = hit_probability(mean, std, low, high)
        wide = hit_probability(mean, np.asarray(std) * tail_scale, low, high)
        return (1.0 - tail_rate) * core + tail_rate * wide
    mean = np.asarray(mean, dtype=float)
    std = np.asarray(std, dtype=float)
    safe = np.where(std > 0, std, 1.0)
    p = normal.cdf((high - mean) / safe) - normal.cdf((low - mean) / safe)
    exact = ((mean >= low) & (mean <= high)).astype(float)
    return np.clip(np.where(std > 0, p, exact), 0.0, 1.0)


def reward_moments(
    mean: np.ndarray,
    std: np.ndarray,
    low: float,
    high: float,
    softness: float = 0.0,
    tail_rate: np.ndarray | float = 0.0,
    tail_scale: np.ndarray | float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of the window reward when y ~ N(mean, std^2) (or the tail mixture, as above)."""
    mean = np.asarray(mean, dtype=float)
    std = np.asarray(std, dtype=float)
    tail_rate = np.asarray(tail_rate, dtype=float)
    if np.any(tail_rate > 0):
        m1, v1 = reward_moments(mean, std, low, high, softness)
        m2, v2 = reward_moments(mean, std * tail_scale, low, high, softness)
        m = (1.0 - tail_rate) * m1 + tail_rate * m2
        second = (1.0 - tail_rate) * (v1 + m1 * m1) + tail_rate * (v2 + m2 * m2)
        return m, np.maximum(second - m * m, 0.0)
    if softness <= 0:
        # A hard window's reward is Bernoulli(p): exact moments, no quadrature.
        p = hit_probability(mean, std, low, high)
        return p, p * (1.0 - p)
    ys = mean[..., None] + std[..., None] * _GH_Z  # (..., nodes)
    s = window_score(ys, low, high, softness)  # (..., nodes)
    m1 = s @ _GH_W
    m2 = (s * s) @ _GH_W
    return m1, np.maximum(m2 - m1 * m1, 0.0)
