"""Fault injection around an isolated verifier, for the reliability tests only.

Nothing in a training run imports this module. It exists to show that the
worker-process isolation (:mod:`verifiers.isolation`) keeps its promise: a
verifier that raises, hangs, aborts its process, runs out of memory or
returns garbage costs only the candidate it was working on.

:class:`FaultInjectingVerifier` wraps any :class:`~verifiers.isolation.IsolatedVerifier`
(xTB, DFT, a plugin tier) and presents the same identity (name, tier,
version, params hash), so it can stand in for the wrapped verifier anywhere,
including a scheduler ladder. Its work function, :func:`inject_fault`, runs
in the same kind of worker process and either misbehaves or calls the
wrapped verifier's own work function; the wrapped verifier's ``prepare`` and
``interpret`` are used unchanged, so a malformed result meets exactly the
code that would meet it in a real run.

Which call misbehaves is decided by :meth:`FaultPlan.fault_for`: a hash of
the seed and the candidate key, so the same candidate gets the same fault in
every batch, every process and every order (a test can compute the affected
set in advance and compare every other candidate with a clean run).
``FaultPlan(fractions={"raise": 1.0})`` is a verifier that is down for the
whole step.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from storage.records import Verdict
from verifiers.base import Candidate
from verifiers.isolation import IsolatedVerifier, TaskOutcome

__all__ = ["FAULT_KINDS", "MALFORMED_KINDS", "FaultInjectingVerifier", "FaultPlan", "InjectedFault", "inject_fault"]

FaultKind = Literal["raise", "hang", "abort", "oom", "malformed"]
FAULT_KINDS: tuple[FaultKind, ...] = ("raise", "hang", "abort", "oom", "malformed")

MalformedKind = Literal["not_a_dict", "none", "empty_dict", "wrong_type", "nan", "unpicklable"]
MALFORMED_KINDS: tuple[MalformedKind, ...] = ("not_a_dict", "none", "empty_dict", "wrong_type", "nan", "unpicklable")


class InjectedFault(RuntimeError):
    """What the ``raise`` fault raises inside the worker (its message names the candidate)."""


class FaultPlan(BaseModel):
    """Which calls of the wrapped verifier misbehave, and how."""

    model_config = ConfigDict(extra="forbid")

    fractions: dict[FaultKind, float] = Field(
        default_factory=dict,
        description="Fraction of calls per fault kind, e.g. {'raise': 0.1, 'hang': 0.1}; "
        "the kinds are disjoint, so the fractions must add up to at most 1.",
    )
    malformed: list[MalformedKind] = Field(
        default_factory=lambda: list(MALFORMED_KINDS),
        min_length=1,
        description="Shapes a 'malformed' result may take; each affected candidate gets one, chosen by its key.",
    )
    seed: int = Field(default=0, description="Changes which candidates are hit, nothing else.")
    hang_s: float = Field(
        default=3600.0, gt=0, description="How long a 'hang' sleeps; keep it far above the verifier's timeout."
    )
    oom_chunk_mb: int = Field(
        default=64, ge=1, description="Size of each allocation of the 'oom' fault, until the worker's limit is hit."
    )

    @field_validator("fractions")
    @classmethod
    def _fractions_are_probabilities(cls, value: dict[FaultKind, float]) -> dict[FaultKind, float]:
        for kind, fraction in value.items():
            if not 0.0 <= fraction <= 1.0:
                raise ValueError(f"fraction of {kind!r} is {fraction}; use a number between 0 and 1")
        total = sum(value.values())
        if total > 1.0 + 1e-9:
            raise ValueError(f"fault fractions add up to {total:g} > 1; each call can have only one fault")
        return value

    @model_validator(mode="after")
    def _malformed_kinds_are_distinct(self) -> FaultPlan:
        if len(set(self.malformed)) != len(self.malformed):
            raise ValueError(f"malformed kinds repeat: {self.malformed}")
        return self

    def _uniform(self, key: str, salt: str) -> float:
        digest = hashlib.sha256(f"{self.seed}:{salt}:{key}".encode("utf-8", "surrogatepass")).digest()
        return int.from_bytes(digest[:8], "big") / 2.0**64

    def fault_for(self, key: str) -> FaultKind | None:
        """The fault a call about candidate ``key`` gets (None: it runs normally)."""
        u = self._uniform(key, "fault")
        edge = 0.0
        for kind in FAULT_KINDS:  # a fixed order: the same plan hits the same keys
            edge += self.fractions.get(kind, 0.0)
            if u < edge:
                return kind
        return None

    def malformed_for(self, key: str) -> MalformedKind:
        """Which malformed result a 'malformed' call about ``key`` returns."""
        return self.malformed[int(self._uniform(key, "malformed") * len(self.malformed))]


# --------------------------------------------------------------------------
# Worker side (top-level functions: the pool pickles them by reference)
# --------------------------------------------------------------------------


def _garble(result: Any, how: MalformedKind) -> Any:
    """A malformed version of a real result: the wrong shape, or the right shape with bad values."""
    if how == "not_a_dict":
        return "garbage: not the result you expected"
    if how == "none":
        return None
    if how == "empty_dict":
        return {}
    if how == "unpicklable":
        return (x for x in ())  # a generator cannot be sent back to the parent
    replacement: Any = math.nan if how == "nan" else ["wrong", "type"]
    if isinstance(result, dict):
        # Every number becomes NaN or a list; keys stay, so the result looks plausible at a glance.
        return {k: replacement if isinstance(v, (int, float)) and not isinstance(v, bool) else v for k, v in result.items()}
    return replacement


def _exhaust_memory(chunk_mb: int) -> None:
    hoard = []
    while True:
        # bytes(n) comes from calloc: address space is reserved (and counted by
        # RLIMIT_AS) without touching pages, so the worker hits its limit
        # without making the host's memory pressure real.
        hoard.append(bytes(chunk_mb * 1024 * 1024))


def inject_fault(job: tuple[str, FaultKind | None, MalformedKind, float, int, Callable[[Any], Any], Any]) -> Any:
    """Worker function: misbehave as the plan says, else run the wrapped verifier's work function."""
    key, fault, how, hang_s, oom_chunk_mb, work, arg = job
    if fault == "raise":
        raise InjectedFault(f"injected fault for {key}")
    if fault == "abort":
        os.abort()
    if fault == "hang":
        time.sleep(hang_s)
    if fault == "oom":
        _exhaust_memory(oom_chunk_mb)
    result = work(arg)
    if fault == "malformed":
        return _garble(result, how)
    return result


