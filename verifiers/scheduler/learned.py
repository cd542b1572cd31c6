"""The contract of a suite's learned surrogate: a factory, a learner it makes, the model the learner fits.

The scheduler's surrogate is linear per pattern of known tier values; a suite
may stack a learned model under it (the molecules suite's graph network) by
giving ``Suite.surrogate_learner``, a :class:`SurrogateLearnerFactory`. The
scheduler calls it with the lower tiers' names, the ``[scheduler.learned]``
settings and a seed, fits the learner on the paired history once it is large
enough (``Surrogate.fit_learned``) and, if the learner is a
:class:`PretrainedLearner`, starts from its shipped model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from verifiers.scheduler.config import LearnedSurrogateConfig

__all__ = [
    "CalibratedModel",
    "EnsembleModel",
    "FineTunableModel",
    "LearnedModel",
    "PretrainedLearner",
    "ShiftAwareModel",
    "SurrogateLearner",
    "SurrogateLearnerFactory",
    "TrainingAwareModel",
]


@runtime_checkable
class LearnedModel(Protocol):
    """A fitted model of the top tier's value from the payloads and the lower tiers' values (NaN: not known)."""

    def predict(self, payloads: Sequence[str], values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and std (n,) of the top-tier value for n payloads and their (n, lower tiers) values."""
        ...


# What a learned model may also do. The surrogate checks each with isinstance and uses it where given.


@runtime_checkable
class EnsembleModel(LearnedModel, Protocol):
    """An ensemble that also says how much its members disagree (``Surrogate.disagreement``)."""

    def predict_full(self, payloads: Sequence[str], values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mean, std and the std of the members' means, (n,) each."""
        ...


@runtime_checkable
class CalibratedModel(LearnedModel, Protocol):
    """A model whose stds were calibrated out of sample (a shipped network): the surrogate stacks a small
    residual per pattern on it instead of fitting its own linear models on top."""

    def pattern_prior(self, pattern: Sequence[str]) -> Mapping[str, float]:
        """``typical_std``, ``tail_rate`` and ``tail_scale`` measured out of sample with these tiers shown."""
        ...


@runtime_checkable
class FineTunableModel(LearnedModel, Protocol):
    """A model that can train further on a run's own answers (``Surrogate.fine_tune_learned``)."""

    def fine_tuned(self, payloads: Sequence[str], values: np.ndarray, target: np.ndarray, epochs: int = 10) -> LearnedModel:
        """A copy trained ``epochs`` more on these pairs; the model itself is unchanged."""
        ...


@runtime_checkable
class TrainingAwareModel(LearnedModel, Protocol):
    """A model that knows its training data: the surrogate never fits its stack on pairs the model has seen."""

    def seen(self, payload: str) -> bool:
        """True when the payload was in the model's training or calibration data."""
        ...


@runtime_checkable
class ShiftAwareModel(LearnedModel, Protocol):
    """A model that says how far each candidate lies from its data (``Surrogate.shift`` widens the std)."""

    def shift_scores(self, payloads: Sequence[str], values: np.ndarray) -> np.ndarray:
        """(n, signals): each signal's ratio to an upper quantile of it on the calibration data (1: as far out as
        the model's calibration vouches for; the molecules suite uses the 90th percentile)."""
        ...


@runtime_checkable
class SurrogateLearner(Protocol):
    """Fits a :class:`LearnedModel` on paired history; None when it cannot read these payloads."""

    def fit(
        self,
        payloads: Sequence[str],
        values: np.ndarray,
        target: np.ndarray,
        progress: Callable[[int, int, float], None] | None = None,
    ) -> LearnedModel | None:
        """``values`` (n, lower tiers), ``target`` (n,) the top tier's; ``progress(epoch, epochs, loss)``."""
        ...


@runtime_checkable
class PretrainedLearner(SurrogateLearner, Protocol):
    """A learner that ships a model trained once on the suite's data (a prior, overruled by the run's answers)."""

    def pretrained(self) -> LearnedModel | None:
        """The shipped model, or None when its shape does not fit these tiers."""
        ...


class SurrogateLearnerFactory(Protocol):
    """``Suite.surrogate_learner``: makes the learner for these lower tiers, settings and seed."""

    def __call__(self, lower_tiers: Sequence[str], learned: LearnedSurrogateConfig, seed: int) -> SurrogateLearner: ...
