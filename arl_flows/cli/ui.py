"""``arl ui`` and ``arl deploy``: a local Prefect server with its UI, and training served on a schedule."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import typer

from arl_flows.cli._common import LEDGER_URL_HELP, UserError, app, console, open_ledger, shown
from arl_flows.cli._prefect import UI_HOST, UI_PORT, quiet_prefect, running_ui, ui_state_file

URL_OPTION = typer.Option(None, "--url", help=LEDGER_URL_HELP)


@app.command("ui")
def ui(
    background: bool = typer.Option(False, "--background", help="Start the server detached and return."),
    stop: bool = typer.Option(False, "--stop", help="Stop a server started with --background."),
    port: int = typer.Option(UI_PORT, "--port", min=1, max=65535, help="Port on 127.0.0.1."),
) -> None:
    """Start a Prefect server with its UI on 127.0.0.1:4200; earlier runs show up there."""
    if stop and background:
        raise UserError("--stop stops the background server and --background starts one: give one of them")
    state_file = ui_state_file()
    if stop:
        state = running_ui()
        if state is None:
            raise UserError("no background Prefect server started by `arl ui --background` is running")
        os.killpg(int(state["pid"]), signal.SIGTERM)
        state_file.unlink(missing_ok=True)
        console.print(f"stopped the Prefect server (pid {state['pid']})")
        return
    if running_ui():
        state = running_ui()
        console.print(f"a Prefect server is already running: {shown(state['ui_url'])}")  # type: ignore[index]
        return
    prefect = Path(sys.executable).with_name("prefect")
    cmd = [str(prefect), "server", "start", "--host", UI_HOST, "--port", str(port)]
    env = os.environ | {"PREFECT_UI_API_URL": f"http://{UI_HOST}:{port}/api", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    if not background:
        console.print(f"Prefect UI on http://{UI_HOST}:{port} (Ctrl-C stops it)")
        raise typer.Exit(subprocess.call(cmd, env=env))
    state_file.parent.mkdir(parents=True, exist_ok=True)
    log = open(state_file.with_suffix(".log"), "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    api_url = f"http://{UI_HOST}:{port}/api"
    if not _wait_http(f"{api_url}/health", 90, proc):
        raise UserError(f"the Prefect server did not come up within 90 s; see {state_file.with_suffix('.log')}")
    state_file.write_text(json.dumps({"pid": proc.pid, "api_url": api_url, "ui_url": f"http://{UI_HOST}:{port}"}))
    console.print(f"Prefect UI on http://{UI_HOST}:{port} (pid {proc.pid}); `arl ui --stop` stops it")


def _wait_http(url: str, seconds: float, proc: subprocess.Popen[bytes] | None = None) -> bool:
    import urllib.request

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - loopback only
                if resp.status == 200:
                    return True
        except OSError:
            time.sleep(0.5)
    return False


@app.command("deploy")
def deploy(
    config: Path | None = typer.Option(None, "--config", "-c", help="Run config (TOML) for the scheduled runs."),
    cron: str | None = typer.Option(
        None, "--cron", help="Cron schedule, e.g. '0 3 * * *' (none: run it on demand, from the UI's Run button)."
    ),
    name: str = typer.Option("arl-training", "--name", help="Deployment name."),
    profile: str = typer.Option("default", "--profile", help="Profile of the run config: default or quick."),
    url: str | None = URL_OPTION,
) -> None:
    """Serve training_run (on a cron schedule, or on demand) and lab_results beside it, until Ctrl-C."""
    from arl_flows.config import ConfigError, load_config

    try:
        load_config(config, profile)
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    if cron is not None:
        try:
            from prefect.client.schemas.schedules import CronSchedule

            CronSchedule(cron=cron)
        except ValueError:
            raise UserError(
                f"--cron {cron[:100]!r} is not a valid cron expression; give five fields, minute hour day month "
                "weekday, e.g. '0 3 * * *' (every day at 03:00)"
            ) from None
    if not name or len(name) > 100 or not name.isprintable() or "/" in name:
        raise UserError(f"--name {name[:100]!r}: a deployment name is 1 to 100 printable characters without '/'")
    ledger_url = open_ledger(url).url  # before Prefect starts: a bad URL is one line, not a served deployment
    quiet_prefect(verbose=True)
    from prefect import serve

    from arl_flows.flows import lab_results, training_run

    params = {"config_path": str(config.resolve()) if config else None, "profile": profile, "database_url": ledger_url}
    from prefect.settings import get_current_settings

    api = get_current_settings().api.url
    where = (f"on the Prefect server at {shown(str(api))}" if api else
             "on a temporary Prefect server that stops with this command (`arl ui --background` first keeps one you "
             "can open)")
    when = f"cron {shown(repr(cron))}" if cron else "on demand: the UI's Run button"
    console.print(f"serving deployments 'training_run/{shown(name)}' ({when}) and 'lab_results/lab-results' {where}; "
                  "Ctrl-C stops")
    import httpx

    try:
        serve(
            training_run.to_deployment(name=name, cron=cron, parameters=params),
            lab_results.to_deployment(name="lab-results", parameters={"database_url": ledger_url}),
        )
    except (httpx.TransportError, OSError) as exc:  # the server went away (`arl ui --stop`) under a serving deploy
        server = f"the Prefect server at {shown(str(api))}" if api else "the temporary Prefect server"
        raise UserError(f"{server} stopped answering ({type(exc).__name__}); deploy stopped: start "
                        "the server again (`arl ui --background`) and rerun `arl deploy`") from None