# --------------------------------------------------------------------------
# The wrapper
# --------------------------------------------------------------------------


class FaultInjectingVerifier(IsolatedVerifier):
    """An isolated verifier that misbehaves on a chosen, seeded fraction of its calls (tests only).

    It takes the wrapped verifier's identity and execution params (timeout,
    memory limit, workers, threads), runs in its own worker pool, and
    records in :attr:`injected` the fault of every call it made (candidate
    key -> kind, or None). Candidates that the wrapped verifier answers
    without a worker (``prepare`` returned a verdict, e.g. ``invalid``) are
    never faulted: no call, no fault.
    """

    work_function = staticmethod(inject_fault)

    def __init__(self, inner: IsolatedVerifier, plan: FaultPlan | dict[str, Any] | None = None) -> None:
        super().__init__(inner.params)
        self.inner = inner
        self.plan = plan if isinstance(plan, FaultPlan) else FaultPlan.model_validate(plan or {})
        if self.plan.fractions.get("oom", 0.0) > 0 and getattr(inner.params, "memory_mb", None) is None:
            raise ValueError("an 'oom' fault needs a memory limit: give the wrapped verifier memory_mb")
        # Same identity as the wrapped verifier: verdicts and ladders cannot tell them apart.
        self.name = inner.name  # type: ignore[misc]
        self.tier = inner.tier  # type: ignore[misc]
        self.version = inner.version  # type: ignore[misc]
        self.suite = inner.suite  # type: ignore[misc]
        self.preload_modules = inner.preload_modules  # type: ignore[misc]
        self.costs = inner.costs
        self.injected: dict[str, FaultKind | None] = {}
        self.worker_pids: set[int] = set()  # workers that returned a result (not crashed, not killed)

    @property
    def params_hash(self) -> str:
        return self.inner.params_hash

    def size(self, candidate: Candidate) -> float:
        return self.inner.size(candidate)

    def prepare(self, candidate: Candidate) -> Any:
        prepared = self.inner.prepare(candidate)
        if isinstance(prepared, Verdict):
            return prepared
        fault = self.plan.fault_for(candidate.key)
        self.injected[candidate.key] = fault
        work = type(self.inner).work_function
        how = self.plan.malformed_for(candidate.key)
        return (candidate.key, fault, how, self.plan.hang_s, self.plan.oom_chunk_mb, work, prepared)

    def interpret(self, candidate: Candidate, result: Any, outcome: TaskOutcome) -> Verdict:
        if outcome.worker_pid is not None:
            self.worker_pids.add(outcome.worker_pid)
        return self.inner.interpret(candidate, result, outcome)
