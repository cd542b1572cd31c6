"""Shared bits of the CLI: consoles, the user-error type, ledger opening, JSON output."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

__all__ = ["UserError", "console", "err_console", "open_ledger", "print_json"]

console = Console()
err_console = Console(stderr=True)


class UserError(Exception):
    """A mistake the user can fix; printed as one line, exit code 2."""


def open_ledger(url: str | None = None):  # noqa: ANN201 - avoids importing SQLAlchemy for --help
    """Open the ledger at ``url`` (or ``ARL_DATABASE_URL`` / the default file), as a UserError on failure."""
    from storage.ledger import Ledger, LedgerError

    try:
        return Ledger(url)
    except LedgerError as exc:
        raise UserError(str(exc)) from None


def print_json(data: Any) -> None:
    """Print machine-readable JSON to stdout (no rich markup)."""
    print(json.dumps(data, indent=2, default=str))
