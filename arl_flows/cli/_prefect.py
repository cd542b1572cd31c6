"""Prefect around the commands: the server ``arl ui --background`` started, and Prefect's terminal output."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from storage.settings import settings

UI_HOST, UI_PORT = "127.0.0.1", 4200


def ui_state_file() -> Path:
    return settings().home / "ui.json"


def running_ui() -> dict[str, Any] | None:
    """The server `arl ui --background` started, if it is still alive."""
    path = ui_state_file()
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text())
        os.kill(int(state["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError, OverflowError):  # a hand-edited or damaged state file
        return None
    return state


def quiet_prefect(verbose: bool) -> None:
    """Keep the terminal for the progress display; Prefect's logs go to a file and the Prefect UI.

    ``main`` has already pointed Prefect's logging at a file (``arl_flows.prefect_env``);
    ``--verbose`` puts Prefect's own terminal logging back.
    """
    if verbose:
        from arl_flows import prefect_env

        prefect_env.terminal_logs()
    ui = running_ui()
    if ui and "PREFECT_API_URL" not in os.environ:
        os.environ["PREFECT_API_URL"] = ui["api_url"]
    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
