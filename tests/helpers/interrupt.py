"""What the interrupt tests share: a run of the counting top tier under a global limit of 1, and its slots.

Ctrl-C, SIGTERM and SIGKILL sent to the whole process group of ``arl run``, temporary Prefect server included
(``tests/arl_flows/test_interrupt_signals.py``).

Each test starts real ``arl run`` subprocesses in a session of their own, on
the temporary Prefect server (no ``PREFECT_API_URL``), with the counting top
tier under a global concurrency limit of 1. The run must stop with exit code
130, print ``interrupted`` and how to resume, leave no ``arl-tier-*`` slot
taken, and a resume must complete; a run SIGKILLed with its slot taken must not
block the next one.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
from pathlib import Path

from benchmarks import crash

LIMIT = f"arl-tier-{crash.TOP_TIER}"


def setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    crash.ensure_prior(home)
    config = crash.write_config(tmp_path / "run.toml", name="interrupt", steps=1, seed=0)  # the hold file makes the window
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


def active_slots(env: dict[str, str]) -> dict[str, int]:
    """Active slots of every ``arl-tier-*`` limit, as this home's Prefect database holds them.

    Read from the SQLite file itself (the table the server's API reads), not through a temporary server of the same
    PREFECT_HOME: starting one costs seconds of CPU each time on a busy machine, and no run is alive to serve it.
    """
    import sqlite3

    database = Path(env["ARL_HOME"]) / "prefect" / "prefect.db"
    with contextlib.closing(sqlite3.connect(database, timeout=60)) as db:
        rows = db.execute("SELECT name, active_slots FROM concurrency_limit_v2 WHERE name LIKE 'arl-tier-%'").fetchall()
    return {name: int(n) for name, n in rows}


def resume_completes(run_id: str, env: dict[str, str], log: Path, *args: str) -> str:
    resumed = crash.RunProcess(["run", "--resume", run_id, *args], env, log)
    rc = resumed.wait(1800)
    if rc is None:
        resumed.kill_group()
    assert rc == 0, resumed.text()[-3000:]
    assert "completed" in resumed.text()
    return resumed.text()


class _HeldCall:
    """While in the ``with`` block, the counting tier's calls wait in flight (its hold file exists)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.hold = Path(env[crash.COUNT_HOLD_ENV])
        self.count_log = Path(env[crash.COUNT_LOG_ENV])
        self.starts = 0

    def _started(self) -> int:
        return sum(1 for event, *_ in crash.read_count_log(self.count_log) if event == "start")

    def __enter__(self) -> _HeldCall:
        self.starts = self._started()
        self.hold.touch()
        return self

    def __call__(self, run: crash.RunProcess) -> bool:
        """Wait until ``run`` has a new top-tier call in flight (its slot taken); False if it ended first."""
        if run.wait_for(lambda _: self._started() > self.starts, 1200):
            return True
        print(f"the run ended (rc {run.proc.poll()}) before a new top-tier call: its steps sampled no molecule the "
              "ledger had not verified; give the config more steps")
        return False

    def release(self) -> None:
        self.hold.unlink(missing_ok=True)

    def __exit__(self, *exc: object) -> None:
        self.release()


def held_call(env: dict[str, str]) -> _HeldCall:
    return _HeldCall(env)


def stop_signal_exits_130_and_frees_the_slot(
    args: list[str], env: dict[str, str], tmp_path: Path, sig: signal.Signals, log_name: str
) -> str:
    """Start ``arl run args``, send ``sig`` to its whole process group with a top-tier call in flight; return the run id.

    The call is held in flight until the signal is sent, then let land (a stopped run waits for the calls it has
    out), so the slot the run held must be released on the way out.
    """
    with held_call(env) as in_flight:
        run = crash.RunProcess(args, env, tmp_path / log_name)
        try:
            assert in_flight(run), run.text()[-3000:]
            os.killpg(run.proc.pid, sig)
            in_flight.release()
            rc = run.wait(600)
        finally:
            run.kill_group()
    text = run.text()
    assert rc == 130, text[-3000:]
    assert "interrupted" in text and "internal error" not in text and "Error logging to API" not in text, text[-3000:]
    assert "ConnectError" not in text, text[-3000:]
    # The line says how to resume (rich may wrap it on a narrow console).
    run_id = re.search(r"continue with `arl run --resume (\w+)`", " ".join(text.split())).group(1)  # type: ignore[union-attr]
    assert active_slots(env).get(LIMIT) == 0
    return run_id
