"""Verifier tiers, their registry, worker-process isolation and the scheduler.

Nothing in this package imports Prefect.

The import name ``verifiers`` is also that of an RL-environments library on
PyPI (``pip install verifiers``). Both install a top-level ``verifiers``
folder, so in one environment the one installed last overwrites the other's
files. ``__arl__`` marks this package as ARL's (``arl`` checks it before it
runs); importing it warns in one line when a distribution named ``verifiers``
is installed beside ARL.
"""

import warnings as _warnings
from importlib import metadata as _metadata

from verifiers.base import Candidate, Closable, CostModel, LabRequester, NoParams, RemoteVerifier, Verifier
from verifiers.registry import ENTRY_POINT_GROUP, VerifierNotFound, register_verifier, registry
from verifiers.simulated_queue import SimulatedQueue, SimulatedQueueParams

__arl__ = True  # this ``verifiers`` is ARL's, not the PyPI package of the same import name

__all__ = [
    "ENTRY_POINT_GROUP",
    "Candidate",
    "Closable",
    "CostModel",
    "LabRequester",
    "NoParams",
    "RemoteVerifier",
    "SimulatedQueue",
    "SimulatedQueueParams",
    "Verifier",
    "VerifierNotFound",
    "VerifiersNameClash",
    "name_clash",
    "register_verifier",
    "registry",
]


class VerifiersNameClash(UserWarning):
    """Another distribution named ``verifiers`` is installed in this environment (see :func:`name_clash`)."""


def name_clash() -> str | None:
    """One line naming the PyPI package ``verifiers`` if it is installed in this environment, else ``None``."""
    try:
        other = _metadata.distribution("verifiers")  # ARL's distribution is named "arl"
    except _metadata.PackageNotFoundError:
        return None
    return (
        f"the PyPI package 'verifiers' ({other.version}) is installed in this environment and shares ARL's import "
        "name 'verifiers'; install ARL in its own virtual environment (pip uninstall verifiers)"
    )


if (_clash := name_clash()) is not None:
    _warnings.warn(_clash, VerifiersNameClash, stacklevel=2)
