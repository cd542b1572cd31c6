"""The ``arl`` app assembled: the environment check, every command group, the suites' groups, the help panels, ``main``.

``arl_flows.cli`` loads this module the first time ``app``, ``main`` or another name it exports is used, not when
the package is imported: a suite's command module imports :mod:`arl_flows.cli._common` while this module looks the
suites up, and would otherwise import the half-built app back. User mistakes (a bad URL, a missing run id, a bad
config field) print one clear line and exit with code 2, without a traceback; anything unexpected prints one line
naming its log file (``_errors.py`` has the rules).
"""

from __future__ import annotations

import sys
import warnings
from importlib import metadata

from arl_flows.cli._common import CORE_PANEL, UserError, app, console

__all__ = ["CORE_PANEL", "UserError", "app", "console", "main"]


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

# Command groups, imported for their side effect of adding commands to ``app``. Submodule imports (not
# ``from arl_flows.cli import db``): this module must not import the package's PEP 562 names back.
import arl_flows.cli.db  # noqa: I001 - this order is the order of `arl --help`
import arl_flows.cli.runs
import arl_flows.cli.tiers
import arl_flows.cli.verify
import arl_flows.cli.train
import arl_flows.cli.lab
import arl_flows.cli.ui
import arl_flows.cli.rerank
import arl_flows.cli.suites
import arl_flows.cli.config

# After the core's groups, so that a suite's group cannot take a core command's name.
arl_flows.cli.suites.add_suite_commands()

for _registered in (*app.registered_commands, *app.registered_groups):
    if not isinstance(_registered.rich_help_panel, str):  # unset (typer's default placeholder): a core command
        _registered.rich_help_panel = CORE_PANEL


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
