"""The molecules suite's learned surrogate (``capabilities.Prior``): the shipped graph network, else one fitted.

Apart from ``graph.py`` (the network) and ``pretrained.py`` (the shipped
ensemble, which is a set of those networks) because it chooses between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from arl_flows.suites.molecules.graph import GraphModel, GraphModelConfig, fitted_model, mol_graph
from arl_flows.suites.molecules.multifidelity import load_druglike
from arl_flows.suites.molecules.pretrained import load_shipped

__all__ = ["GraphLearner", "learner_for", "shipped_model"]


def shipped_model(tiers: Sequence[str], config: GraphModelConfig, model: str = "qm9") -> Any:
    """The shipped surrogate ``model`` if it fits these lower tiers and this network shape, else None.

    ``qm9``: the ensemble trained on QM9's DFT gaps (``pretrained.py``), every space's default. ``multifidelity``:
    the druglike network on MOSES molecules' cheap tiers with a DFT correction (``multifidelity.py``), or QM9's
    where that is not shipped.
    """
    if model == "multifidelity":
        got = load_druglike(tiers, config)
        if got is not None:
            return got
    return load_shipped(tiers, config)


def learner_for(model: str = "qm9") -> Any:
    """The molecules suite's ``surrogate_learner`` factory starting from the shipped surrogate ``model`` (``qm9`` or
    ``multifidelity``, as ``[options] surrogate``), for benchmarks, which run no suite."""

    def factory(tiers: Sequence[str], learned: Any, seed: int) -> GraphLearner:
        return GraphLearner.from_settings(tiers, learned, seed, model=model)

    return factory


class GraphLearner:
    """The molecules suite's learned surrogate model (``capabilities.Prior``): a cached, fitted :class:`GraphModel`."""

    def __init__(self, tiers: Sequence[str], config: GraphModelConfig | None = None, use_shipped: bool = True,
                 model: str = "qm9") -> None:
        self.tiers = list(tiers)
        self.config = config or GraphModelConfig()
        self.use_shipped = use_shipped
        self.model = model

    @classmethod
    def from_settings(cls, tiers: Sequence[str], learned: Any, seed: int, model: str = "qm9") -> GraphLearner:
        """From the scheduler's ``LearnedSurrogateConfig`` (width, depth, epochs, members, threads), seed and the
        shipped model to start from."""
        return cls(
            tiers,
            GraphModelConfig(
                hidden=learned.hidden, layers=learned.layers, epochs=learned.epochs, members=learned.members,
                seed=seed, threads=learned.threads,
            ),
            use_shipped=getattr(learned, "shipped", True),
            model=model,
        )

    def pretrained(self) -> Any:
        """The shipped surrogate ``model`` (see :func:`shipped_model`), or None if its tiers or shape differ.

        A scheduler starts every run from it (``Surrogate.attach_learned``): see ``pretrained.py`` (qm9) and
        ``multifidelity.py`` (multifidelity).
        """
        return shipped_model(self.tiers, self.config, self.model) if self.use_shipped else None

    def fit(self, payloads: Sequence[str], values: np.ndarray, target: np.ndarray, progress=None) -> GraphModel | None:  # noqa: ANN001
        """A model fitted on the pairs (or loaded, see :func:`fitted_model`); None if the payloads are not molecules."""
        probe = list(payloads[:200])
        if not probe or sum(mol_graph(p) is not None for p in probe) < 0.9 * len(probe):
            return None  # not molecules (a program, a dialogue): the graph network has nothing to read
        return fitted_model(GraphModel(self.tiers, self.config), payloads, values, target, progress=progress)
