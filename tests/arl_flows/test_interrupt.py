"""Ctrl-C and SIGTERM sent to the whole process group of ``arl run``, temporary Prefect server included.

Each test starts real ``arl run`` subprocesses in a session of their own, on
the temporary Prefect server (no ``PREFECT_API_URL``), with the counting top
tier under a global concurrency limit of 1. The run must stop with exit code
130, print ``interrupted`` and how to resume, leave no ``arl-tier-*`` slot
taken, and a resume must complete; a run SIGKILLed with its slot taken must not
block the next one.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import crash

pytestmark = pytest.mark.slow

LIMIT = f"arl-tier-{crash.TOP_TIER}"


def _setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    crash.ensure_prior(home)
    config = crash.write_config(tmp_path / "run.toml", name="interrupt", steps=2, seed=0, seconds_per_call=1.0)
    config.write_text(config.read_text().replace("tier_concurrency = {}", f'tier_concurrency = {{ "{crash.TOP_TIER}" = 1 }}'))
    env = crash.arl_env(home, "", tmp_path / "count.log")
    env.pop("PREFECT_API_URL")  # the temporary server, as a new user's `arl run` gets
    # An earlier test in this worker may have set up ARL's Prefect environment in-process: the runs and the slot
    # reader must share this home's Prefect database, not inherit another one.
    for leaked in ("ARL_PREFECT_LOG", "PREFECT_LOGGING_SETTINGS_PATH"):
        env.pop(leaked, None)
    env["PREFECT_HOME"] = str(Path(env["ARL_HOME"]) / "prefect")
    env["ARL_DATABASE_URL"] = f"sqlite:///{tmp_path / 'ledger.db'}"
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "300"
    return config, env


def _in_verify(lines: list[tuple[float, str]]) -> bool:
    return any("Task run 'rdkit-eht x" in line for _, line in lines)


def _active_slots(env: dict[str, str]) -> dict[str, int]:
    """Active slots of every ``arl-tier-*`` limit, read through a temporary server of the same PREFECT_HOME."""
    code = (
        "from prefect import get_client\n"
        "with get_client(sync_client=True) as c:\n"
        "    for l in c.read_global_concurrency_limits(limit=100):\n"
        "        print(l.name, l.active_slots)\n"
    )
    prefect_home = Path(env["ARL_HOME"]) / "prefect"
    out = subprocess.run([sys.executable, "-c", code], env=env | {"PREFECT_HOME": str(prefect_home)},
                         capture_output=True, text=True, timeout=600, check=True).stdout
    return {name: int(n) for name, n in (line.split() for line in out.splitlines() if line.startswith("arl-tier-"))}


def _resume_completes(run_id: str, env: dict[str, str], log: Path) -> str:
    resumed = crash.RunProcess(["run", "--resume", run_id], env, log)
    rc = resumed.wait(1800)
    if rc is None:
        resumed.kill_group()
    assert rc == 0, resumed.text()[-3000:]
    assert "completed" in resumed.text()
    return resumed.text()


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
    # SIGTERM is a request to stop, handled as Ctrl-C is: the run stops cleanly, so the exit code is the one
    # of an interrupted run (130), not 143 (128 + 15, a process the signal itself ended).
    config, env = _setup(tmp_path)
    run = crash.RunProcess(["run", "--config", str(config), "--verbose"], env, tmp_path / "run.log")
    try:
        assert run.wait_for(_in_verify, 1200), run.text()[-3000:]
        os.killpg(run.proc.pid, sig)
        rc = run.wait(600)
    finally:
        run.kill_group()
    text = run.text()
    assert rc == 130, text[-3000:]
    assert "interrupted" in text and "internal error" not in text and "Error logging to API" not in text, text[-3000:]
    assert "ConnectError" not in text, text[-3000:]
    # The line says how to resume (rich may wrap it on a narrow console).
    run_id = re.search(r"continue with `arl run --resume (\w+)`", " ".join(text.split())).group(1)  # type: ignore[union-attr]
    assert _active_slots(env).get(LIMIT) == 0
    _resume_completes(run_id, env, tmp_path / "resume.log")


def test_a_slot_left_by_a_sigkilled_run_is_freed_at_the_next_start(tmp_path: Path) -> None:
    config, env = _setup(tmp_path)
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
    assert _active_slots(env).get(LIMIT) == 1  # what a killed run leaves behind
    config.write_text(config.read_text().replace("seconds_per_call = 10.0", "seconds_per_call = 0.05"))
    again = crash.RunProcess(["run", "--config", str(config), "--verbose"], env, tmp_path / "again.log")
    rc = again.wait(1800)
    if rc is None:
        again.kill_group()
    assert rc == 0, again.text()[-3000:]
    assert f"freed 1 slot(s) of {LIMIT}" in again.text()
    assert _active_slots(env).get(LIMIT) == 0
