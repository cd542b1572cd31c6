"""Opening a ledger: the database URL, the engine, SQLite's settings, and one transaction per unit of work.

SQLite (the embedded default) runs in WAL mode with a busy timeout, and
write transactions start with ``BEGIN IMMEDIATE`` so that concurrent writers
queue for the lock instead of failing with "database is locked" when a read
transaction tries to upgrade. PostgreSQL works through the same URL variable.

An existing SQLite file that is not an ARL ledger is refused before the
engine first connects: connecting switches a file to WAL mode, and a file
that is not ours must not be changed at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Self

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from storage.ledger._errors import _BUG_ERRORS, _DAMAGED, LedgerError, _hint, _plain

DATABASE_URL_ENV = "ARL_DATABASE_URL"
_CHUNK = 2000  # keys per IN (...) query; well under SQLite's 32,766 variable limit


# The settings (which read the environment) and the SQL dialects are imported where they are used.
def default_database_url() -> str:
    """``ARL_DATABASE_URL`` if set, else an SQLite file under ``ARL_HOME`` (``~/.arl/``)."""
    from storage.settings import SettingsError, settings

    try:
        return settings().ledger_url
    except SettingsError as exc:
        raise LedgerError(str(exc)) from None


def _utc(dt: datetime | None) -> datetime | None:
    """A timestamp as read back from the database, made timezone-aware (SQLite stores naive UTC)."""
    if dt is None:
        return None
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    """``items`` in slices small enough for one ``IN (...)`` list."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


