"""Shared bits of the CLI: the ``arl`` app each command module adds to, consoles, the user-error type, ledger
opening, JSON output.

This module imports no command module and looks no suite up, so a suite's own command module can import it
while :mod:`arl_flows.cli.entry` is still assembling the app.

User text (run names, ids, SMILES, paths, verifier feedback) never reaches
rich as markup: pass it through :func:`shown` when it goes into a markup
string or a table cell (but not into a ``UserError``: errors print as plain
text, so use :func:`cut` there), so ``[/x]`` prints as itself instead of crashing
the command, and control characters print as escapes instead of moving the
cursor or splitting a line. The consoles also leave ``:name:`` emoji codes
alone, since a SMILES or a path may contain them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

# The helpers import the ledger and the run config when called: `arl --help` needs neither.
__all__ = [
    "CORE_PANEL", "LEDGER_URL_HELP", "UserError", "app", "console", "cost_text", "cut", "default_suite", "err_console", "load_suite", "open_ledger", "print_json",
    "shown"]

# Help text of every command's ledger option: the default follows ARL_HOME, so the help names the variable, not a path.
LEDGER_URL_HELP = "Ledger URL (default: $ARL_DATABASE_URL, else ledger.db in $ARL_HOME, which is ~/.arl unless set)."

app = typer.Typer(
    name="arl",
    help="ARL: reinforcement learning for language-model policies with expensive, tiered verification.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)



def _print_version(value: bool) -> None:
    if value:
        from importlib import metadata

        typer.echo(f"arl {metadata.version('arl')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version, help="Print ARL's version and exit."),
) -> None:
    pass


# `arl --help` lists the core's commands under one panel and each suite's under its own ("Molecules suite").
CORE_PANEL = "Core"

console = Console(emoji=False)
err_console = Console(stderr=True, emoji=False)


class UserError(Exception):
    """A mistake the user can fix; printed as one line, exit code 2."""


def shown(value: object, limit: int | None = None) -> str:
    """``value`` as text safe to put in rich markup: one line, markup escaped, at most ``limit`` characters.

    Characters that are not printable (newlines, ESC, NUL, lone surrogates)
    are written as Python escapes (``\\n``, ``\\x1b``, ``\\udcff``); a cut
    text ends with ``...`` and says how long it was.
    """
    text = value if isinstance(value, str) else str(value)
    if limit is not None and len(text) > limit:
        text = f"{text[:limit]}... ({len(text):,} characters)"
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return escape(text)


def cut(value: object, limit: int = 200) -> str:
    """``value`` as text for an error message: no markup escaping (errors print as plain text), cut to ``limit``.

    The error printer escapes control characters and keeps the message on one line.
    """
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def open_ledger(url: str | None = None, *, existing: bool = False):  # noqa: ANN201 - avoids importing SQLAlchemy for --help
    """Open the ledger at ``url`` (or ``ARL_DATABASE_URL`` / the default file), as a UserError on failure.

    ``existing``: for a command that checks or answers what a ledger holds (`arl db check`, `arl lab`), an SQLite
    path with no file is a mistyped path, not a new ledger: one line, and nothing is created.
    """
    from storage.ledger import Ledger, LedgerError, default_database_url

    try:
        if existing:  # refuses an in-memory ledger too
            require_existing_ledger(url or default_database_url())
        else:
            persistent_ledger(url)
        return Ledger(url)
    except LedgerError as exc:
        raise UserError(str(exc)) from None


def _sqlite_path(url: str) -> Path | None:
    """``sqlite_file(url)`` with its error as a UserError line."""
    from storage.ledger import LedgerError, sqlite_file

    try:
        return sqlite_file(url)
    except LedgerError as exc:
        raise UserError(str(exc)) from None


def persistent_ledger(url: str | None) -> None:
    """A UserError for a ledger URL whose verdicts would be lost at exit (SQLite in memory); nothing is opened."""
    from storage.ledger import default_database_url

    _sqlite_path(url or default_database_url())


def missing_ledger_file(url: str | None) -> Path | None:
    """The file of an SQLite ledger ``url`` (or the default) that does not exist yet; None otherwise."""
    from storage.ledger import default_database_url

    path = _sqlite_path(url or default_database_url())
    if path is None or path.exists():
        return None
    above = next((p for p in path.parents if p.exists()), None)
    return path if above is None or above.is_dir() else None  # under a file: opening it says so


def require_existing_ledger(url: str) -> None:
    """A UserError when ``url`` is an SQLite ledger whose file does not exist (or an in-memory one, which is empty)."""
    path = _sqlite_path(url)
    if path is not None and not path.exists():
        raise UserError(f"no ledger at {path}; check the path (`arl db upgrade --url {url}` creates a new one)")


def goal_of_items(items: list[str], option: str) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as a goal; a value is read as JSON when it parses (numbers, lists), else as text."""
    goal: dict[str, Any] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not (key.strip() and eq):
            raise UserError(f"{option} {item[:100]!r}: write it as KEY=VALUE; `arl suites show SUITE` lists a suite's goal keys")
        try:
            goal[key.strip()] = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            goal[key.strip()] = raw
    return goal


