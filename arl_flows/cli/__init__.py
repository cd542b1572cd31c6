"""The ``arl`` command line.

Each command group lives in its own module and registers itself on ``app``.
User mistakes (a bad URL, a missing run id, a bad config field) print one
clear line and exit with code 2, without a traceback.
"""

from __future__ import annotations

import sys

import typer

from arl_flows.cli._common import UserError, console, err_console

app = typer.Typer(
    name="arl",
    help="ARL: reinforcement learning for language-model policies with expensive, tiered verification.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Command groups (imported for their side effect of adding commands to ``app``).
from arl_flows.cli import db as _db  # noqa: E402,F401
from arl_flows.cli import runs as _runs  # noqa: E402,F401
from arl_flows.cli import tiers as _tiers  # noqa: E402,F401
from arl_flows.cli import verify as _verify  # noqa: E402,F401
from arl_flows.cli import tasks as _tasks  # noqa: E402,F401
from arl_flows.cli import bench as _bench  # noqa: E402,F401
from arl_flows.cli import train as _train  # noqa: E402,F401

__all__ = ["app", "main", "UserError", "console"]


def main() -> None:
    """Console-script entry point."""
    try:
        # With standalone_mode=False click *returns* the code of a `raise typer.Exit(n)`
        # instead of exiting with it (an interrupted `arl run` is 130, `arl db check`
        # with problems is 1).
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except UserError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except Exception as exc:  # click usage errors carry their own exit code (2)
        code = _click_exit_code(exc)
        if code is None:
            raise
        sys.exit(code)


def _click_exit_code(exc: Exception) -> int | None:
    """Exit code of a click exception (shown first), or None if ``exc`` is not one.

    typer >= 0.2x vendors click as ``typer._click`` and raises its own
    exception classes, not click's; plain click's are still handled for
    commands or callbacks that raise them.
    """
    import importlib

    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if isinstance(exc, module.ClickException):  # usage errors: the usage, a hint and "Error: ..."
            exc.show()
            return exc.exit_code
        if hasattr(module, "Exit") and isinstance(exc, module.Exit):
            return exc.exit_code
        if hasattr(module, "Abort") and isinstance(exc, module.Abort):
            err_console.print("aborted")
            return 130
    return None
