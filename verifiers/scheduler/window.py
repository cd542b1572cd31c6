"""The target window and the reward it induces, under a Gaussian belief.

The scheduler's reward for a candidate is a window score of its top-tier
value ``y``: 1 inside ``[low, high]`` and a Gaussian fall-off of width
``softness`` outside (0 gives a hard 0/1 window): the ``window`` term of
:mod:`verifiers.objectives`, whose ``window_score`` this module re-exports.
When ``y`` is only known as a posterior ``N(mean, std^2)`` the reward is a random variable too; these
functions give its probability of a hit and its mean and variance, in closed form: a Gaussian fall-off
integrated against a Gaussian belief is a Gaussian integral over a half-line. (A 24-node Gauss-Hermite rule
used to stand here; its nodes straddle a narrow window once the std is a few times its width, so a belief
of 3.4 +- 15 eV on a 3-4 eV window scored 1e-16 instead of 0.06, and an uncalibrated cold start never
escalated anything.)
"""

from __future__ import annotations

import numpy as np

from verifiers.objectives import window_score
from verifiers.scheduler import _normal as normal

__all__ = ["hit_probability", "reward_moments", "window_score"]



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
    # The score squared is the same window with softness / sqrt(2): both moments are one formula.
    m1 = _soft_window_mean(mean, std, low, high, softness)
    m2 = _soft_window_mean(mean, std, low, high, softness / np.sqrt(2.0))
    return m1, np.maximum(m2 - m1 * m1, 0.0)


def _soft_window_mean(mean: np.ndarray, std: np.ndarray, low: float, high: float, width: float) -> np.ndarray:
    """E[window_score(y, low, high, width)] for y ~ N(mean, std^2), exactly.

    Inside the window the score is 1: P(low <= y <= high). Above it, with q^2 = std^2 + width^2,
    the integral of exp(-(y - high)^2 / 2 width^2) N(y; mean, std^2) over y > high is
    (width / q) exp(-(high - mean)^2 / 2 q^2) Phi(width (mean - high) / (std q)); below it, the mirror image.
    """
    mean, std = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(std, dtype=float))
    safe = np.where(std > 0, std, 1.0)
    q = np.sqrt(safe * safe + width * width)
    inside = normal.cdf((high - mean) / safe) - normal.cdf((low - mean) / safe)
    above = width / q * np.exp(-0.5 * ((high - mean) / q) ** 2) * normal.cdf(width * (mean - high) / (safe * q))
    below = width / q * np.exp(-0.5 * ((low - mean) / q) ** 2) * normal.cdf(width * (low - mean) / (safe * q))
    value = np.where(std > 0, np.clip(inside + above + below, 0.0, 1.0), window_score(mean, low, high, width))
    return np.where(np.isnan(mean), 0.0, value)
