"""The embedded Prefect that ``arl`` starts: offline, quiet, and kept under ``ARL_HOME``.

Many machines that run verification-heavy training (HPC nodes, lab
workstations) are offline. Prefect's defaults there print a telemetry
traceback (``database is locked`` while the temporary server writes its
telemetry session) and ``Failed to send telemetry`` lines, and send every
library warning to the terminal, where ARL's progress bar should be.

:func:`configure` runs before Prefect is first imported (Prefect reads its
settings and logging config at import) and only fills in what the user has not
set:

- telemetry off: ``PREFECT_SERVER_ANALYTICS_ENABLED=false`` (the server's
  telemetry service) and ``DO_NOT_TRACK=1`` (the SDK's events). Setting either
  variable yourself turns it back on.
- ``PREFECT_HOME`` under ``ARL_HOME`` (``~/.arl/prefect``), so the temporary
  server's SQLite database lives with the ledger.
- Prefect's logs (and any other library's log records) go to a file instead
  of the terminal: ``$ARL_HOME/logs/prefect.log`` until a run starts, then
  ``$ARL_HOME/runs/<run id>/prefect.log`` (:func:`log_to_run`). Flow and task
  logs still reach the Prefect UI. ``--verbose`` keeps Prefect's own terminal
  logging instead; so does a ``PREFECT_LOGGING_SETTINGS_PATH`` of your own.
- 180 s instead of 20 s for the temporary Prefect server to start, which a
  busy machine needs (``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``).
- no progress bars or advisory warnings from the Hugging Face libraries (they
  would draw over ARL's own bar each time a checkpoint is written):
  ``HF_HUB_DISABLE_PROGRESS_BARS=1``, ``TRANSFORMERS_VERBOSITY=error``.

:func:`start_shielded_server` starts the temporary server of ``arl run`` so
that a terminal's Ctrl-C stops the run, not the server under it, on a port
that is its own (two runs starting at once never share one server).
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import threading
from pathlib import Path
from typing import Any

# Prefect reads its settings from the environment at import: its modules are imported in the functions
# that run after configure() has set that environment.
__all__ = ["PrefectLogFile", "configure", "log_to_run", "start_shielded_server", "terminal_logs"]

_LOG_ENV = "ARL_PREFECT_LOG"

# Prefect's default logging.yml with its terminal handlers replaced by the file.
_LOGGING_YML = """\
version: 1
disable_existing_loggers: False
formatters:
  standard:
    (): prefect.logging.formatters.PrefectFormatter
    format: "%(asctime)s.%(msecs)03d | %(levelname)-7s | %(name)s - %(message)s"
    flow_run_fmt: "%(asctime)s.%(msecs)03d | %(levelname)-7s | Flow run %(flow_run_name)r - %(message)s"
    task_run_fmt: "%(asctime)s.%(msecs)03d | %(levelname)-7s | Task run %(task_run_name)r - %(message)s"
    datefmt: "%H:%M:%S"
handlers:
  file:
    level: 0
    class: arl_flows.prefect_env.PrefectLogFile
    formatter: standard
  api:
    level: 0
    class: prefect.logging.handlers.APILogHandler
  worker_api:
    level: 0
    class: prefect.logging.handlers.WorkerAPILogHandler
loggers:
  prefect:
    level: "${PREFECT_LOGGING_LEVEL}"
  prefect.extra:
    level: "${PREFECT_LOGGING_LEVEL}"
    handlers: [api]
    propagate: false
  prefect.flow_runs:
    level: NOTSET
    handlers: [api]
  prefect.task_runs:
    level: NOTSET
    handlers: [api]
  prefect.workers:
    level: NOTSET
    handlers: [worker_api]
  prefect.server:
    level: "${PREFECT_SERVER_LOGGING_LEVEL}"
  prefect.client:
    level: "${PREFECT_LOGGING_LEVEL}"
  prefect._internal:
    level: "${PREFECT_INTERNAL_LOGGING_LEVEL}"
    propagate: false
    handlers: [file]
  uvicorn:
    level: "${PREFECT_SERVER_LOGGING_LEVEL}"
    handlers: [file]
    propagate: false
  fastapi:
    level: "${PREFECT_SERVER_LOGGING_LEVEL}"
    handlers: [file]
    propagate: false
root:
  level: WARNING
  handlers: [file]
