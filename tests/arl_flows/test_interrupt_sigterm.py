"""SIGTERM to the whole process group of ``arl run``: exit 130, no slot left, a resume completes.

What ``kill``, a batch scheduler's ``scancel`` or a timeout sends. The same check as Ctrl-C
(``test_interrupt_signals.py``), in a file of its own so that xdist runs the two side by side: each is minutes of
real runs, and together in one file they were the longest file of ``make test``.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.helpers.interrupt import stop_signal_exits_130_frees_the_slot_and_the_resume_completes


@pytest.mark.slow(seconds=200)
@pytest.mark.timeout(1800)  # a run, its resume and a slot read on a temporary Prefect server: past 600 s at a load of 10
def test_sigterm_to_the_process_group_exits_130_frees_the_slot_and_the_resume_completes(tmp_path: Path) -> None:
    # SIGTERM is a request to stop, handled as Ctrl-C is: the exit code is the one of an interrupted run (130).
    stop_signal_exits_130_frees_the_slot_and_the_resume_completes(tmp_path, signal.SIGTERM)
