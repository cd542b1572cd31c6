"""Ctrl-C and SIGTERM to the whole process group of ``arl run``: exit 130, no slot left, a resume completes.

See ``tests/helpers/interrupt.py``: a real ``arl run`` subprocess in a session of its own, on the temporary Prefect
server, with the counting top tier under a global concurrency limit of 1. The SIGKILL case has a file of its own
(``test_interrupt_sigkill.py``), so that xdist runs it beside these.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.helpers.interrupt import stop_signal_exits_130_frees_the_slot_and_the_resume_completes


@pytest.mark.slow(seconds=200)
@pytest.mark.timeout(1800)  # a run, its resume and a slot read on a temporary Prefect server: past 600 s at a load of 10
@pytest.mark.parametrize(
    "sig",
    [
        pytest.param(signal.SIGINT, id="ctrl-c"),  # what a terminal sends its foreground process group on Ctrl-C
        pytest.param(signal.SIGTERM, id="sigterm"),  # what `kill`, a batch scheduler's scancel or a timeout sends
    ],
)
def test_a_stop_signal_to_the_process_group_exits_130_frees_the_slot_and_the_resume_completes(
    tmp_path: Path, sig: signal.Signals
) -> None:
    stop_signal_exits_130_frees_the_slot_and_the_resume_completes(tmp_path, sig)
