"""Cheap features of a candidate for the surrogate: they cost microseconds, not CPU-seconds.

``size_features`` works for any suite (the size the cost model uses); a suite
gives richer ones through ``Suite.featurize``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from verifiers.base import Candidate

__all__ = ["Featurizer", "size_features"]

Featurizer = Callable[[Candidate], np.ndarray]


def size_features(candidate: Candidate) -> np.ndarray:
    """One feature: the candidate's size as its suite measures it (``Candidate.size``), scaled to about 1."""
    return np.array([float(candidate.size or 0.0) / 10.0])
