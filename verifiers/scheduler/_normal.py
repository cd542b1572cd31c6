"""The standard normal distribution's density, CDF, survival function and quantile, from ``scipy.special``.

These are the formulas ``scipy.stats.norm`` evaluates (``ndtr``, ``ndtri`` and the closed-form density), without
importing ``scipy.stats``: that import costs about a CPU-second, and every process that scores a candidate pays it
(each ``arl run``, each resume, each worker).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

__all__ = ["cdf", "pdf", "ppf", "sf"]

_SQRT_2PI = math.sqrt(2.0 * math.pi)


def pdf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
    """Density of N(loc, scale**2) at ``x`` (``scipy.stats.norm.pdf``)."""
    z = (np.asarray(x, dtype=float) - loc) / scale
    return np.exp(-0.5 * z * z) / _SQRT_2PI / scale


def cdf(x: Any) -> Any:
    """P(Z <= x) for a standard normal Z."""
    return ndtr(np.asarray(x, dtype=float))


def sf(x: Any) -> Any:
    """P(Z > x) for a standard normal Z."""
    return ndtr(-np.asarray(x, dtype=float))


def ppf(q: Any) -> Any:
    """The ``q`` quantile of a standard normal."""
    return ndtri(np.asarray(q, dtype=float))
