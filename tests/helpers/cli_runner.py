"""Run the real ``arl`` entry point in process and check the shape of its failures.

``arl(args)`` calls ``arl_flows.cli.main`` with ``sys.argv`` set (as the
console script does) and returns the exit code, stdout and stderr;
``arl_run_subprocess`` runs ``arl run`` in a child process, as a user does;
``run_one_step_in_process`` runs a config's flow here, for tests of what a config does.
``assert_user_error`` is the contract for a user mistake: exit code 2, no
traceback, and either one ``error: ...`` line or click's usage text ending in
one ``Error: ...`` line. An ``internal error:`` line (the last-resort guard)
fails it: that is a bug the guard only kept off the terminal.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

__all__ = ["arl", "arl_run_subprocess", "assert_no_traceback", "assert_user_error", "run_one_step_in_process"]


def arl(args: list[str]) -> tuple[int, str, str]:
    """Run the real console entry point (``arl_flows.cli.main``) on ``args``: exit code, stdout, stderr."""
    from arl_flows.cli import main

    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        saved = sys.argv
        sys.argv = ["arl", *args]
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.argv = saved
            sys.stdout.flush()  # print() output sits in the text wrapper until flushed
            sys.stderr.flush()
        return code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace")


def arl_run_subprocess(config: Path, url: str, prefect_api_url: str, home: Path) -> str:
    """``arl run --config CONFIG --url URL`` in a child process (Prefect's log handlers never see pytest's
    captured streams); asserts exit code 0 and returns stdout and stderr together."""
    env = os.environ | {"PREFECT_API_URL": prefect_api_url, "ARL_HOME": str(home), "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-c", "from arl_flows.cli import main; main()", "run", "--config", str(config),
                           "--url", url], env=env, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    return out



def run_one_step_in_process(config: dict, path: Path) -> list:
    """Write ``config`` to ``path`` (TOML) and run it to completion with ``run_training`` in this process, on a fresh
    SQLite ledger beside it (the test's ``prefect_harness`` and ARL_HOME); return step 0's reward estimates.

    For a test about what a config does rather than about the CLI (which `test_cli_run` runs end to end): it saves
    the child's imports of torch, transformers and Prefect, about 12 CPU-s a run."""
    import tomli_w

    from arl_flows.flows import run_training
    from storage.ledger import Ledger

    path.write_text(tomli_w.dumps(config))
    url = f"sqlite:///{path.parent / 'ledger.db'}"
    summary = run_training(None, config_path=str(path), database_url=url)
    assert summary["status"] == "completed", summary
    ledger = Ledger(url)
    try:
        return [e for _, e in ledger.step_trajectories(summary["id"], 0) if e is not None]
    finally:
        ledger.close()


def assert_no_traceback(code: int, out: str, err: str) -> None:
    assert "Traceback" not in err and "Traceback" not in out, err[-3000:]
    # The last-resort guard's line starts so; a user's text echoed inside an error may contain the words.
    assert not any(line.lstrip().startswith("internal error:") for line in err.splitlines()), err[-3000:]


def assert_user_error(code: int, err: str, allowed: tuple[int, ...] = (2,), out: str = "") -> None:
    assert_no_traceback(code, out, err)
    assert code in allowed, (code, err[-3000:])
    lines = [line for line in err.splitlines() if line.strip()]
    # Our own errors are one line; click's usage errors end with one "Error: ..." line.
    assert (len(lines) == 1 and lines[0].startswith("error: ")) or (lines and lines[-1].startswith("Error: ")), err[-3000:]