MAX_INPUT_BYTES = 200 * 2**20  # an --input of candidates; larger is the wrong file, or /dev/zero


def read_text_file(option: str, path: Path) -> str:
    """The UTF-8 text of a regular file of sane size (a byte-order mark that some editors write is dropped), or one
    UserError line: not a file (a folder, a FIFO or /dev/zero, which would never finish reading), too large,
    unreadable, or not UTF-8 (naming the first bad line)."""
    name = cut(str(path), 300)
    try:
        if not path.exists():
            where = "" if path.is_absolute() else f" (relative paths are read from the current directory, {cut(str(Path.cwd()), 200)})"
            raise UserError(f"{option} {name} does not exist{where}")
        if not path.is_file():
            raise UserError(f"{option} {name} is not a regular file")
        size = path.stat().st_size
        if size > MAX_INPUT_BYTES:
            raise UserError(f"{option} {name} is {size:,} bytes; split it into files under {MAX_INPUT_BYTES:,}")
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {option} {name}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserError(f"{option} {name} is not UTF-8 text (line {line}); save it as UTF-8") from None


def cost_text(costs: Any, *, short: bool = False) -> str:
    """A cost model in words: ``base + per_unit * size^exponent`` CPU-seconds a call (size: the suite's unit);
    ``short``: a table cell, ``0.3+0.014*n^3``."""
    power = "" if costs.exponent == 1 else f"^{costs.exponent:g}"
    if short:
        return f"{costs.base:.3g}" + (f"+{costs.per_unit:.2g}*n{power}" if costs.per_unit else "")
    return f"{costs.base:.3g} CPU-s" + (f" + {costs.per_unit:.3g} CPU-s x size{power}" if costs.per_unit else "") + " a call"


def print_json(data: Any) -> None:
    """Print machine-readable JSON to stdout (no rich markup)."""
    print(json.dumps(data, indent=2, default=str))


def space_options(suite: str | None, space: str | None) -> dict[str, Any]:
    """The ``[options]`` a ``--space`` gives: ``{"space": SPACE}`` for a suite with chemistry spaces; none without it."""
    if space is None:
        return {}
    from arl_flows.suites import SuiteNotFound, get_suite

    name = suite or default_suite()
    try:
        options_model = get_suite(name).Options
    except SuiteNotFound as exc:
        raise UserError(f"--suite: unknown suite; {exc}") from None
    if "space" not in options_model.model_fields:
        raise UserError(f"--space: the {shown(name)} suite has no chemistry spaces (the molecules suite has)")
    from pydantic import ValidationError

    try:
        options_model.model_validate({"space": space})
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise UserError(f"--space: {' '.join(message.split())[:300]}") from None
    return {"space": space}


def default_suite() -> str:
    """The suite a command uses when --suite is not given: the run config's default."""
    from arl_flows.config import RunConfig

    return str(RunConfig.model_fields["suite"].default)


def load_suite(name: str | None, options: dict[str, Any] | None = None) -> Any:
    """The suite object for commands outside a run, with ``options``; an unknown name is one line listing the installed ones."""
    from arl_flows.config import standalone_suite
    from arl_flows.suites import SuiteNotFound

    try:
        return standalone_suite(name or default_suite(), options)
    except SuiteNotFound as exc:
        raise UserError(f"--suite: unknown suite; {exc}") from None
    except ValueError as exc:  # the suite's default config does not validate
        raise UserError(f"suite {shown(name or default_suite())}: {' '.join(str(exc).split())[:300]}") from None
