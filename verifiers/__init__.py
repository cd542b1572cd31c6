"""Verifier tiers, their registry, worker-process isolation and the scheduler.

Nothing in this package imports Prefect.
"""

from verifiers.base import Candidate, CostModel, NoParams, Verifier
from verifiers.registry import ENTRY_POINT_GROUP, VerifierNotFound, register_verifier, registry

__all__ = [
    "ENTRY_POINT_GROUP",
    "Candidate",
    "CostModel",
    "NoParams",
    "Verifier",
    "VerifierNotFound",
    "register_verifier",
    "registry",
]