"""


class PrefectLogFile(logging.Handler):
    """Appends log records to the file named by ``$ARL_PREFECT_LOG``; :func:`log_to_run` moves it.

    Every instance in a process writes to the same, current file; the temporary
    Prefect server (a subprocess) inherits the variable and keeps the first file.
    """

    _lock = threading.Lock()
    _path: Path | None = None
    _stream = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            with PrefectLogFile._lock:
                stream = PrefectLogFile._open()
                if stream is not None:
                    stream.write(line + "\n")
                    stream.flush()
        except Exception:  # noqa: BLE001 - logging must never break the run
            self.handleError(record)

    @classmethod
    def _open(cls):  # noqa: ANN206
        path = os.environ.get(_LOG_ENV)
        if not path:
            return None
        if cls._stream is None or cls._path != Path(path):
            if cls._stream is not None:
                cls._stream.close()
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            cls._stream = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the process
            cls._path = Path(path)
        return cls._stream


def configure(arl_home: Path, verbose: bool = False) -> Path | None:
    """Set Prefect's environment before it is imported; returns the log file (None when logs stay on the terminal)."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    # Prefect gives its temporary server 20 s to start; on a loaded machine that is not enough.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        (arl_home / "logs").mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # an unusable ARL_HOME is reported by the command itself, in one line
    os.environ.setdefault("PREFECT_HOME", str(arl_home / "prefect"))
    if verbose or "PREFECT_LOGGING_SETTINGS_PATH" in os.environ:
        return None
    settings = arl_home / "prefect-logging.yml"
    try:
        if not settings.is_file() or settings.read_text() != _LOGGING_YML:
            tmp = settings.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(_LOGGING_YML)
            tmp.replace(settings)
    except OSError:
        return None
    os.environ["PREFECT_LOGGING_SETTINGS_PATH"] = str(settings)
    log = arl_home / "logs" / "prefect.log"
    os.environ.setdefault(_LOG_ENV, str(log))
    return Path(os.environ[_LOG_ENV])


def terminal_logs() -> None:
    """Undo the file logging of :func:`configure` (call before Prefect is imported)."""
    ours = os.environ.get("PREFECT_LOGGING_SETTINGS_PATH", "").endswith("prefect-logging.yml")
    if ours and _LOG_ENV in os.environ:
        del os.environ["PREFECT_LOGGING_SETTINGS_PATH"]
        del os.environ[_LOG_ENV]


def log_to_run(run_directory: Path) -> Path | None:
    """From now on, this process's Prefect logs go to ``<run directory>/prefect.log``."""
    if _LOG_ENV not in os.environ:
        return None
    path = run_directory / "prefect.log"
    os.environ[_LOG_ENV] = str(path)
    return path


# ---------------------------------------------------------------------- the temporary server of a run
_SHIELDED = (signal.SIGINT, signal.SIGTERM)


def start_shielded_server() -> Any | None:
    """Start Prefect's temporary server with SIGINT and SIGTERM blocked in it; None when a server is configured.

    A terminal's Ctrl-C (and a ``kill`` of the process group) reaches every
    process of the foreground group. The temporary server would die first and
    the run's last calls (marking the run, releasing its concurrency slots)
    would fail with ``Connection refused``. The server is started from a thread
    that blocks both signals (a blocked mask is inherited across exec), so only
    the run handles them; the run stops the server when it exits. SIGKILL of
    the group, and the terminal's SIGHUP, still end it.
    """
    from prefect.settings import get_current_settings

    if get_current_settings().api.url:
        return None  # checked first: the server module's imports cost ~2 CPU-s that a run on a configured server never needs
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the instance Prefect's clients look up (keyed by port None)
    if server.running:
        return server
    failure: list[BaseException] = []

    def start() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, _SHIELDED)
        try:
            server.start()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)

    for _ in range(_SERVER_ATTEMPTS):
        server.port = free_port()
        starter = threading.Thread(target=start, name="arl-prefect-server", daemon=True)
        starter.start()
        starter.join()  # a Ctrl-C here still interrupts the run (only the starter thread blocks it)
        if failure:
            raise failure[0]
        if listens_on_its_port(server):
            # Registered after Prefect's own stop, so it runs first (atexit is last in, first out): the server
            # ignores SIGTERM, so it is killed; its SQLite database is transactional.
            atexit.register(_kill_server, server)
            return server
        # Another run's server took the port between the pick and the bind, and answered the health check that
        # Prefect waits for: this run would talk to that server, and hang once it stops. Start again elsewhere.
        _kill_server(server)
        server.running = False
    raise RuntimeError(f"the temporary Prefect server could not get a port of its own in {_SERVER_ATTEMPTS} tries")


_SERVER_ATTEMPTS = 5


def free_port() -> int:
    """A port the OS hands out now (from its ephemeral range, at random since Linux 4.x): two runs that start at
    once do not draw the same one, as they can from Prefect's own random pick among 8000-8999."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listens_on_its_port(server: Any) -> bool:
    """Whether the server's own process listens on its port (not another process that answers there)."""
    import psutil

    process = getattr(server, "server_process", None)
    if process is None or process.poll() is not None:
        return False
    try:
        sockets = psutil.Process(process.pid).net_connections(kind="tcp")
    except psutil.Error:
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == server.port for c in sockets)


def _kill_server(server: Any) -> None:
    process = getattr(server, "server_process", None)
    if process is not None and process.poll() is None:
        process.kill()
        process.wait()
