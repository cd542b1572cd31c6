"""Ctrl-C, SIGTERM and SIGKILL to the whole process group of one ``arl run``, each with a top-tier call in flight.

See ``tests/helpers/interrupt.py``: real ``arl run`` subprocesses in a session of their own, on the temporary Prefect
server, with the counting top tier under a global concurrency limit of 1. One run is stopped three times and resumed
after each: Ctrl-C and SIGTERM (what ``kill``, a batch scheduler's ``scancel`` or a timeout sends) exit 130, say how
to resume and leave no slot taken; SIGKILL leaves its slot taken, and the next start frees it and completes the run.
One chain of four processes instead of three tests of two: each ``arl run`` start costs ~15 CPU-s and a server.
The start after the SIGKILL is a resume; a fresh ``arl run --config`` frees a dead run's slot by the same code
(``arl_flows.flows._recover_stale_slots``, at every start on the temporary server).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from benchmarks import crash
from tests.helpers.interrupt import (
    LIMIT,
    active_slots,
    held_call,
    resume_completes,
    setup,
    stop_signal_exits_130_and_frees_the_slot,
)


@pytest.mark.slow(seconds=400)
@pytest.mark.timeout(3600)  # four runs and four temporary Prefect servers, one after another: minutes at a load of 10
def test_ctrl_c_sigterm_and_sigkill_to_the_process_group_then_the_run_completes(tmp_path: Path) -> None:
    config, env = setup(tmp_path)
    # A stopped run lets the batch it has out land, so each stage needs calls of a later step: five steps of new
    # samples (a resume redoes the interrupted step from the ledger, then samples the next).
    config.write_text(config.read_text().replace("\nsteps = 1\n", "\nsteps = 5\n"))
    assert "\nsteps = 5\n" in config.read_text()
    # What a terminal sends its foreground process group on Ctrl-C.
    run_id = stop_signal_exits_130_and_frees_the_slot(["run", "--config", str(config), "--verbose"], env, tmp_path,
                                                      signal.SIGINT, "run.log")
    # SIGTERM is a request to stop, handled as Ctrl-C is: the exit code is the one of an interrupted run (130), not
    # 143 (128 + 15, a process the signal itself ended).
    assert stop_signal_exits_130_and_frees_the_slot(["run", "--resume", run_id], env, tmp_path, signal.SIGTERM,
                                                    "resume-term.log") == run_id
    # SIGKILL: the run and its server die at once, nothing is released.
    with held_call(env) as wait_in_flight:
        killed = crash.RunProcess(["run", "--resume", run_id], env, tmp_path / "resume-kill.log")
        try:
            assert wait_in_flight(killed), killed.text()[-3000:]
            os.killpg(killed.proc.pid, signal.SIGKILL)
            killed.wait(120)
        finally:
            killed.kill_group()
    assert active_slots(env).get(LIMIT) == 1  # what a killed run leaves behind
    text = resume_completes(run_id, env, tmp_path / "resume.log", "--verbose")  # the warning is a log line
    assert f"freed 1 slot(s) of {LIMIT}" in text
    assert active_slots(env).get(LIMIT) == 0
