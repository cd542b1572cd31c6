"""An objective's reward under the scheduler's belief about the top tier's value.

The exact properties of a candidate (e.g. from the fast tier) are known; its
top-tier value ``y`` is a posterior ``N(mean, std^2)``, possibly with the
surrogate's gross-error tail ``(1 - rate) N(mean, std^2) + rate N(mean,
(scale std)^2)``. The reward ``R(y)`` with the exact properties plugged in is
then a random variable; :func:`objective_moments` gives its mean and variance
and :func:`discovery_value` what confirming the candidate at the top tier is
worth. A window alone on ``y`` goes to :mod:`.window` (exact moments: Bernoulli
for a hard window, a closed form for a soft one).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from verifiers.objectives import Objective
from verifiers.scheduler import _normal as normal
from verifiers.scheduler.window import hit_probability, reward_moments

__all__ = ["discovery_value", "objective_moments"]

# Gauss-Legendre nodes on [-1, 1], mapped onto pieces of z in [-_Z_SPAN, _Z_SPAN] split at the reward's jumps:
# a hard window or threshold makes R(y) discontinuous, which a Gauss-Hermite rule over the whole line smears.
_GL_X, _GL_W = np.polynomial.legendre.leggauss(32)
_Z_SPAN = 8.0


def objective_moments(
    objective: Objective,
    mean: np.ndarray,
    std: np.ndarray,
    exact: Mapping[str, np.ndarray],
    tail_rate: np.ndarray | float = 0.0,
    tail_scale: np.ndarray | float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of the reward of each candidate; ``exact`` maps property name -> (n,) values (NaN: unknown)."""
    window = objective.as_window()
    if window is not None:
        return reward_moments(mean, std, *window, tail_rate=tail_rate, tail_scale=tail_scale)
    mean = np.asarray(mean, dtype=float)
    std = np.asarray(std, dtype=float)
    tail_rate = np.asarray(tail_rate, dtype=float)
    if np.any(tail_rate > 0):
        m1, v1 = objective_moments(objective, mean, std, exact)
        m2, v2 = objective_moments(objective, mean, std * tail_scale, exact)
        m = (1.0 - tail_rate) * m1 + tail_rate * m2
        second = (1.0 - tail_rate) * (v1 + m1 * m1) + tail_rate * (v2 + m2 * m2)
        # A known value (std 0) has both components equal: take v1 exactly, not a difference of rounded squares.
        return m, np.where(np.broadcast_to(std, np.shape(m)) == 0, v1, np.maximum(second - m * m, 0.0))
    shape = np.broadcast(mean, std).shape
    mean, std = np.broadcast_to(mean, shape).ravel(), np.broadcast_to(std, shape).ravel()
    # Exact values align with the leading axes of ``mean`` (e.g. (k,) against a (k, nodes) preposterior).
    flat = {k: np.broadcast_to(_lead(v, len(shape)), shape).ravel() for k, v in exact.items()}
    if not objective.value_terms:  # nothing uncertain: the exact properties decide
        r = np.broadcast_to(objective.score(flat), mean.shape).astype(float)
        return r.reshape(shape), np.zeros(shape)
    n = mean.shape[0]
    safe = np.where(std > 0, std, 1.0)
    cuts = [np.where(std > 0, np.clip((e - mean) / safe, -_Z_SPAN, _Z_SPAN), 0.0) for e in objective.edges()]
    bounds = np.sort(np.column_stack([np.full(n, -_Z_SPAN), *cuts, np.full(n, _Z_SPAN)]), axis=1)  # (n, pieces + 1)
    lo, hi = bounds[:, :-1], bounds[:, 1:]  # (n, pieces)
    half = 0.5 * (hi - lo)
    z = (0.5 * (lo + hi))[..., None] + half[..., None] * _GL_X  # (n, pieces, nodes)
    w = (half[..., None] * _GL_W * normal.pdf(z)).reshape(n, -1)  # (n, pieces * nodes)
    w = w / w.sum(axis=1, keepdims=True)
    y = mean[:, None] + std[:, None] * z.reshape(n, -1)  # (n, pieces * nodes)
    r = objective.score({k: v[:, None] for k, v in flat.items()}, value=y)  # (n, pieces * nodes)
    m1 = (r * w).sum(axis=1)
    m2 = (r * r * w).sum(axis=1)
    var = np.where(std > 0, np.maximum(m2 - m1 * m1, 0.0), 0.0)  # a known value: exactly 0, not rounding noise
    return m1.reshape(shape), var.reshape(shape)


def _lead(values: np.ndarray, ndim: int) -> np.ndarray:
    """``values`` with trailing axes of length 1 up to ``ndim`` axes."""
    values = np.asarray(values, dtype=float)
    return values.reshape(values.shape + (1,) * (ndim - values.ndim))


def discovery_value(
    objective: Objective,
    mean: np.ndarray,
    std: np.ndarray,
    exact: Mapping[str, np.ndarray],
    tail_rate: np.ndarray | float = 0.0,
    tail_scale: np.ndarray | float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(P(hit), stake) per candidate: confirming it at the top tier is worth ``stake * P(hit)``.

    A hit is a top-tier value that meets every term on it (in the window, past
    the threshold, past a maximize/minimize midpoint); the stake is the reward
    such a value adds given the exact properties (:meth:`Objective.stake`): 1
    for a window alone, 0 for a candidate whose cheap terms already zero a
    geometric mean, the value terms' weight share for an arithmetic mean.
    """
    low, high = objective.hit_interval()
    p = hit_probability(mean, std, low, high, tail_rate, tail_scale)
    if objective.as_window() is not None:
        return p, np.ones_like(p)
    stake = np.broadcast_to(objective.stake({k: np.asarray(v, dtype=float) for k, v in exact.items()}), p.shape)
    return p, np.asarray(stake, dtype=float)
