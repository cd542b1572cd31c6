"""Domain records and the SQL ledger.

``storage.records`` is light (pydantic only) and imported by every package;
``storage.ledger`` (SQLAlchemy, Alembic) is loaded on first use of ``Ledger``.
"""

from typing import Any

from storage import records as _records
from storage.records import *  # noqa: F403 - the package exports every record; records.__all__ lists them

__all__ = [*_records.__all__, "Ledger", "LedgerError"]


def __getattr__(name: str) -> Any:
    if name in ("Ledger", "LedgerError"):
        from storage import ledger

        return getattr(ledger, name)
    raise AttributeError(f"module 'storage' has no attribute {name!r}")
