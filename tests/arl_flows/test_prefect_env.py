"""The Prefect that `arl` starts is offline, quiet and kept under ARL_HOME (arl_flows.prefect_env)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arl_flows import prefect_env

# Run in a fresh interpreter: Prefect reads its settings and logging config once, at import.
_SCRIPT = """
import logging, os, sys
from pathlib import Path
from arl_flows import prefect_env
prefect_env.configure(Path(sys.argv[1]))
from prefect import flow  # noqa: F401  (importing prefect.main configures logging from our file)
from prefect.logging import get_logger
get_logger("prefect.server").error("a server error line, e.g. database is locked")
logging.getLogger("some.library").warning("a library warning")
prefect_env.log_to_run(Path(sys.argv[1]) / "runs" / "abc")
get_logger("prefect").warning("after the run started")
print("settings", os.environ["PREFECT_HOME"], os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"], os.environ["DO_NOT_TRACK"])
"""


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ARL_")) and k != "DO_NOT_TRACK"}
    return env | extra


def test_prefect_logs_go_to_files_under_arl_home_not_the_terminal(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(home)], env=_clean_env(), capture_output=True, text=True,
                          timeout=300, check=True)
    assert done.stderr == "", done.stderr
    assert done.stdout.strip() == f"settings {home / 'prefect'} false 1"
    before = (home / "logs" / "prefect.log").read_text()
    assert "database is locked" in before and "a library warning" in before
    assert "after the run started" not in before
    assert "after the run started" in (home / "runs" / "abc" / "prefect.log").read_text()


def test_settings_the_user_made_are_kept(tmp_path: Path) -> None:
    own_home = tmp_path / "own_prefect_home"
    env = _clean_env(PREFECT_HOME=str(own_home), PREFECT_SERVER_ANALYTICS_ENABLED="true")
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path / "home")], env=env, capture_output=True,
                          text=True, timeout=300, check=True)
    assert done.stdout.strip() == f"settings {own_home} true 1"


def _unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset what configure() sets, so that the test's own environment is restored afterwards."""
    for key in ("PREFECT_LOGGING_SETTINGS_PATH", "ARL_PREFECT_LOG", "PREFECT_HOME", "PREFECT_SERVER_ANALYTICS_ENABLED",
                "DO_NOT_TRACK", "HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY",
                "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"):
        monkeypatch.setenv(key, "")  # recorded, so the original value (or its absence) comes back
        monkeypatch.delenv(key)


def test_verbose_puts_prefects_terminal_logging_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _unset(monkeypatch)
    log = prefect_env.configure(tmp_path)
    assert log == tmp_path / "logs" / "prefect.log"
    assert Path(os.environ["PREFECT_LOGGING_SETTINGS_PATH"]).read_text().startswith("version: 1")
    prefect_env.terminal_logs()
    assert "PREFECT_LOGGING_SETTINGS_PATH" not in os.environ and "ARL_PREFECT_LOG" not in os.environ


def test_an_unusable_arl_home_leaves_prefect_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _unset(monkeypatch)
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    assert prefect_env.configure(not_a_dir) is None
    assert "PREFECT_HOME" not in os.environ and "PREFECT_LOGGING_SETTINGS_PATH" not in os.environ


def test_an_error_raised_while_prefect_handles_a_ctrl_c_counts_as_a_stop() -> None:
    from prefect.exceptions import TerminationSignal

    from arl_flows.flows import _raised_by_a_stop

    def prefect_handling(stop: BaseException) -> None:
        try:
            raise stop
        except BaseException:  # noqa: BLE001 - what Prefect's handle_crash does, then fails itself
            raise ValueError("Task run is not set")  # noqa: B904

    for stop in (KeyboardInterrupt(), TerminationSignal(signal=15)):
        with pytest.raises(ValueError) as info:
            prefect_handling(stop)
        assert _raised_by_a_stop(info.value)
    assert not _raised_by_a_stop(ValueError("a real bug"))


# Another run's temporary server took the port this run's server was about to bind, and answers Prefect's health
# check before this run's server has even started: the run then used that server and hung once it stopped (a CI run
# of the SIGTERM test waited 20 minutes for a concurrency slot on a server that had gone). The run's own server must
# listen on the port it uses.
_PORT_RACE = """
import http.server, json, sys, threading, urllib.request
from pathlib import Path
from arl_flows import prefect_env
prefect_env.configure(Path(sys.argv[1]))

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"true")
    def log_message(self, *args):
        pass

foreign = http.server.HTTPServer(("127.0.0.1", 0), Health)
threading.Thread(target=foreign.serve_forever, daemon=True).start()
taken = foreign.server_address[1]
real, picks = prefect_env.free_port, []
def pick():
    picks.append(taken if not picks else real())
    return picks[-1]
prefect_env.free_port = pick
server = prefect_env.start_shielded_server()
from prefect.server.api.server import SubprocessASGIServer
with urllib.request.urlopen(server.api_url + "/health", timeout=30) as answer:
    healthy = answer.status == 200
print(json.dumps({"taken": taken, "picks": picks, "port": server.port, "own": prefect_env.listens_on_its_port(server),
                  "same_instance": SubprocessASGIServer() is server, "healthy": healthy,
                  "again": prefect_env.start_shielded_server() is server and server.port == picks[-1]}))
"""


@pytest.mark.timeout(600)
def test_the_runs_temporary_server_listens_on_its_own_port_not_another_runs(tmp_path: Path) -> None:
    import json

    done = subprocess.run([sys.executable, "-c", _PORT_RACE, str(tmp_path / "home")], capture_output=True, text=True,
                          timeout=500, env=_clean_env())
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["picks"][0] == got["taken"] and len(got["picks"]) == 2  # the first pick was the foreign one
    assert got["port"] == got["picks"][1] != got["taken"]
    assert got["own"] and got["healthy"] and got["same_instance"] and got["again"]
