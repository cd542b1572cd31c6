"""The ledger's schema: Alembic migrations up and down, safe to run from several processes at once.

On PostgreSQL a transaction-scoped advisory lock serializes migrators; on
SQLite the ``BEGIN IMMEDIATE`` write transaction does. A database that has
tables but no ``alembic_version`` belongs to someone else: ours is never
created among them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DatabaseError, OperationalError, SQLAlchemyError

from storage.ledger._engine import _Database, _foreign_database_error
from storage.ledger._errors import _BUG_ERRORS, LedgerError, _hint, _plain, _raised_in, _short_repr

_MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
_MIGRATION_LOCK_ID = 740_221_773  # PostgreSQL advisory lock key for migrations


# Alembic is imported only when migrations run.
def _alembic_config(connection: Connection | None = None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def _head() -> str:
    """The newest revision this ARL knows."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert head is not None
    return head


class _Migrations(_Database):
    def current_revision(self) -> str | None:
        """The ledger's schema revision, or None before the first migration."""
        with self._engine.connect() as conn:
            try:
                return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            except SQLAlchemyError:
                return None

    def _stored_revision(self) -> str | None:
        """``current_revision``, or None where the ledger cannot be read."""
        try:
            return self.current_revision()
        except SQLAlchemyError:
            return None

    def upgrade(self, revision: str = "head") -> None:
        """Apply Alembic migrations up to ``revision`` (safe to call from several processes)."""
        if revision == "head" and self.current_revision() == _head():
            return
        self._migrate("upgrade", revision)

    def downgrade(self, revision: str) -> None:
        """Revert migrations down to ``revision`` (e.g. ``"-1"`` or ``"base"``)."""
        self._migrate("downgrade", revision)

    def _refuse_foreign_database(self) -> None:
        """A database with tables but no migration record is someone else's: never create ours among them."""
        from sqlalchemy import inspect

        try:
            if self.current_revision() is not None:
                return
            tables = sorted(inspect(self._engine).get_table_names())
            # An alembic_version table is a migration record, even an empty one (a ledger downgraded to base).
            # Another process may also have committed its first migration between the two reads (PostgreSQL's
            # DDL is transactional: the tables and the record appear together), so read the record again.
            foreign = "alembic_version" not in tables and bool(tables) and self.current_revision() is None
        except (DatabaseError, UnicodeDecodeError) as exc:
            raise LedgerError(f"cannot read the ledger at {self.safe_url}: {_plain(exc)}{_hint(exc)}") from None
        if foreign:
            raise _foreign_database_error(self.safe_url, tables)

    def _migrate(self, direction: str, revision: str) -> None:
        from alembic import command
        from alembic.util import CommandError

        # alembic asserts (rather than raising its CommandError) on some malformed targets, e.g. "".
        if not isinstance(revision, str) or not revision.strip() or len(revision) > 100 or not revision.isprintable():
            raise LedgerError(
                f"cannot {direction} the ledger to {_short_repr(revision)}: give a revision such as head, base, -1 or +1, "
                f"or a revision id up to {_head()}"
            )
        try:
            with self._engine.connect().execution_options(arl_write=True) as conn:
                with conn.begin():
                    if self._dialect == "postgresql":
                        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_ID})
                    getattr(command, direction)(_alembic_config(conn), revision)
        except AssertionError as exc:  # alembic's revision parser asserts on targets it cannot resolve ("@", "base@")
            if not _raised_in(exc, ("alembic", "script", "revision.py")):
                raise
            raise LedgerError(
                f"cannot {direction} the ledger at {self.safe_url} to {_short_repr(revision)}: not a revision alembic can "
                f"resolve; give head, base, -1, +1 or a revision id up to {_head()}"
            ) from None
        except CommandError as exc:  # an unknown revision, or a ledger made by a newer ARL
            newer = re.search(r"Can't locate revision identified by '([^']+)'", str(exc))
            if newer and newer.group(1) == self._stored_revision():  # the ledger's own revision, not the one asked for
                raise LedgerError(
                    f"the ledger at {self.safe_url} was written by a newer ARL (its revision {newer.group(1)!r}; this "
                    f"ARL knows revisions up to {_head()}): upgrade ARL to read it (pip install -U arl)"
                ) from None
            raise LedgerError(
                f"cannot {direction} the ledger at {self.safe_url} to {_short_repr(revision)}: {' '.join(str(exc).split())[:300]} "
                f"(this ARL knows revisions up to {_head()}; see `arl db upgrade --help`)"
            ) from None
        except (OperationalError, UnicodeDecodeError) as exc:
            raise LedgerError(f"cannot {direction} the ledger at {self.safe_url}: {_plain(exc)}{_hint(exc)}") from None
        except DatabaseError as exc:
            if isinstance(exc, _BUG_ERRORS):
                raise
            raise LedgerError(f"cannot {direction} the ledger at {self.safe_url}: {_plain(exc)}{_hint(exc)}") from None
