"""A top tier that counts its own invocations, for the crash and concurrency harnesses.

``CountingReferenceTable`` is the real :class:`arl_flows.suites.molecules.lab.ReferenceTableVerifier`
(QM9 gaps, a declared cost per call) with two additions:

- every candidate it is asked about is one logged call (:mod:`benchmarks.call_log`): a ``start`` line
  in ``$ARL_COUNT_LOG`` before the lookup, a ``done`` line after the verdict is built, and a wait while
  ``$ARL_COUNT_HOLD`` exists, so a harness can kill a run while a call is in flight;
- ``seconds_per_call`` makes each lookup take real wall time, so that a kill
  lands inside verification often enough to exercise it (the reference table
  itself answers in microseconds).

Configs reference it as ``"benchmarks.counting_tier:CountingReferenceTable"``
with the repository root on ``PYTHONPATH``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, Field

from arl_flows.suites.molecules.lab import ReferenceTableParams, ReferenceTableVerifier
from benchmarks.call_log import COUNT_HOLD_ENV, COUNT_LOG_ENV, HOLD_MAX_S, counted_call, read_count_log
from storage.records import Verdict
from verifiers.base import Candidate

__all__ = ["COUNT_HOLD_ENV", "COUNT_LOG_ENV", "HOLD_MAX_S", "CountingParams", "CountingReferenceTable", "read_count_log"]


class CountingParams(ReferenceTableParams):
    """Reference-table params plus a per-call delay."""

    seconds_per_call: float = Field(
        default=0.0, ge=0.0, le=10.0, description="Wall seconds each candidate takes (sleep), so kills can land mid-tier."
    )


class CountingReferenceTable(ReferenceTableVerifier):
    """Reference-table lookups that log one line per candidate to ``$ARL_COUNT_LOG``."""

    name: ClassVar[str] = "counting-reference-table"
    Params: ClassVar[type[BaseModel]] = CountingParams

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        lookup = super().verify_batch
        return [counted_call(c.key, self.params.seconds_per_call, lambda c=c: lookup([c])[0]) for c in candidates]
