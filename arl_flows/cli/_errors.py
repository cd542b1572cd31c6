"""How the ``arl`` process ends: an exit code and at most one line on stderr, never a traceback.

Three layers, outermost last:

1. Commands check what the user gave and raise :class:`UserError` with a
   message naming what to fix; the packages raise their own user-facing
   errors (:class:`storage.ledger.LedgerError`, :class:`arl_flows.config.ConfigError`,
   :class:`verifiers.VerifierNotFound`), and an ``OSError`` names the file the
   system refused. Each becomes ``error: MESSAGE`` on one line, exit code 2.
2. click's usage errors (unknown option, missing argument, a number that does
   not parse) keep click's own short usage text and its exit code 2.
3. Anything else is a bug in ARL, not the user's mistake: the traceback goes
   to a log file (under ``$ARL_HOME/logs``, or the temporary folder when that
   cannot be written) and the terminal gets one line naming the exception and
   the log, exit code 1. ``ARL_TRACEBACK=1`` prints the traceback instead.

Messages are made one line here (control characters escaped, long text cut),
so no message can spread over the terminal or hide the next prompt.
"""

from __future__ import annotations

import datetime
import importlib
import os
import re
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.text import Text

from arl_flows.cli._common import UserError, err_console
from storage.settings import Settings, SettingsError, settings

__all__ = ["INTERNAL_ERROR_EXIT", "USER_ERROR_EXIT", "one_line", "run_app"]

USER_ERROR_EXIT = 2
INTERNAL_ERROR_EXIT = 1
_MAX_MESSAGE = 2000
TRACEBACK_ENV = "ARL_TRACEBACK"


def one_line(text: str, limit: int = _MAX_MESSAGE) -> str:
    """``text`` on one line: whitespace runs become one space, other control characters escapes, cut to ``limit``."""
    flat = " ".join(text.split())
    if not flat.isprintable():
        flat = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in flat)
    return flat if len(flat) <= limit else f"{flat[: limit - 3]}..."


def _user_error_types() -> tuple[type[BaseException], ...]:
    """The packages' own user-facing errors (imported only if their module is already loaded: --help stays fast)."""
    types: list[type[BaseException]] = [UserError]
    for module, name in (
        ("storage.ledger", "LedgerError"), ("storage.settings", "SettingsError"), ("arl_flows.config", "ConfigError"),
        ("verifiers.registry", "VerifierNotFound"),
    ):
        loaded = sys.modules.get(module)
        if loaded is not None and hasattr(loaded, name):
            types.append(getattr(loaded, name))
    return tuple(types)


def _say(prefix: str, message: str = "", style: str = "bold red") -> None:
    """Write ``prefix message`` as one line on stderr, even if stderr cannot encode it."""
    try:
        err_console.print(Text.assemble((prefix, style), " " if message else "", message), soft_wrap=True, highlight=False)
    except Exception:  # noqa: BLE001 - the last line must get out whatever the terminal
        stream = getattr(sys.stderr, "buffer", None)
        data = f"{prefix} {message}".rstrip().encode("ascii", "backslashreplace") + b"\n"
        if stream is not None:
            stream.write(data)
            stream.flush()


def _os_error_message(exc: OSError) -> str:
    reason = exc.strerror or str(exc) or type(exc).__name__
    names = [n for n in (exc.filename, exc.filename2) if n is not None]
    if names:
        return f"{reason}: " + " -> ".join(repr(os.fsdecode(n)) if isinstance(n, bytes) else repr(n) for n in names)
    return reason


def _settings_or_default() -> Settings:
    """The settings, or the defaults when a variable is bad (the error path must not fail on it)."""
    try:
        return settings()
    except SettingsError:
        return Settings.model_construct(home=Path.home() / ".arl", traceback=False)


def _log_folder() -> Path:
    home = _settings_or_default().home
    for folder in (home / "logs", Path(tempfile.gettempdir()) / "arl-logs"):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / ".writable"
            probe.touch()
            probe.unlink()
            return folder
        except OSError:
            continue
    return Path(tempfile.gettempdir())


_OWN_PACKAGES = frozenset({"arl_flows", "verifiers", "policies", "storage"})


def _plugin_at_fault(exc: BaseException) -> str | None:
    """'verifier NAME (module:Class, file.py:LINE)' when ``exc`` was raised inside a verifier or suite of the user's
    own (an instance whose class lives outside ARL's packages), or None: a tier of one's own that raises, or builds a
    verdict with a NaN, is the plugin's to fix, not a bug in ARL."""
    verifier_type = getattr(sys.modules.get("verifiers.base"), "Verifier", None)
    suite_type = getattr(sys.modules.get("arl_flows.suites"), "Suite", None)
    kinds = tuple(k for k in (verifier_type, suite_type) if k is not None)
    if not kinds:
        return None
    found = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        # `self` inside the plugin's methods; `verifier` where ARL checks what a tier returned (step.verify_inline)
        owner = next((o for o in (frame.f_locals.get("self"), frame.f_locals.get("verifier")) if isinstance(o, kinds)), None)
        if owner is None or type(owner).__module__.split(".")[0] in _OWN_PACKAGES:
            continue
        cls = type(owner)
        source = sys.modules.get(cls.__module__)
        where = found[1] if found else ""
        if source is not None and frame.f_code.co_filename == getattr(source, "__file__", None):
            where = f", {Path(frame.f_code.co_filename).name}:{line}"
        kind = "verifier" if verifier_type is not None and isinstance(owner, verifier_type) else "suite"
        name = getattr(owner, "name", cls.__name__)
        found = (f"{kind} {name} ({cls.__module__}:{cls.__qualname__}", where)
    return found[0] + found[1] + ")" if found else None


