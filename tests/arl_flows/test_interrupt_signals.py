"""Ctrl-C to the whole process group of ``arl run``: exit 130, no slot left, a resume completes.

See ``tests/helpers/interrupt.py``: a real ``arl run`` subprocess in a session of its own, on the temporary Prefect
server, with the counting top tier under a global concurrency limit of 1. SIGTERM and SIGKILL have files of their own
(``test_interrupt_sigterm.py``, ``test_interrupt_sigkill.py``), so that xdist runs them beside this one.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.helpers.interrupt import stop_signal_exits_130_frees_the_slot_and_the_resume_completes


@pytest.mark.slow(seconds=200)
@pytest.mark.timeout(1800)  # a run, its resume and a slot read on a temporary Prefect server: past 600 s at a load of 10
def test_ctrl_c_to_the_process_group_exits_130_frees_the_slot_and_the_resume_completes(tmp_path: Path) -> None:
    # What a terminal sends its foreground process group on Ctrl-C.
    stop_signal_exits_130_frees_the_slot_and_the_resume_completes(tmp_path, signal.SIGINT)
