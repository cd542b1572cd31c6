"""The ``arl`` command line.

Each command group lives in its own module and registers itself on ``app``.
User mistakes (a bad URL, a missing run id, a bad config field) print one
clear line and exit with code 2, without a traceback; anything unexpected
prints one line naming its log file (``_errors.py`` has the rules).
"""

from __future__ import annotations

import sys
import warnings
from importlib import metadata

from arl_flows.cli._common import UserError, app, console




def _check_verifiers_is_ours() -> None:
    """Stop in one line when ``import verifiers`` is not ARL's package; warn in one line when it shares its name.

    The PyPI package ``verifiers`` (an RL-environments library) installs a
    top-level ``verifiers`` folder too; whichever was installed last owns
    ``verifiers/__init__.py``. Checked here, before the command groups import
    ``verifiers``, so that a broken environment gets this line and no traceback.
    """
    try:
        other = metadata.distribution("verifiers")  # ARL's own distribution is named "arl"
    except metadata.PackageNotFoundError:
        return
    line = (
        f"the PyPI package 'verifiers' ({other.version}) is installed in this environment and shares ARL's import "
        "name 'verifiers'; install ARL in its own virtual environment (pip uninstall verifiers)"
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ours warns about the same clash; this line replaces that warning
            import verifiers
        ours = getattr(verifiers, "__arl__", False) is True
    except Exception:  # noqa: BLE001 - their package may need dependencies that are not here
        ours = False
    if not ours:
        print(f"error: {line}", file=sys.stderr)
        raise SystemExit(2)
    print(f"warning: {line}", file=sys.stderr)


_check_verifiers_is_ours()

# Command groups (imported for their side effect of adding commands to ``app``).
from arl_flows.cli import db as _db  # noqa: E402,F401
from arl_flows.cli import runs as _runs  # noqa: E402,F401
from arl_flows.cli import tiers as _tiers  # noqa: E402,F401
from arl_flows.cli import verify as _verify  # noqa: E402,F401
from arl_flows.cli import train as _train  # noqa: E402,F401
from arl_flows.cli import lab as _lab  # noqa: E402,F401
from arl_flows.cli import ui as _ui  # noqa: E402,F401
from arl_flows.cli import rerank as _rerank  # noqa: E402,F401
from arl_flows.cli import suites as _suites  # noqa: E402,F401
from arl_flows.cli import config as _config  # noqa: E402,F401

# `arl --help` lists the core's commands under one panel and each suite's under its own ("Molecules suite").
CORE_PANEL = "Core"
for _registered in (*app.registered_commands, *app.registered_groups):
    if not isinstance(_registered.rich_help_panel, str):  # unset (typer's default placeholder): a core command
        _registered.rich_help_panel = CORE_PANEL

__all__ = ["CORE_PANEL", "app", "main", "UserError", "console"]


def main() -> None:
    """Console-script entry point: user mistakes get one line and exit code 2, never a traceback (``_errors``)."""
    from arl_flows import prefect_env
    from arl_flows.cli._errors import USER_ERROR_EXIT, _say, one_line, run_app
    from storage.settings import SettingsError, settings

    try:
        home = settings().home
    except SettingsError as exc:
        _say("error:", one_line(str(exc)))
        sys.exit(USER_ERROR_EXIT)
    # Before anything imports Prefect: offline, quiet, under ARL_HOME.
    prefect_env.configure(home)
    run_app(app)