def _internal_error(exc: BaseException) -> NoReturn:
    """One line naming the exception and where its traceback went; exit code 1 (2 when a plugin of the user's raised)."""
    detail = one_line(f"{type(exc).__name__}: {exc}", 300)
    if _settings_or_default().traceback:
        traceback.print_exception(exc)
        sys.exit(INTERNAL_ERROR_EXIT)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    where = "(could not write a log)"
    try:
        path = _log_folder() / f"arl-error-{stamp}-{os.getpid()}.log"
        path.write_text(
            f"arl {' '.join(sys.argv[1:])!r}\n" + "".join(traceback.format_exception(exc)), encoding="utf-8", errors="backslashreplace"
        )
        where = str(path)
    except Exception:  # noqa: BLE001, S110 - the one line below still says what happened
        pass
    if plugin := _plugin_at_fault(exc):
        detail = re.sub(r"\s*For further information visit \S+", "", detail)  # pydantic's link, after each error
        _say("error:", f"{one_line(plugin, 300)} raised {detail}; fix it there (a tier returns a 'failed' verdict for "
             f"what it cannot verify, never raises; traceback in {one_line(where)}; {TRACEBACK_ENV}=1 prints it)")
        sys.exit(USER_ERROR_EXIT)
    _say(
        "internal error:",
        f"{detail} (a bug in ARL, not your input; traceback in {one_line(where)}; {TRACEBACK_ENV}=1 prints it)",
    )
    sys.exit(INTERNAL_ERROR_EXIT)


def _suite_option_hint(exc: Any) -> str:
    """For ``arl run --space ...``: the option is a suite's, set in the config's [options] table; else "".

    `arl verify` and `arl rerank` take some suite options as flags (``--space``); `arl run` reads them from its
    config only, and click's own hint ("Possible options: --name") pointed elsewhere."""
    ctx, name = getattr(exc, "ctx", None), getattr(exc, "option_name", None)
    if ctx is None or ctx.command.name != "run" or not isinstance(name, str) or not name.startswith("--"):
        return ""
    field = name[2:].replace("-", "_")
    try:
        from arl_flows.suites import suite_classes

        owners = [n for n, cls in sorted(suite_classes().items()) if field in cls.Options.model_fields]
    except Exception:  # noqa: BLE001 - a hint must never turn a usage error into a crash
        return ""
    if not owners:
        return ""
    named = f"the {owners[0]} suite" if len(owners) == 1 else f"the suites {', '.join(owners)}"
    return (f"; {field} is an option of {named}: set it in the run config's [options] table "
            f"({field} = ...; `arl suites show {owners[0]}` lists them)")


def _show_click_error(exc: Any) -> None:
    """click's usage text, with its message on one line and the user's text in it escaped.

    click's own ``show()`` prints the message as it is, so an option named
    with a newline or an escape sequence would reach the terminal raw.
    """
    ctx = getattr(exc, "ctx", None)
    lines = []
    if ctx is not None:
        lines.append(ctx.get_usage())
        if ctx.command.get_help_option(ctx) is not None:
            lines.append(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.")
        lines.append("")
    hint = _suite_option_hint(exc)
    if hint:
        exc.possibilities = None  # click's guess ("Possible options: --name") pointed elsewhere
    lines.append(f"Error: {one_line(exc.format_message())}{hint}")
    text = "\n".join(lines) + "\n"
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except UnicodeEncodeError:
        sys.stderr.buffer.write(text.encode("ascii", "backslashreplace"))
        sys.stderr.flush()


def _click_exit_code(exc: BaseException) -> int | None:
    """Exit code of a click exception (its usage message shown first), or None if ``exc`` is not one.

    typer >= 0.2x vendors click as ``typer._click`` and raises its own
    exception classes, not click's; plain click's are still handled for
    commands or callbacks that raise them.
    """
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if type(exc).__name__ == "NoArgsIsHelpError":  # `arl` or `arl lab` alone: the help was asked for, and shown
            return 0
        if isinstance(exc, module.ClickException):  # usage errors: the usage, a hint and "Error: ..."
            _show_click_error(exc)
            return exc.exit_code
        if hasattr(module, "Exit") and isinstance(exc, module.Exit):
            return exc.exit_code
        if hasattr(module, "Abort") and isinstance(exc, module.Abort):
            _say("aborted", style="yellow")
            return 130
    return None


def _quiet_broken_pipe() -> NoReturn:
    """stdout closed early (``arl runs list | head -1``): not an error worth a message."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    sys.exit(141)


def run_app(app: Any) -> None:
    """Run the typer ``app`` on ``sys.argv``; return on success, else exit by one of the three layers above."""
    try:
        # With standalone_mode=False click *returns* the code of a `raise typer.Exit(n)`
        # instead of exiting with it (an interrupted `arl run` is 130, `arl db check`
        # with problems is 1).
        code = app(standalone_mode=False)
    except SystemExit:
        raise
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _say("interrupted", style="yellow")
        sys.exit(130)
    except typer.Abort:
        _say("aborted", style="yellow")
        sys.exit(130)
    except BrokenPipeError:
        _quiet_broken_pipe()
    except _user_error_types() as exc:
        _say("error:", one_line(str(exc)) or type(exc).__name__)
        sys.exit(USER_ERROR_EXIT)
    except OSError as exc:
        _say("error:", one_line(_os_error_message(exc)))
        sys.exit(USER_ERROR_EXIT)
    except Exception as exc:  # noqa: BLE001 - click's own exceptions first, then the last-resort guard
        click_code = _click_exit_code(exc)
        if click_code is None:
            _internal_error(exc)
        sys.exit(click_code)
    if isinstance(code, int) and code:
        sys.exit(code)
