"""A learned model's contract: ``predict`` is required, each further capability is a small protocol the surrogate checks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from verifiers.scheduler import Observation, Surrogate
from verifiers.scheduler.learned import (
    CalibratedModel,
    EnsembleModel,
    FineTunableModel,
    LearnedModel,
    ShiftAwareModel,
    TrainingAwareModel,
)

CAPABILITIES = (CalibratedModel, EnsembleModel, FineTunableModel, ShiftAwareModel, TrainingAwareModel)


class PredictOnly:
    def predict(self, payloads: Sequence[str], values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.full(len(payloads), 2.0), np.full(len(payloads), 0.5)


class Ensemble(PredictOnly):
    def predict_full(self, payloads: Sequence[str], values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.full(len(payloads), 2.0), np.full(len(payloads), 0.5), np.arange(len(payloads), dtype=float) + 0.25


class KnowsItsData(PredictOnly):
    def seen(self, payload: str) -> bool:
        return payload.startswith("train")


def _observations(n: int, known_top: bool) -> list[Observation]:
    return [
        Observation(f"k{i}", np.zeros(0), {"fast": float(i)} | ({"top": 1.5 * i} if known_top else {}), f"{'train' if i % 2 else 'new'}{i}")
        for i in range(n)
    ]


def test_a_predict_only_model_is_a_learned_model_with_no_further_capability() -> None:
    model = PredictOnly()
    assert isinstance(model, LearnedModel) and not issubclass(PredictOnly, CalibratedModel)
    assert not any(isinstance(model, cap) for cap in CAPABILITIES)
    surrogate = Surrogate(["fast"], "top")
    surrogate.attach_learned(model)
    obs = _observations(4, known_top=False)
    assert np.array_equal(surrogate.disagreement(obs), np.zeros(4))  # no ensemble: no disagreement
    assert np.array_equal(surrogate.shift(("fast",), obs), np.ones(4))  # no shift scores: never widened
    assert surrogate.fine_tune_learned() == 0  # neither calibrated nor fine-tunable


def test_each_capability_the_model_has_is_used() -> None:
    surrogate = Surrogate(["fast"], "top")
    surrogate.attach_learned(Ensemble())
    assert isinstance(Ensemble(), EnsembleModel)
    assert np.allclose(surrogate.disagreement(_observations(3, known_top=False)), [0.25, 1.25, 2.25])
    aware = Surrogate(["fast"], "top")
    aware.attach_learned(KnowsItsData())
    aware.add(_observations(6, known_top=True))
    assert aware.unseen_pairs == 3  # the pairs it trained on ('train...') are never its stack's data


def test_the_shipped_network_has_every_capability() -> None:
    from arl_flows.suites.molecules.pretrained import ShippedSurrogate

    assert all(issubclass(ShippedSurrogate, cap) for cap in CAPABILITIES)
