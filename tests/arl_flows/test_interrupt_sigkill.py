"""A run SIGKILLed with its slot taken leaves the slot held; the next run's start frees it and completes.

See ``tests/helpers/interrupt.py``: a real ``arl run`` subprocess in a session of its own, on the temporary Prefect
server, with the counting top tier under a global concurrency limit of 1.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from benchmarks import crash
from tests.helpers.interrupt import LIMIT, active_slots, setup


@pytest.mark.slow(seconds=250)
@pytest.mark.timeout(1800)  # two runs and two temporary Prefect servers: past 600 s at a load of 10
def test_a_slot_left_by_a_sigkilled_run_is_freed_at_the_next_start(tmp_path: Path) -> None:
    config, env = setup(tmp_path)
    # A long top-tier call, so the kill lands while the slot is held.
    config.write_text(config.read_text().replace("seconds_per_call = 1.0", "seconds_per_call = 10.0"))
    run = crash.RunProcess(["run", "--config", str(config), "--verbose"], env, tmp_path / "run.log")
    count_log = tmp_path / "count.log"
    try:
        assert run.wait_for(lambda _: any(e == "start" for e, *_ in crash.read_count_log(count_log)), 1200), run.text()[-3000:]
        os.killpg(run.proc.pid, signal.SIGKILL)  # the run and its server die at once: nothing is released
        run.wait(120)
    finally:
        run.kill_group()
    assert active_slots(env).get(LIMIT) == 1  # what a killed run leaves behind
    config.write_text(config.read_text().replace("seconds_per_call = 10.0", "seconds_per_call = 0.05"))
    again = crash.RunProcess(["run", "--config", str(config), "--verbose"], env, tmp_path / "again.log")
    rc = again.wait(1800)
    if rc is None:
        again.kill_group()
    assert rc == 0, again.text()[-3000:]
    assert f"freed 1 slot(s) of {LIMIT}" in again.text()
    assert active_slots(env).get(LIMIT) == 0
