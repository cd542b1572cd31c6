"""A top tier that counts its own invocations, for the crash and concurrency harnesses.

``CountingReferenceTable`` is the real :class:`arl_flows.suites.molecules.lab.ReferenceTableVerifier`
(QM9 gaps, a declared cost per call) with two additions:

- every candidate it is asked about appends a ``start`` line to the file named by
  ``$ARL_COUNT_LOG`` *before* the lookup, and a ``done`` line after the verdict is
  built. Counting invocations, not ledger rows, is what shows whether a verdict
  that was already paid for was paid for again (rows are deduplicated by the
  ledger's unique key, so they cannot show it);
- ``seconds_per_call`` makes each lookup take real wall time, so that a kill
  lands inside verification often enough to exercise it (the reference table
  itself answers in microseconds).

While the file named by ``$ARL_COUNT_HOLD`` exists, a call that has logged its
``start`` waits (up to :data:`HOLD_MAX_S`) before it finishes: a harness that
must kill a run *while* a call is in flight holds the call there until its
signal is sent, instead of hoping to catch a short window on a busy machine.

Lines are written with one ``os.write`` on an ``O_APPEND`` descriptor, so a
line is either in the file or not, even when the process is killed, and
concurrent processes never interleave within a line.

Configs reference it as ``"benchmarks.counting_tier:CountingReferenceTable"``
with the repository root on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, Field

from storage.records import Verdict
from verifiers.base import Candidate
from arl_flows.suites.molecules.lab import ReferenceTableParams, ReferenceTableVerifier

__all__ = ["COUNT_HOLD_ENV", "COUNT_LOG_ENV", "CountingReferenceTable", "CountingParams", "read_count_log"]

COUNT_LOG_ENV = "ARL_COUNT_LOG"
COUNT_HOLD_ENV = "ARL_COUNT_HOLD"
HOLD_MAX_S = 120.0  # a hold file left behind never hangs a run for longer


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
        out: list[Verdict] = []
        for candidate in candidates:
            _log("start", candidate.key)
            if self.params.seconds_per_call:
                time.sleep(self.params.seconds_per_call)
            _wait_while_held()
            (verdict,) = super().verify_batch([candidate])
            _log("done", candidate.key, verdict.status.value)
            out.append(verdict)
        return out


def _wait_while_held() -> None:
    hold = os.environ.get(COUNT_HOLD_ENV)
    deadline = time.monotonic() + HOLD_MAX_S
    while hold and os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.02)


def _log(event: str, key: str, status: str = "") -> None:
    path = os.environ.get(COUNT_LOG_ENV)
    if not path:
        return
    line = f"{event}\t{os.getpid()}\t{status}\t{key}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_count_log(path: str | os.PathLike[str]) -> list[tuple[str, int, str, str]]:
    """(event, pid, status, candidate key) per line; a missing file is an empty log."""
    try:
        text = open(path, encoding="utf-8").read()  # noqa: SIM115 - read whole file at once
    except FileNotFoundError:
        return []
    rows = []
    for line in text.splitlines():
        event, pid, status, key = line.split("\t", 3)
        rows.append((event, int(pid), status, key))
    return rows
