"""What the ledger tells users when something is wrong: one line, in the database's own words.

``LedgerError`` is every problem a user can act on (a bad URL, an unknown
run, a damaged file, a duplicate lab result). Errors that mean a bug in ARL
itself (a constraint or type the code got wrong) are never turned into one.
The text helpers decide what free text the databases can store (UTF-8 only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.exc import DataError, IntegrityError, ProgrammingError


class LedgerError(RuntimeError):
    """A ledger problem the user can act on (bad URL, unknown run, duplicate lab result)."""


# Database errors that mean ARL's own code is wrong; every other one is about the database itself.
_BUG_ERRORS = (IntegrityError, DataError, ProgrammingError)
_DAMAGED = " (if the file is damaged, `arl db check` reports what it can read; restore a backup or use a new ledger)"
_READ_ONLY = " (the ledger's file or its folder is read-only: make them writable, or copy the ledger to a writable place)"


def _hint(exc: BaseException) -> str:
    """What to do about a database error: a read-only file is not a damaged one."""
    text = _plain(exc).lower()
    return _READ_ONLY if "readonly" in text or "read-only" in text else _DAMAGED


def _raised_in(exc: BaseException, path_end: tuple[str, ...]) -> bool:
    """Whether the innermost frame of ``exc``'s traceback is in a file whose path ends with ``path_end``."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and Path(tb.tb_frame.f_code.co_filename).parts[-len(path_end):] == path_end


def _plain(exc: BaseException) -> str:
    """A database error as one line of its driver's words (no SQL, no links)."""
    orig = getattr(exc, "orig", None) or exc
    return " ".join(str(orig).split())[:300] or type(orig).__name__


def _short_repr(value: Any) -> str:
    """``repr(value)`` cut to one short line (a huge int's repr may even refuse: Python's 4,300-digit limit)."""
    try:
        text = repr(value)
    except ValueError:
        return f"a {type(value).__name__} too long to print"
    return text if len(text) <= 80 else text[:77] + "..."


def _is_utf8(text: str) -> bool:
    """Whether ``text`` can be stored as it is: no lone surrogates (which UTF-8 cannot encode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _storable_text(text: str) -> str:
    """Free text (lab notes, verdict feedback) as the ledger stores it: lone surrogates become ``\\udcff`` escapes.

    Python strings may hold lone surrogates (e.g. bytes decoded with
    ``surrogateescape``); the databases take UTF-8 only. Text without them is
    stored unchanged; text with them reads back with each one written out as a
    backslash escape, so nothing is dropped silently.
    """
    return text if _is_utf8(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")
