"""The call log of a counting tier: one ``start`` and one ``done`` line per call, in ``$ARL_COUNT_LOG``.

Counting invocations, not ledger rows, is what shows whether a verdict that was already paid for was
paid for again (rows are deduplicated by the ledger's unique key, so they cannot show it). A tier logs
``start`` before it works on a candidate and ``done`` (with the verdict's status) after the verdict is
built; :func:`read_count_log` reads the lines back.

While the file named by ``$ARL_COUNT_HOLD`` exists, a call that has logged its ``start`` waits (up to
:data:`HOLD_MAX_S`) before it finishes: a harness that must kill a run *while* a call is in flight holds
the call there until its signal is sent, instead of hoping to catch a short window on a busy machine.

Lines are written with one ``os.write`` on an ``O_APPEND`` descriptor, so a line is either in the file or
not, even when the process is killed, and concurrent processes never interleave within a line.

This module imports no suite: the crash harness's reference-table tier and the toy suite's ``toy-counting``
both log through it, and a worker process that imports either finds it with the repository root on the path.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from storage.records import Verdict

__all__ = ["COUNT_HOLD_ENV", "COUNT_LOG_ENV", "HOLD_MAX_S", "counted_call", "log_call", "read_count_log"]

COUNT_LOG_ENV = "ARL_COUNT_LOG"
COUNT_HOLD_ENV = "ARL_COUNT_HOLD"
HOLD_MAX_S = 120.0  # a hold file left behind never hangs a run for longer


def counted_call(key: str, seconds: float, verify: Callable[[], Verdict]) -> Verdict:
    """Run ``verify`` for the candidate ``key`` as one logged call: ``start``, ``seconds`` of wall time, any hold, ``done``."""
    log_call("start", key)
    if seconds:
        time.sleep(seconds)
    _wait_while_held()
    verdict = verify()
    log_call("done", key, verdict.status.value)
    return verdict


def log_call(event: str, key: str, status: str = "") -> None:
    """Append one ``event<TAB>pid<TAB>status<TAB>key`` line to ``$ARL_COUNT_LOG`` (nothing when it is unset)."""
    path = os.environ.get(COUNT_LOG_ENV)
    if not path:
        return
    line = f"{event}\t{os.getpid()}\t{status}\t{key}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _wait_while_held() -> None:
    hold = os.environ.get(COUNT_HOLD_ENV)
    deadline = time.monotonic() + HOLD_MAX_S
    while hold and os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.02)


def read_count_log(path: str | os.PathLike[str]) -> list[tuple[str, int, str, str]]:
    """(event, pid, status, candidate key) per line; a missing file is an empty log."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return []
    return [(event, int(pid), status, key) for event, pid, status, key in (line.split("\t", 3) for line in text.splitlines())]