def check_database_url(url: str) -> None:
    """Raise LedgerError (one line) for a URL a ledger cannot open, without connecting or creating anything.

    What a dry run checks: the URL's form, the backend (sqlite or postgresql), the driver installed, an SQLite
    path that is a folder or someone else's database. A server that is down is found only by connecting.
    """
    parsed = _parse(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            _check_sqlite_path(Path(database).expanduser(), url, create=False)
        return
    _make_engine(url).dispose()  # no connection: an engine connects on first use


def _shown(url: str) -> str:
    """``url`` for a message: its password hidden where it parses (one that does not parse is shown as given)."""
    try:
        return str(make_url(url).render_as_string(hide_password=True))
    except (ArgumentError, ValueError):
        return re.sub(r":[^:@/]*@", ":***@", url)  # user:password@host in a URL that does not parse


def _parse(url: str) -> Any:
    try:
        return make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number ("mysql://:")
        raise LedgerError(
            f"bad database URL {_shown(url)!r}: use e.g. 'sqlite:////path/to/ledger.db' or "
            "'postgresql+psycopg://user@host:5432/dbname' (set it with ARL_DATABASE_URL)"
        ) from None


def _make_engine(url: str) -> Engine:
    parsed = _parse(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql" and parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            _check_sqlite_path(Path(database).expanduser(), url)
        try:
            engine = create_engine(parsed, connect_args={"timeout": 60, "isolation_level": None})
        except (NoSuchModuleError, ArgumentError) as exc:
            raise LedgerError(f"bad database URL {_shown(url)!r}: {exc}") from None
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        return engine
    if backend != "postgresql":
        hint = " (write postgresql://, the name SQLAlchemy knows)" if backend == "postgres" else ""
        raise LedgerError(f"unsupported database {backend!r} in {_shown(url)!r}: ARL supports sqlite and postgresql{hint}")
    try:
        return create_engine(parsed, pool_pre_ping=True)
    except (NoSuchModuleError, ArgumentError, ImportError) as exc:
        driver = parsed.get_driver_name()
        if driver != "psycopg":  # the postgres extra installs psycopg (3), which only postgresql+psycopg:// names
            fix = f"write postgresql+psycopg://, the driver the postgres extra installs, instead of {driver}"
        else:
            fix = "install the postgres extra: pip install 'arl[postgres]'"
        raise LedgerError(f"cannot use {_shown(url)!r}: {exc} ({fix})") from None


def sqlite_file(url: str) -> Path | None:
    """The file of an SQLite ledger URL; None for another database, a URL that does not parse (opening it says why)
    or a URI filename (``file:...``). An SQLite URL without a file is a LedgerError: the ledger would live in memory."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return None
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file::memory:"):
        raise LedgerError(
            f"{url} names no database file: SQLite would keep the ledger in memory, lost at exit and unseen by other "
            "processes and threads; give sqlite:///PATH"
        )
    return None if database.startswith("file:") else Path(database).expanduser()


def _check_sqlite_path(path: Path, url: str, create: bool = True) -> None:
    """The ledger file must be a regular file, or a name in a folder we can create (one line otherwise).

    ``create``: make the folder (a ledger is about to open); without it nothing is changed (a dry run's check).
    """
    hint = "; point ARL_DATABASE_URL (or --url) at an ARL ledger file, or ARL_HOME at a folder"
    try:
        if path.exists() and not path.is_file():
            kind = "a folder" if path.is_dir() else "not a regular file"
            raise LedgerError(f"the ledger path {str(path)!r} of {_shown(url)!r} is {kind}{hint}")
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LedgerError(f"cannot create the ledger's folder {str(path.parent)!r}: {exc.strerror or exc}{hint}") from None
    foreign = _foreign_sqlite_tables(path)
    if foreign:
        raise _foreign_database_error(make_url(url).render_as_string(hide_password=True), foreign)


def _foreign_sqlite_tables(path: Path) -> list[str]:
    """Tables of an existing SQLite file that has no migration record (someone else's database), read-only.

    Checked before the engine connects, because connecting switches the file
    to WAL mode: a file that is not ours must not be changed at all.
    """
    import sqlite3
    from urllib.parse import quote

    if not path.is_file() or path.stat().st_size == 0:
        return []
    try:
        conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=60)
        try:
            names = [str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        finally:
            conn.close()
    except (sqlite3.Error, UnicodeDecodeError, OSError):
        return []  # not readable as SQLite: opening the engine reports it in its own words
    tables = sorted(n for n in names if not n.startswith("sqlite_"))
    return [] if "alembic_version" in tables else tables


def _foreign_database_error(url: str, tables: list[str]) -> LedgerError:
    shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
    return LedgerError(
        f"{url} is not an ARL ledger: it holds other tables ({shown}) and no alembic_version; "
        "point the URL at an ARL ledger or at a new file"
    )


def _sqlite_on_connect(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=60000")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _sqlite_on_begin(conn: Connection) -> None:
    # The driver runs in autocommit mode (isolation_level=None); we open the
    # transaction ourselves so writers can take the lock up front.
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("arl_write") else "BEGIN")


class _Database:
    """The connection half of :class:`~storage.ledger.Ledger`: engine, sessions, and database errors as one line."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_database_url()
        self._engine = _make_engine(self.url)
        self._dialect = self._engine.dialect.name
        self._reader = sessionmaker(self._engine, expire_on_commit=False)
        self._writer = sessionmaker(self._engine.execution_options(arl_write=True), expire_on_commit=False)
        try:
            with self._engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
        except OperationalError as exc:
            raise LedgerError(f"cannot connect to the ledger at {self.safe_url}: {exc.orig}") from None
        except DatabaseError as exc:  # SQLite: "file is not a database", "database disk image is malformed"
            raise LedgerError(
                f"cannot open the ledger at {self.safe_url}: {_plain(exc)} (point the URL at an ARL ledger, "
                "or at a path where a new one can be created; a damaged ledger needs a backup)"
            ) from None
        except UnicodeDecodeError as exc:  # SQLite's schema text is not UTF-8: a damaged file
            raise LedgerError(
                f"cannot open the ledger at {self.safe_url}: the file is damaged (its schema is not UTF-8 text: "
                f"{exc.reason}); restore a backup or use a new ledger"
            ) from None

    @property
    def safe_url(self) -> str:
        """The ledger's URL with any password hidden, for messages and listings."""
        return make_url(self.url).render_as_string(hide_password=True)

    def close(self) -> None:
        """Release the database connections (the ledger cannot be used afterwards)."""
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[Session]:
        """One write transaction (on SQLite it takes the write lock up front: ``BEGIN IMMEDIATE``)."""
        with self._database_errors(), self._writer.begin() as session:
            yield session

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with self._database_errors(), self._reader() as session:
            yield session

    @contextmanager
    def _database_errors(self) -> Iterator[None]:
        """A ledger the database cannot read or write (damaged file, disk full, no such table) is a LedgerError.

        Errors that mean a bug in ARL (a constraint or type the code got wrong)
        pass through unchanged.
        """
        try:
            yield
        except UnicodeDecodeError as exc:  # SQLite text that is not UTF-8: a damaged page
            raise LedgerError(f"cannot read the ledger at {self.safe_url}: text that is not UTF-8 ({exc.reason}){_DAMAGED}") from None
        except DatabaseError as exc:
            if isinstance(exc, _BUG_ERRORS):
                raise
            raise LedgerError(f"the ledger at {self.safe_url} failed: {_plain(exc)}{_hint(exc)}") from None

    def _insert(self, table: Any) -> Any:
        """An ``INSERT`` that supports ``ON CONFLICT`` on this database."""
        if self._dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(table)

    def _upsert(self, table: Any, rows: Sequence[dict[str, Any]], key: list[str], updated: Sequence[str]) -> None:
        """Insert ``rows`` in one transaction; a row whose ``key`` columns are stored already gets its ``updated`` columns."""
        if not rows:
            return
        with self._write() as s:
            stmt = self._insert(table)
            stmt = stmt.on_conflict_do_update(index_elements=key, set_={c: getattr(stmt.excluded, c) for c in updated})
            for chunk in _chunks(rows):
                s.execute(stmt, list(chunk))

    @property
    def _mark(self) -> str:
        """The DB-API parameter marker of the raw fast paths."""
        return "?" if self._dialect == "sqlite" else "%s"
