"""A verifier's optional capabilities are typed protocols: which built-in tiers have which, by table."""

from __future__ import annotations

import pytest

from verifiers import Closable, LabRequester, RemoteVerifier, registry
from verifiers.scheduler import LearnedModel, PretrainedLearner, SurrogateLearner

# verifier name -> (closes worker processes, answers remotely, asks a lab)
CAPABILITIES = {
    "rdkit-eht": (False, False, False),
    "gfn2-xtb": (True, False, False),
    "simulated-cluster": (True, True, False),
    "lab": (False, False, True),
    "reference-table": (False, False, False),
    "code-format": (False, False, False),
}


@pytest.mark.parametrize(("name", "expected"), CAPABILITIES.items())
def test_capabilities_by_table(name: str, expected: tuple[bool, bool, bool]) -> None:
    verifier = registry.create(name, {})
    try:
        assert (isinstance(verifier, Closable), isinstance(verifier, RemoteVerifier), isinstance(verifier, LabRequester)) == expected
    finally:
        if isinstance(verifier, Closable):
            verifier.close()


def test_the_molecules_learner_is_a_pretrained_surrogate_learner() -> None:
    from arl_flows.suites.molecules.graph import GraphModel
    from arl_flows.suites.molecules.learner import learner_for
    from verifiers.scheduler import SchedulerConfig

    learner = learner_for("qm9")(["rdkit-eht", "gfn2-xtb"], SchedulerConfig().learned, 0)
    assert isinstance(learner, SurrogateLearner) and isinstance(learner, PretrainedLearner)
    assert not isinstance(object(), SurrogateLearner)
    assert issubclass(GraphModel, LearnedModel)
