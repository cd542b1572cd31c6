"""Work functions and verifiers that misbehave on demand, for the isolation and registry tests.

A module of its own (not a test file) so that worker processes and
``module:Class`` references can import it by name, as
``tests.helpers.faulty_work`` (the repository root is on the import path,
pyproject's ``pythonpath``).
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any, ClassVar

from storage.records import Status, Tier, Verdict
from verifiers.base import Candidate, Verifier
from verifiers.isolation import IsolatedVerifier, IsolationParams, TaskOutcome


def misbehave(kind: str) -> dict[str, Any]:
    """Crash, hang, exhaust memory or raise when asked; otherwise report the worker's pid and threads."""
    if kind == "abort":
        os.abort()
    if kind == "segfault":
        ctypes.string_at(0)
    if kind == "hang":
        time.sleep(3600)
    if kind == "oom":
        hoard = []
        while True:
            hoard.append(bytearray(64 * 1024 * 1024))
    if kind == "raise":
        raise ValueError("boom")
    return {"kind": kind, "pid": os.getpid(), "omp": os.environ.get("OMP_NUM_THREADS")}


class FaultyVerifier(IsolatedVerifier):
    """An isolated verifier whose 'physics' is :func:`misbehave` (not registered)."""

    name: ClassVar[str] = "test-faulty"
    tier: ClassVar[Tier] = Tier.simulation
    version: ClassVar[str] = "1"
    suite: ClassVar[str | None] = "test"
    Params = IsolationParams
    work_function = staticmethod(misbehave)

    def interpret(self, candidate: Candidate, result: Any, outcome: TaskOutcome) -> Verdict:
        return self.verdict(candidate, Status.ok, value=1.0, values=result, cost_s=outcome.cpu_s)


class ConfigOnlyTier(Verifier):
    """Referenced from a run config as 'tests.helpers.faulty_work:ConfigOnlyTier' (never decorated)."""

    name: ClassVar[str] = "test-config-only"
    tier: ClassVar[Tier] = Tier.fast
    version: ClassVar[str] = "1"
    suite: ClassVar[str | None] = "molecules"

    def verify_batch(self, candidates):  # noqa: ANN001, ANN201
        return [self.verdict(c, Status.ok, value=float(len(c.payload))) for c in candidates]
