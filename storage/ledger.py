"""The ledger: every run, trajectory, verdict, reward, spend and checkpoint, in SQL.

It is also the verdict cache: a verdict is unique on (candidate key,
verifier, version, params hash), so nothing is verified twice at the same
tier and version. Public methods take and return ``storage.records``
objects; each call is one transaction.

SQLite (the embedded default) runs in WAL mode with a busy timeout, and
write transactions start with ``BEGIN IMMEDIATE`` so that concurrent writers
queue for the lock instead of failing with "database is locked" when a read
transaction tries to upgrade. PostgreSQL works through the same URL variable.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, create_engine, event, func, select, text, update
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DatabaseError,
    DataError,
    IntegrityError,
    NoSuchModuleError,
    OperationalError,
    ProgrammingError,
    SQLAlchemyError,
)
from sqlalchemy.orm import Session, sessionmaker

from storage.models import (
    CheckpointRow,
    LabRequestRow,
    PromptRow,
    RewardEstimateRow,
    RunRow,
    SpendRow,
    TrainingStepRow,
    TrajectoryRow,
    VerdictRow,
    VerifierTierRow,
)
from storage.records import (
    CheckpointRecord,
    LabRequest,
    Prompt,
    RewardEstimate,
    RunRecord,
    RunStatus,
    SpendRecord,
    Status,
    Tier,
    TierDisagreement,
    TrainingStepRecord,
    Trajectory,
    Turn,
    Verdict,
    VerifierSpec,
    tier_rank,
    utcnow,
)

__all__ = ["DATABASE_URL_ENV", "Ledger", "LedgerError", "default_database_url"]

DATABASE_URL_ENV = "ARL_DATABASE_URL"
_CHUNK = 2000  # keys per IN (...) query; well under SQLite's 32,766 variable limit
_LOOKUP_CHUNK = 10_000  # the cache lookup is hot: fewer, larger statements (still under both limits)
_MIGRATION_LOCK_ID = 740_221_773  # PostgreSQL advisory lock key for migrations
_RUN_ID_MAX = 64  # the length of the runs.id column
_SQL_MAX_INT = 2**63 - 1  # larger Python ints cannot be sent as SQL integers (OverflowError)


class LedgerError(RuntimeError):
    """A ledger problem the user can act on (bad URL, unknown run, duplicate lab result)."""


# Database errors that mean ARL's own code is wrong; every other one is about the database itself.
_BUG_ERRORS = (IntegrityError, DataError, ProgrammingError)
_DAMAGED = " (if the file is damaged, `arl db check` reports what it can read; restore a backup or use a new ledger)"


def default_database_url() -> str:
    """``ARL_DATABASE_URL`` if set, else an SQLite file under ``~/.arl/``."""
    url = os.environ.get(DATABASE_URL_ENV)
    if url:
        return url
    home = Path(os.environ.get("ARL_HOME", Path.home() / ".arl"))
    return f"sqlite:///{home / 'ledger.db'}"


def _utc(dt: datetime | None) -> datetime | None:
    if dt is None:
        return None
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _make_engine(url: str) -> Engine:
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number ("mysql://:")
        raise LedgerError(
            f"bad database URL {url!r}: use e.g. 'sqlite:////path/to/ledger.db' or "
            "'postgresql+psycopg://user@host:5432/dbname' (set it with ARL_DATABASE_URL)"
        ) from None
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
            raise LedgerError(f"bad database URL {url!r}: {exc}") from None
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        return engine
    if backend != "postgresql":
        raise LedgerError(f"unsupported database {backend!r} in {url!r}: ARL supports sqlite and postgresql")
    try:
        return create_engine(parsed, pool_pre_ping=True)
    except (NoSuchModuleError, ArgumentError, ImportError) as exc:
        raise LedgerError(f"cannot use {url!r}: {exc} (install the postgres extra: pip install 'arl[postgres]')") from None


def _check_sqlite_path(path: Path, url: str) -> None:
    """The ledger file must be a regular file, or a name in a folder we can create (one line otherwise)."""
    hint = "; point ARL_DATABASE_URL (or --url) at an ARL ledger file, or ARL_HOME at a folder"
    try:
        if path.exists() and not path.is_file():
            kind = "a folder" if path.is_dir() else "not a regular file"
            raise LedgerError(f"the ledger path {str(path)!r} of {url!r} is {kind}{hint}")
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


class Ledger:
    """SQL store of everything a training run produces; domain objects in and out."""

    def __init__(self, url: str | None = None, *, migrate: bool = True) -> None:
        self.url = url or default_database_url()
        self._engine = _make_engine(self.url)
        self.dialect = self._engine.dialect.name
        self._reader = sessionmaker(self._engine, expire_on_commit=False)
        self._writer = sessionmaker(self._engine.execution_options(arl_write=True), expire_on_commit=False)
        self._lock = threading.Lock()
        try:
            with self._engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
        except OperationalError as exc:
            raise LedgerError(f"cannot connect to the ledger at {self._safe_url}: {exc.orig}") from None
        except DatabaseError as exc:  # SQLite: "file is not a database", "database disk image is malformed"
            raise LedgerError(
                f"cannot open the ledger at {self._safe_url}: {_plain(exc)} (point the URL at an ARL ledger, "
                "or at a path where a new one can be created; a damaged ledger needs a backup)"
            ) from None
        except UnicodeDecodeError as exc:  # SQLite's schema text is not UTF-8: a damaged file
            raise LedgerError(
                f"cannot open the ledger at {self._safe_url}: the file is damaged (its schema is not UTF-8 text: "
                f"{exc.reason}); restore a backup or use a new ledger"
            ) from None
        if migrate:
            self._refuse_foreign_database()
            self.upgrade()

    @property
    def _safe_url(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ migrations
    def _alembic_config(self, connection: Connection) -> Any:
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
        cfg.attributes["connection"] = connection
        return cfg

    def _head(self) -> str:
        from alembic.script import ScriptDirectory

        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
        head = ScriptDirectory.from_config(cfg).get_current_head()
        assert head is not None
        return head

    def current_revision(self) -> str | None:
        with self._engine.connect() as conn:
            try:
                return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            except SQLAlchemyError:
                return None

    def _refuse_foreign_database(self) -> None:
        """A database with tables but no migration record is someone else's: never create ours among them."""
        from sqlalchemy import inspect

        try:
            if self.current_revision() is not None:
                return
            tables = sorted(inspect(self._engine).get_table_names())
        except (DatabaseError, UnicodeDecodeError) as exc:
            raise LedgerError(f"cannot read the ledger at {self._safe_url}: {_plain(exc)}{_DAMAGED}") from None
        if tables:
            raise _foreign_database_error(self._safe_url, tables)

    def upgrade(self, revision: str = "head") -> None:
        """Apply Alembic migrations up to ``revision`` (safe to call from several processes)."""
        if revision == "head" and self.current_revision() == self._head():
            return
        self._migrate("upgrade", revision)

    def downgrade(self, revision: str) -> None:
        """Revert migrations down to ``revision`` (e.g. ``"-1"`` or ``"base"``)."""
        self._migrate("downgrade", revision)

    def _migrate(self, direction: str, revision: str) -> None:
        from alembic import command
        from alembic.util import CommandError

        # alembic asserts (rather than raising its CommandError) on some malformed targets, e.g. "".
        if not isinstance(revision, str) or not revision.strip() or len(revision) > 100 or not revision.isprintable():
            raise LedgerError(
                f"cannot {direction} the ledger to {_short_repr(revision)}: give a revision such as head, base, -1 or +1, "
                f"or a revision id up to {self._head()}"
            )
        try:
            with self._engine.connect().execution_options(arl_write=True) as conn:
                with conn.begin():
                    if self.dialect == "postgresql":
                        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_ID})
                    getattr(command, direction)(self._alembic_config(conn), revision)
        except AssertionError as exc:  # alembic's revision parser asserts on targets it cannot resolve ("@", "base@")
            if not _raised_in(exc, ("alembic", "script", "revision.py")):
                raise
            raise LedgerError(
                f"cannot {direction} the ledger at {self._safe_url} to {_short_repr(revision)}: not a revision alembic can "
                f"resolve; give head, base, -1, +1 or a revision id up to {self._head()}"
            ) from None
        except CommandError as exc:  # an unknown revision, or a ledger made by a newer ARL
            raise LedgerError(
                f"cannot {direction} the ledger at {self._safe_url} to {_short_repr(revision)}: {' '.join(str(exc).split())[:300]} "
                f"(this ARL knows revisions up to {self._head()}; see `arl db upgrade --help`)"
            ) from None
        except (OperationalError, UnicodeDecodeError) as exc:
            raise LedgerError(f"cannot {direction} the ledger at {self._safe_url}: {_plain(exc)}{_DAMAGED}") from None
        except DatabaseError as exc:
            if isinstance(exc, _BUG_ERRORS):
                raise
            raise LedgerError(f"cannot {direction} the ledger at {self._safe_url}: {_plain(exc)}{_DAMAGED}") from None

    # ------------------------------------------------------------------ sessions
    @contextmanager
    def _write(self) -> Iterator[Session]:
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
            raise LedgerError(f"cannot read the ledger at {self._safe_url}: text that is not UTF-8 ({exc.reason}){_DAMAGED}") from None
        except DatabaseError as exc:
            if isinstance(exc, _BUG_ERRORS):
                raise
            raise LedgerError(f"the ledger at {self._safe_url} failed: {_plain(exc)}{_DAMAGED}") from None

    def _insert(self, table: Any) -> Any:
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(table)

    # ------------------------------------------------------------------ runs
    def create_run(self, name: str, config: dict[str, Any] | None = None, run_id: str | None = None) -> RunRecord:
        record = RunRecord(name=name, config=config or {}, **({"id": run_id} if run_id else {}))
        with self._write() as s:
            s.add(RunRow(**record.model_dump()))
        return record

    def get_run(self, run_id: str) -> RunRecord:
        """The run whose id is ``run_id`` or starts with it (a unique prefix, as users copy short ids)."""
        unknown = LedgerError(f"no run with id {_short_repr(run_id)} (see `arl runs list`)")
        # No stored id is longer than the column, or holds a lone surrogate (e.g. from a non-UTF-8 argv).
        if not isinstance(run_id, str) or not run_id or len(run_id) > _RUN_ID_MAX or not _is_utf8(run_id):
            raise unknown
        with self._read() as s:
            row = s.get(RunRow, run_id)
            if row is None:
                # A prefix compared as a substring, not with LIKE: '%' and '_' are literal, and the
                # pattern-length limit of LIKE does not apply.
                prefix = func.substr(RunRow.id, 1, len(run_id)) == run_id
                rows = s.scalars(select(RunRow).where(prefix).limit(2)).all()
                if len(rows) != 1:
                    raise unknown
                row = rows[0]
            return _run(row)

    def list_runs(self, limit: int | None = None) -> list[RunRecord]:
        """Runs, newest first; ``limit`` None or 0 means all (a limit beyond any ledger's size is the same)."""
        if limit is not None and limit < 0:
            raise LedgerError(f"a run list limit must be 0 (all) or more, got {limit}")
        with self._read() as s:
            q = select(RunRow).order_by(RunRow.created_at.desc(), RunRow.id)
            if limit and limit < _SQL_MAX_INT:
                q = q.limit(limit)
            return [_run(r) for r in s.scalars(q)]

    def set_run_status(self, run_id: str, status: RunStatus | str, steps_done: int | None = None) -> RunRecord:
        with self._write() as s:
            row = s.get(RunRow, run_id)
            if row is None:
                raise LedgerError(f"no run with id {run_id!r}")
            row.status = RunStatus(status).value
            if steps_done is not None:
                row.steps_done = steps_done
            row.updated_at = utcnow()
            return _run(row)

    # ------------------------------------------------------------------ prompts & trajectories
    def add_prompts(self, prompts: Iterable[Prompt]) -> None:
        rows = [
            {"id": p.id, "suite": p.suite, "text": p.text, "goal": p.goal, "meta": p.metadata} for p in prompts
        ]
        if not rows:
            return
        with self._write() as s:
            for chunk in _chunks(rows):
                s.execute(self._insert(PromptRow).on_conflict_do_nothing(index_elements=["id"]), list(chunk))

    def get_prompts(self, ids: Iterable[str]) -> dict[str, Prompt]:
        ids = list(dict.fromkeys(ids))
        out: dict[str, Prompt] = {}
        with self._read() as s:
            for chunk in _chunks(ids):
                for r in s.scalars(select(PromptRow).where(PromptRow.id.in_(chunk))):
                    out[r.id] = Prompt(id=r.id, suite=r.suite, text=r.text, goal=r.goal, metadata=r.meta)
        return out

    def add_trajectories(self, trajectories: Iterable[Trajectory]) -> None:
        rows = [_trajectory_row(t) for t in trajectories]
        if not rows:
            return
        with self._write() as s:
            for chunk in _chunks(rows):
                s.execute(self._insert(TrajectoryRow).on_conflict_do_nothing(index_elements=["id"]), list(chunk))

    def step_trajectories(self, run_id: str, step: int) -> list[tuple[Trajectory, RewardEstimate | None]]:
        """Trajectories of one step, in insertion order, with their reward estimates."""
        with self._read() as s:
            q = (
                select(TrajectoryRow, RewardEstimateRow)
                .outerjoin(RewardEstimateRow, RewardEstimateRow.trajectory_id == TrajectoryRow.id)
                .where(TrajectoryRow.run_id == run_id, TrajectoryRow.step == step)
                .order_by(TrajectoryRow.created_at, TrajectoryRow.id)
            )
            return [(_trajectory(t), _reward(r) if r else None) for t, r in s.execute(q)]

    def groups(self, run_id: str, step: int) -> dict[str, list[tuple[Trajectory, RewardEstimate | None]]]:
        """Trajectories of one step grouped by group id (the G samples of one prompt), for GRPO."""
        groups: dict[str, list[tuple[Trajectory, RewardEstimate | None]]] = defaultdict(list)
        for traj, est in self.step_trajectories(run_id, step):
            groups[traj.group_id].append((traj, est))
        return dict(groups)

    def failed_trajectories(
        self, run_id: str, step: int | None = None, threshold: float = 0.5
    ) -> list[tuple[Trajectory, RewardEstimate | None, list[Verdict]]]:
        """Trajectories whose reward missed ``threshold``, with their verdicts (feedback for hindsight)."""
        with self._read() as s:
            q = (
                select(TrajectoryRow, RewardEstimateRow)
                .outerjoin(RewardEstimateRow, RewardEstimateRow.trajectory_id == TrajectoryRow.id)
                .where(TrajectoryRow.run_id == run_id)
            )
            if step is not None:
                q = q.where(TrajectoryRow.step == step)
            rows = [(t, r) for t, r in s.execute(q) if r is None or r.mean < threshold]
        verdicts = self.verdicts_for([t.candidate_key for t, _ in rows])
        by_key: dict[str, list[Verdict]] = defaultdict(list)
        for v in verdicts:
            by_key[v.candidate_key].append(v)
        return [(_trajectory(t), _reward(r) if r else None, by_key.get(t.candidate_key, [])) for t, r in rows]

    def steps_with_trajectories(self, run_id: str) -> list[int]:
        with self._read() as s:
            return list(
                s.scalars(select(TrajectoryRow.step).where(TrajectoryRow.run_id == run_id).distinct().order_by(TrajectoryRow.step))
            )

    def delete_step_trajectories(self, run_id: str, step: int) -> int:
        """Drop the trajectories (and their reward estimates) of an unfinished step, before redoing it.

        The step's spend stays: the verdicts it paid for are in the cache, so the
        redone step gets them for free and the run's spend counts each call once.
        """
        with self._write() as s:
            ids = list(s.scalars(select(TrajectoryRow.id).where(TrajectoryRow.run_id == run_id, TrajectoryRow.step == step)))
            for chunk in _chunks(ids):
                s.execute(RewardEstimateRow.__table__.delete().where(RewardEstimateRow.trajectory_id.in_(chunk)))
                s.execute(TrajectoryRow.__table__.delete().where(TrajectoryRow.id.in_(chunk)))
            # Spend is kept: what an interrupted attempt paid for was paid (its verdicts are cached).
            return len(ids)

    # ------------------------------------------------------------------ verdicts (the cache)
    def lookup_verdicts(
        self, keys: Iterable[str], verifier: str, version: str, params_hash: str
    ) -> dict[str, Verdict]:
        """Cached verdicts of one verifier identity for many candidate keys (one query per 2,000 keys)."""
        keys = list(dict.fromkeys(keys))
        out: dict[str, Verdict] = {}
        mark = "?" if self.dialect == "sqlite" else "%s"
        with self._engine.connect() as conn:
            for chunk in _chunks(keys, _LOOKUP_CHUNK):
                # Raw DB-API path: SQLAlchemy's per-row type processing dominated
                # the 10k-key lookup; we decode JSON and timestamps ourselves.
                sql = (
                    f"SELECT {_VERDICT_COLUMNS} FROM verdicts WHERE verifier = {mark} AND version = {mark} "
                    f"AND params_hash = {mark} AND candidate_key IN ({', '.join([mark] * len(chunk))})"
                )
                for row in conn.exec_driver_sql(sql, (verifier, version, params_hash, *chunk)).fetchall():
                    out[row[1]] = _verdict_from_tuple(row)
        return out

    def verdicts_for(self, keys: Iterable[str], verifiers: Iterable[str] | None = None) -> list[Verdict]:
        """Every stored verdict about these candidate keys (optionally only from some verifiers)."""
        keys = list(dict.fromkeys(keys))
        names = list(verifiers) if verifiers is not None else None
        table = VerdictRow.__table__
        out: list[Verdict] = []
        with self._engine.connect() as conn:
            for chunk in _chunks(keys):
                q = select(table).where(table.c.candidate_key.in_(chunk))
                if names is not None:
                    q = q.where(table.c.verifier.in_(names))
                out.extend(_verdict_from_mapping(r) for r in conn.execute(q.order_by(table.c.id)).mappings())
        return out

    def put_verdicts(
        self, verdicts: Iterable[Verdict], *, return_stored: bool = True, spend: Iterable[SpendRecord] = ()
    ) -> list[Verdict]:
        """Store verdicts idempotently and return what the ledger holds for them (with row ids).

        The first verdict for a cache key wins, except that a ``pending``
        verdict is replaced in place when a final answer for it arrives.
        ``spend`` (what computing them cost) is written in the same
        transaction, so a crash can never leave paid verdicts unbilled.
        Lone surrogates in ``feedback`` are stored escaped (see
        :func:`_storable_text`); in a key or request id they are a
        :class:`LedgerError`.
        """
        verdicts = [_storable_verdict(v) for v in verdicts]
        spend_rows = [{**r.model_dump(mode="python"), "tier": r.tier.value, "created_at": utcnow()} for r in spend]
        if not verdicts:
            if spend_rows:
                with self._write() as s:
                    s.execute(SpendRow.__table__.insert(), spend_rows)
            return []
        table = VerdictRow.__table__
        final_keys = {v.cache_key for v in verdicts if v.status != Status.pending}
        with self._write() as s:
            # Raw executemany of INSERT ... ON CONFLICT DO NOTHING: the idempotent
            # upsert at DB-API speed (SQLAlchemy's bind processing cost 3x).
            mark = "?" if self.dialect == "sqlite" else "%s"
            sql = (
                f"INSERT INTO verdicts ({_INSERT_COLUMNS}) VALUES ({', '.join([mark] * len(_VERDICT_FIELDS))}) "
                "ON CONFLICT (candidate_key, verifier, version, params_hash) DO NOTHING"
            )
            cursor = s.connection().connection.driver_connection.cursor()
            tuples = [_verdict_tuple(v, self.dialect) for v in verdicts]
            cursor.executemany(sql, tuples)
            cursor.close()
            if final_keys:
                pending_ids = self._pending_ids(s, final_keys)
                if pending_ids:
                    by_key = {v.cache_key: v for v in verdicts if v.status != Status.pending}
                    for key, row_id in pending_ids.items():
                        data = _verdict_row(by_key[key])
                        data.pop("created_at")
                        s.execute(update(table).where(table.c.id == row_id).values(**data))
            if spend_rows:
                s.execute(SpendRow.__table__.insert(), spend_rows)
        if not return_stored:
            return []
        return self._stored(verdicts)

    def _pending_ids(self, s: Session, keys: set[tuple[str, str, str, str]]) -> dict[tuple[str, str, str, str], int]:
        table = VerdictRow.__table__
        names = list({k[1] for k in keys})
        any_pending = s.execute(
            select(table.c.id).where(table.c.verifier.in_(names), table.c.status == Status.pending.value).limit(1)
        ).first()
        if any_pending is None:  # the common case: no lab request of these verifiers is waiting
            return {}
        cand = list({k[0] for k in keys})
        out: dict[tuple[str, str, str, str], int] = {}
        for chunk in _chunks(cand):
            q = select(table.c.id, table.c.candidate_key, table.c.verifier, table.c.version, table.c.params_hash).where(
                table.c.status == Status.pending.value, table.c.candidate_key.in_(chunk)
            )
            for row in s.execute(q):
                key = (row.candidate_key, row.verifier, row.version, row.params_hash)
                if key in keys:
                    out[key] = row.id
        return out

    def _stored(self, verdicts: list[Verdict]) -> list[Verdict]:
        by_identity: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        for v in verdicts:
            by_identity[(v.verifier, v.version, v.params_hash)].append(v.candidate_key)
        found: dict[tuple[str, str, str, str], Verdict] = {}
        for (name, version, ph), keys in by_identity.items():
            for key, v in self.lookup_verdicts(keys, name, version, ph).items():
                found[(key, name, version, ph)] = v
        return [found[v.cache_key] for v in verdicts]

    def ok_values(self, verifier: str) -> dict[str, float]:
        """Every ``ok`` value of one verifier (any version): candidate key -> value, for surrogate history."""
        table = VerdictRow.__table__
        with self._engine.connect() as conn:
            q = select(table.c.candidate_key, table.c.value).where(
                table.c.verifier == verifier, table.c.status == Status.ok.value, table.c.value.is_not(None)
            )
            return {k: float(v) for k, v in conn.execute(q)}

    def measured_costs(self, verifier: str) -> list[tuple[str, float]]:
        """(candidate key, CPU-seconds) of every verdict one verifier computed, to refine its cost model."""
        table = VerdictRow.__table__
        with self._engine.connect() as conn:
            q = select(table.c.candidate_key, table.c.cost_s).where(
                table.c.verifier == verifier, table.c.status != Status.pending.value
            )
            return [(k, float(c)) for k, c in conn.execute(q)]

    def verdict_counts(self, keys: Iterable[str] | None = None) -> dict[str, int]:
        """Verdicts by status, over all verdicts or those about ``keys``."""
        table = VerdictRow.__table__
        counts: Counter[str] = Counter()
        with self._engine.connect() as conn:
            if keys is None:
                for status, n in conn.execute(select(table.c.status, func.count()).group_by(table.c.status)):
                    counts[status] += n
            else:
                for chunk in _chunks(list(dict.fromkeys(keys))):
                    q = select(table.c.status, func.count()).where(table.c.candidate_key.in_(chunk)).group_by(table.c.status)
                    for status, n in conn.execute(q):
                        counts[status] += n
        return dict(counts)

    # ------------------------------------------------------------------ rewards, spend, steps, checkpoints
    def add_reward_estimates(self, estimates: Iterable[RewardEstimate]) -> None:
        rows = [
            {
                "trajectory_id": e.trajectory_id,
                "run_id": e.run_id,
                "step": e.step,
                "mean": e.mean,
                "std": e.std,
                "fidelity": e.fidelity.value if e.fidelity else None,
                "verdict_ids": e.verdict_ids,
                "components": _components_column(e),
            }
            for e in estimates
        ]
        if not rows:
            return
        table = RewardEstimateRow.__table__
        with self._write() as s:
            stmt = self._insert(table)
            stmt = stmt.on_conflict_do_update(
                index_elements=["trajectory_id"],
                set_={c: getattr(stmt.excluded, c) for c in ("mean", "std", "fidelity", "verdict_ids", "components")},
            )
            for chunk in _chunks(rows):
                s.execute(stmt, list(chunk))

    def add_spend(self, records: Iterable[SpendRecord]) -> None:
        now = utcnow()
        rows = [{**r.model_dump(mode="python"), "tier": r.tier.value, "created_at": now} for r in records]
        if rows:
            with self._write() as s:
                s.execute(SpendRow.__table__.insert(), rows)

    def spend_by_tier(self, run_id: str) -> dict[str, float]:
        with self._read() as s:
            q = select(SpendRow.tier, func.sum(SpendRow.cost_s)).where(SpendRow.run_id == run_id).group_by(SpendRow.tier)
            return {tier: float(total or 0.0) for tier, total in s.execute(q)}

    def spend_by_step(self, run_id: str) -> dict[int, dict[str, float]]:
        out: dict[int, dict[str, float]] = defaultdict(dict)
        with self._read() as s:
            q = (
                select(SpendRow.step, SpendRow.tier, func.sum(SpendRow.cost_s))
                .where(SpendRow.run_id == run_id)
                .group_by(SpendRow.step, SpendRow.tier)
            )
            for step, tier, total in s.execute(q):
                out[step][tier] = float(total or 0.0)
        return dict(out)

    def step_metrics(self, run_id: str) -> list[dict[str, Any]]:
        """Per completed step: reward mean and max, validity, seconds, and spend and calls per tier."""
        spend: dict[int, dict[str, float]] = defaultdict(dict)
        calls: dict[int, dict[str, int]] = defaultdict(dict)
        with self._read() as s:
            q = (
                select(SpendRow.step, SpendRow.tier, func.sum(SpendRow.cost_s), func.sum(SpendRow.calls))
                .where(SpendRow.run_id == run_id)
                .group_by(SpendRow.step, SpendRow.tier)
            )
            for step, tier, cost, n in s.execute(q):
                spend[step][tier] = float(cost or 0.0)
                calls[step][tier] = int(n or 0)
        out = []
        for record in self.training_steps(run_id):
            m = record.metrics
            out.append({
                "step": record.step,
                "reward_mean": m.get("reward/mean"),
                "reward_max": m.get("reward/max"),
                "validity": m.get("reward/validity"),
                "seconds": m.get("step/seconds"),
                "spend_by_tier": spend.get(record.step, {}),
                "calls_by_tier": calls.get(record.step, {}),
            })
        return out

    def record_step(self, record: TrainingStepRecord, checkpoint: CheckpointRecord | None = None) -> None:
        """Store a completed training step and advance the run's ``steps_done`` in the same transaction.

        ``checkpoint`` is registered in that transaction too: a crash between
        two separate writes would leave a checkpoint of a step that is not
        done, which the redone step then overwrites on disk (its sha256 no
        longer matching) while resume would skip it as not the last step's.
        """
        with self._write() as s:
            if checkpoint is not None:
                s.add(CheckpointRow(**checkpoint.model_dump()))
            stmt = self._insert(TrainingStepRow.__table__)
            stmt = stmt.on_conflict_do_update(
                index_elements=["run_id", "step"], set_={"metrics": stmt.excluded.metrics}
            )
            s.execute(stmt, [record.model_dump(mode="python")])
            run = s.get(RunRow, record.run_id)
            if run is not None:
                run.steps_done = max(run.steps_done, record.step + 1)
                run.updated_at = utcnow()

    def training_steps(self, run_id: str) -> list[TrainingStepRecord]:
        with self._read() as s:
            q = select(TrainingStepRow).where(TrainingStepRow.run_id == run_id).order_by(TrainingStepRow.step)
            return [
                TrainingStepRecord(run_id=r.run_id, step=r.step, metrics=r.metrics, created_at=_utc(r.created_at))
                for r in s.scalars(q)
            ]

    def record_checkpoint(self, record: CheckpointRecord) -> None:
        with self._write() as s:
            s.add(CheckpointRow(**record.model_dump()))

    def checkpoints(self, run_id: str) -> list[CheckpointRecord]:
        with self._read() as s:
            q = select(CheckpointRow).where(CheckpointRow.run_id == run_id).order_by(CheckpointRow.step, CheckpointRow.id)
            return [
                CheckpointRecord(run_id=r.run_id, step=r.step, path=r.path, sha256=r.sha256, created_at=_utc(r.created_at))
                for r in s.scalars(q)
            ]

    def latest_checkpoint(self, run_id: str) -> CheckpointRecord | None:
        cps = self.checkpoints(run_id)
        return cps[-1] if cps else None

    # ------------------------------------------------------------------ verifier tiers
    def record_tiers(self, specs: Iterable[VerifierSpec]) -> None:
        now = utcnow()
        rows = [
            {
                "name": sp.name,
                "tier": sp.tier.value,
                "fidelity": sp.fidelity if sp.fidelity is not None else tier_rank(sp.tier),
                "version": sp.version,
                "params": sp.params,
                "expected_cost": sp.expected_cost,
                "description": sp.description,
                "origin": sp.origin,
                "updated_at": now,
            }
            for sp in specs
        ]
        if not rows:
            return
        table = VerifierTierRow.__table__
        with self._write() as s:
            stmt = self._insert(table)
            stmt = stmt.on_conflict_do_update(
                index_elements=["name"],
                set_={c: getattr(stmt.excluded, c) for c in ("tier", "fidelity", "version", "params", "expected_cost", "description", "origin", "updated_at")},
            )
            s.execute(stmt, rows)

    def tiers(self) -> list[VerifierSpec]:
        with self._read() as s:
            return [
                VerifierSpec(
                    name=r.name, tier=Tier(r.tier), fidelity=r.fidelity, version=r.version, params=r.params,
                    expected_cost=r.expected_cost, description=r.description, origin=r.origin,
                )
                for r in s.scalars(select(VerifierTierRow).order_by(VerifierTierRow.fidelity, VerifierTierRow.name))
            ]

    # ------------------------------------------------------------------ lab requests
    def create_lab_requests(self, requests: Iterable[LabRequest]) -> list[str]:
        """Store lab requests, one pending request per verdict identity; returns the id standing for each.

        A pending request for a (candidate key, verifier, version, params
        hash) that already has a pending request, in the ledger or earlier in
        ``requests``, is not stored: both would share the one pending verdict
        row, so answering the second would answer the first's verdict. Its
        place in the returned list holds the existing request's id. A request
        whose id is already stored is left as it is.
        """
        requests = list(requests)
        if not requests:
            return []
        table = LabRequestRow.__table__
        for r in requests:
            for field in ("id", "candidate_key", "verifier", "version", "params_hash"):
                text = getattr(r, field)
                if not _is_utf8(text):
                    raise LedgerError(f"lab request {field} {text!r} has a lone surrogate, which the ledger cannot store")
        with self._write() as s:
            pending: dict[tuple[str, str, str, str], str] = {}
            keys = list({r.candidate_key for r in requests if r.status == Status.pending})
            for chunk in _chunks(keys):
                q = select(table.c.id, table.c.candidate_key, table.c.verifier, table.c.version, table.c.params_hash)
                q = q.where(table.c.status == Status.pending.value, table.c.candidate_key.in_(chunk))
                q = q.order_by(table.c.created_at, table.c.id)
                for row in s.execute(q):
                    pending.setdefault((row.candidate_key, row.verifier, row.version, row.params_hash), row.id)
            ids, rows = [], []
            for r in requests:
                key = (r.candidate_key, r.verifier, r.version, r.params_hash)
                if r.status == Status.pending and pending.get(key, r.id) != r.id:
                    ids.append(pending[key])
                    continue
                if r.status == Status.pending:
                    pending[key] = r.id
                ids.append(r.id)
                row = {**r.model_dump(mode="python"), "status": r.status.value}
                rows.append({**row, "payload": _storable_text(r.payload), "notes": _storable_text(r.notes)})
            if rows:
                s.execute(self._insert(table).on_conflict_do_nothing(index_elements=["id"]), rows)
        return ids

    def lab_requests(self, status: Status | str | None = None, run_id: str | None = None) -> list[LabRequest]:
        with self._read() as s:
            q = select(LabRequestRow).order_by(LabRequestRow.created_at, LabRequestRow.id)
            if status is not None:
                q = q.where(LabRequestRow.status == Status(status).value)
            if run_id is not None:
                q = q.where(LabRequestRow.run_id == run_id)
            return [_lab(r) for r in s.scalars(q)]

    def submit_lab_result(self, request_id: str, value: float, notes: str = "") -> Verdict:
        """Record an external result: completes the request and turns its pending verdict into ``ok``.

        ``notes`` are stored as given, except that lone surrogates are escaped
        (see :func:`_storable_text`); the verdict's feedback quotes them.
        """
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise LedgerError(f"lab result value must be a number, got {_short_repr(value)}") from None
        except OverflowError:  # an int beyond the float range, e.g. 10**400
            raise LedgerError("lab result value must be a finite number, got an integer beyond the float range") from None
        if not math.isfinite(number):
            raise LedgerError(f"lab result value must be a finite number, got {_short_repr(value)}")
        value = number
        notes = _storable_text(notes)
        table = VerdictRow.__table__
        with self._write() as s:
            # An id with a lone surrogate cannot be in the ledger (nor be sent to the database).
            req = s.get(LabRequestRow, request_id) if _is_utf8(request_id) else None
            if req is None:
                raise LedgerError(f"no lab request with id {request_id!r} (see `arl lab list`)")
            if req.status != Status.pending.value:
                raise LedgerError(
                    f"lab request {request_id!r} already has a result ({req.value!r}); results are not overwritten"
                )
            now = utcnow()
            req.status = Status.ok.value
            req.value = value
            req.notes = notes
            req.completed_at = now
            key = (req.candidate_key, req.verifier, req.version, req.params_hash)
            row = s.execute(
                select(table).where(
                    table.c.candidate_key == key[0], table.c.verifier == key[1],
                    table.c.version == key[2], table.c.params_hash == key[3],
                )
            ).mappings().first()
            feedback = f"lab result: {notes}" if notes else "lab result"
            if row is None:
                s.execute(
                    table.insert(),
                    [{
                        "candidate_key": key[0], "verifier": key[1], "version": key[2], "params_hash": key[3],
                        "tier": Tier.lab.value, "status": Status.ok.value, "value": value, "values": {"value": value},
                        "score": None, "uncertainty": None, "feedback": feedback, "cost_s": 0.0, "wall_s": 0.0,
                        "request_id": request_id, "created_at": now,
                    }],
                )
            elif row["status"] == Status.pending.value:
                s.execute(
                    update(table).where(table.c.id == row["id"]).values(
                        status=Status.ok.value, value=value, values={"value": value}, feedback=feedback
                    )
                )
        return self.lookup_verdicts([key[0]], key[1], key[2], key[3])[key[0]]

    # ------------------------------------------------------------------ queries for the CLI and flows
    def run_summary(self, run_id: str) -> dict[str, Any]:
        run = self.get_run(run_id)
        with self._read() as s:
            n_traj = s.scalar(select(func.count()).select_from(TrajectoryRow).where(TrajectoryRow.run_id == run.id)) or 0
            best = s.scalar(select(func.max(RewardEstimateRow.mean)).where(RewardEstimateRow.run_id == run.id))
            mean = s.scalar(select(func.avg(RewardEstimateRow.mean)).where(RewardEstimateRow.run_id == run.id))
            keys = list(s.scalars(select(TrajectoryRow.candidate_key).where(TrajectoryRow.run_id == run.id).distinct()))
        return {
            "id": run.id,
            "name": run.name,
            "status": run.status.value,
            "steps_done": run.steps_done,
            "steps_total": run.config.get("steps"),
            "created_at": run.created_at.isoformat(),
            "updated_at": run.updated_at.isoformat(),
            "spend_by_tier": self.spend_by_tier(run.id),
            "best_reward": best,
            "mean_reward": mean,
            "trajectories": n_traj,
            "candidates": len(keys),
            "verdicts_by_status": self.verdict_counts(keys),
            "checkpoints": len(self.checkpoints(run.id)),
            "lab_pending": len(self.lab_requests(Status.pending, run_id=run.id)),
            "steps": self.step_metrics(run.id),
        }

    def top_candidates(self, run_id: str, n: int = 10) -> list[dict[str, Any]]:
        """Best candidates of a run by reward, with every verdict's value per verifier."""
        with self._read() as s:
            q = (
                select(TrajectoryRow.candidate_key, TrajectoryRow.final_answer, func.max(RewardEstimateRow.mean), func.min(RewardEstimateRow.std))
                .join(RewardEstimateRow, RewardEstimateRow.trajectory_id == TrajectoryRow.id)
                .where(TrajectoryRow.run_id == run_id)
                .group_by(TrajectoryRow.candidate_key, TrajectoryRow.final_answer)
                .order_by(func.max(RewardEstimateRow.mean).desc())
                .limit(n)
            )
            rows = list(s.execute(q))
        verdicts = self.verdicts_for([r[0] for r in rows])
        values: dict[str, dict[str, Any]] = defaultdict(dict)
        for v in verdicts:
            values[v.candidate_key][v.verifier] = v.value if v.status == Status.ok else v.status.value
        return [
            {"candidate_key": k, "answer": a, "reward": r, "std": sd, "values": values.get(k, {})}
            for k, a, r, sd in rows
        ]

    def integrity_problems(self) -> list[str]:
        """Plain-word descriptions of anything inconsistent in the ledger (empty list: healthy).

        A damaged database is reported as problems too (what SQLite's own
        check finds, or the first read that fails), never raised.
        """
        problems = self._storage_problems()
        if problems:
            return problems
        try:
            self._consistency_problems(problems)
        except LedgerError as exc:
            problems.append(f"part of the ledger cannot be read, so the checks stopped early: {exc}")
        except (ValueError, TypeError) as exc:  # a row that reads back but is not a valid record
            problems.append(f"a row of the ledger holds a value ARL cannot read back: {' '.join(str(exc).split())[:300]}")
        return problems

    def _storage_problems(self) -> list[str]:
        """What the database engine itself finds wrong with its file (SQLite's quick_check; nothing on PostgreSQL)."""
        if self.dialect != "sqlite":
            return []
        try:
            with self._engine.connect() as conn:
                rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA quick_check(20)")]
        except (DatabaseError, UnicodeDecodeError) as exc:
            return [f"the database file is damaged: SQLite cannot check it ({_plain(exc)}); restore a backup or use a new ledger"]
        if rows == ["ok"]:
            return []
        return [f"the database file is damaged (SQLite's quick_check): {' '.join(r.split())[:300]}" for r in rows]

    def _consistency_problems(self, problems: list[str]) -> None:
        with self._read() as s:
            orphan_traj = s.scalar(
                select(func.count()).select_from(TrajectoryRow).outerjoin(RunRow, RunRow.id == TrajectoryRow.run_id)
                .where(TrajectoryRow.run_id.is_not(None), RunRow.id.is_(None))
            )
            if orphan_traj:
                problems.append(f"{orphan_traj} trajectories belong to no run")
            no_prompt = s.scalar(
                select(func.count()).select_from(TrajectoryRow).outerjoin(PromptRow, PromptRow.id == TrajectoryRow.prompt_id)
                .where(PromptRow.id.is_(None))
            )
            if no_prompt:
                problems.append(f"{no_prompt} trajectories point to a prompt that is not stored")
            ests = s.execute(select(RewardEstimateRow.trajectory_id, RewardEstimateRow.verdict_ids, RewardEstimateRow.fidelity)).all()
            verdict_ids = set(s.scalars(select(VerdictRow.id)))
            missing = sum(1 for _, ids, _f in ests if any(i not in verdict_ids for i in ids or []))
            if missing:
                problems.append(f"{missing} reward estimates cite verdicts that are not stored")
            unbacked = sum(1 for _, ids, fid in ests if fid is not None and not ids)
            if unbacked:
                problems.append(f"{unbacked} reward estimates claim a fidelity but cite no verdicts")
            bad = s.scalar(
                select(func.count()).select_from(VerdictRow).where(
                    VerdictRow.status != Status.ok.value, (VerdictRow.value.is_not(None)) | (VerdictRow.score.is_not(None))
                )
            )
            if bad:
                problems.append(f"{bad} verdicts that are not 'ok' carry a value or score")
            for run in s.scalars(select(RunRow)):
                steps = set(s.scalars(select(TrainingStepRow.step).where(TrainingStepRow.run_id == run.id)))
                if steps and steps != set(range(max(steps) + 1)):
                    problems.append(f"run {run.id[:12]} has gaps in its training steps: {sorted(set(range(max(steps) + 1)) - steps)}")
                if run.steps_done > len(steps):
                    problems.append(f"run {run.id[:12]} claims {run.steps_done} steps done but has {len(steps)} recorded")
            for cp in s.scalars(select(CheckpointRow)):
                problems.extend(_checkpoint_problem(cp))
            pending_done = s.scalar(
                select(func.count()).select_from(LabRequestRow).join(
                    VerdictRow,
                    (VerdictRow.candidate_key == LabRequestRow.candidate_key)
                    & (VerdictRow.verifier == LabRequestRow.verifier)
                    & (VerdictRow.version == LabRequestRow.version)
                    & (VerdictRow.params_hash == LabRequestRow.params_hash),
                ).where(LabRequestRow.status == Status.ok.value, VerdictRow.status == Status.pending.value)
            )
            if pending_done:
                problems.append(f"{pending_done} answered lab requests still have a pending verdict")


# ---------------------------------------------------------------------- row <-> record
def _checkpoint_problem(cp: CheckpointRow) -> list[str]:
    import hashlib

    path = Path(cp.path)
    if not path.exists():
        return [f"checkpoint of run {cp.run_id[:12]} step {cp.step} is registered but missing on disk: {cp.path}"]
    weights = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
    if not weights:
        return [f"checkpoint of run {cp.run_id[:12]} step {cp.step} has no .safetensors weights in {cp.path}"]
    digest = hashlib.sha256()
    for w in weights:
        digest.update(w.read_bytes())
    if digest.hexdigest() != cp.sha256:
        return [f"checkpoint of run {cp.run_id[:12]} step {cp.step} does not match its sha256 (half-written?): {cp.path}"]
    return []


def _run(row: RunRow) -> RunRecord:
    return RunRecord(
        id=row.id, name=row.name, config=row.config, status=RunStatus(row.status), steps_done=row.steps_done,
        created_at=_utc(row.created_at), updated_at=_utc(row.updated_at),
    )


def _trajectory_row(t: Trajectory) -> dict[str, Any]:
    return {
        "id": t.id,
        "run_id": t.run_id,
        "prompt_id": t.prompt_id,
        "step": t.step,
        "group_id": t.group_id,
        "turns": [{"role": x.role, "content": x.content, "kind": x.kind.value} for x in t.turns],
        "final_answer": t.final_answer,
        "candidate_key": t.candidate_key,
        "prompt_tokens": t.prompt_tokens,
        "completion_tokens": t.completion_tokens,
        "truncated": t.truncated,
        "created_at": t.created_at,
    }


def _trajectory(row: TrajectoryRow) -> Trajectory:
    return Trajectory(
        id=row.id, run_id=row.run_id, prompt_id=row.prompt_id, step=row.step, group_id=row.group_id,
        turns=[Turn(**t) for t in row.turns], final_answer=row.final_answer, candidate_key=row.candidate_key,
        prompt_tokens=row.prompt_tokens, completion_tokens=row.completion_tokens, truncated=row.truncated,
        created_at=_utc(row.created_at),
    )


# The reward-estimate row keeps an estimate's disagreement in its JSON components column under this
# key (no migration); the record carries it as a typed field, never as a component.
_DISAGREEMENT_KEY = "~disagreement"


def _components_column(e: RewardEstimate) -> dict[str, Any]:
    if e.disagreement is None:
        return dict(e.components)
    return {**e.components, _DISAGREEMENT_KEY: e.disagreement.model_dump(mode="json")}


def _reward(row: RewardEstimateRow) -> RewardEstimate:
    components = dict(row.components or {})
    disagreement = components.pop(_DISAGREEMENT_KEY, None)
    return RewardEstimate(
        trajectory_id=row.trajectory_id, run_id=row.run_id, step=row.step, mean=row.mean, std=row.std,
        fidelity=Tier(row.fidelity) if row.fidelity else None, verdict_ids=list(row.verdict_ids or []),
        components=components, disagreement=TierDisagreement.model_validate(disagreement) if disagreement else None,
    )


def _storable_verdict(v: Verdict) -> Verdict:
    """``v`` as the ledger can store it: feedback with lone surrogates escaped; keys and ids must be UTF-8."""
    for field in ("candidate_key", "verifier", "version", "params_hash", "request_id"):
        text = getattr(v, field)
        if text is not None and not _is_utf8(text):
            raise LedgerError(f"verdict {field} {text!r} has a lone surrogate, which the ledger cannot store")
    if _is_utf8(v.feedback):
        return v
    return v.model_copy(update={"feedback": _storable_text(v.feedback)})


def _verdict_row(v: Verdict) -> dict[str, Any]:
    return {
        "candidate_key": v.candidate_key,
        "verifier": v.verifier,
        "version": v.version,
        "params_hash": v.params_hash,
        "tier": v.tier.value,
        "status": v.status.value,
        "value": v.value,
        "values": v.values,
        "score": v.score,
        "uncertainty": v.uncertainty,
        "feedback": v.feedback,
        "cost_s": v.cost_s,
        "wall_s": v.wall_s,
        "request_id": v.request_id,
        "created_at": v.created_at,
    }


_VERDICT_FIELDS = (
    "candidate_key", "verifier", "version", "params_hash", "tier", "status", "value", "values",
    "score", "uncertainty", "feedback", "cost_s", "wall_s", "request_id", "created_at",
)
_INSERT_COLUMNS = ", ".join(f'"{c}"' for c in _VERDICT_FIELDS)
_VERDICT_COLUMNS = "id, " + _INSERT_COLUMNS
_TIERS = {t.value: t for t in Tier}
_STATUSES = {s.value: s for s in Status}


def _verdict_tuple(v: Verdict, dialect: str) -> tuple[Any, ...]:
    values: Any = json.dumps(v.values)
    created: Any = v.created_at
    if dialect == "sqlite":
        # Same text format SQLAlchemy's SQLite DateTime type writes and reads.
        created = v.created_at.astimezone(timezone.utc).replace(tzinfo=None).isoformat(sep=" ")
    return (
        v.candidate_key, v.verifier, v.version, v.params_hash, v.tier.value, v.status.value, v.value, values,
        v.score, v.uncertainty, v.feedback, v.cost_s, v.wall_s, v.request_id, created,
    )


_VERDICT_FIELDSET = set(Verdict.model_fields)


def _verdict_from_tuple(r: Any) -> Verdict:
    """Build a Verdict from a trusted row without validation (hot path of cache lookups)."""
    values = r[8]
    if isinstance(values, str):
        values = orjson.loads(values) if values != "{}" else {}
    created = r[15]
    if isinstance(created, str):
        created = datetime.fromisoformat(created)
    # Equivalent to model_construct, at a fifth of its cost: the row was validated when written.
    obj = Verdict.__new__(Verdict)
    object.__setattr__(obj, "__dict__", {
        "id": r[0], "candidate_key": r[1], "verifier": r[2], "version": r[3], "params_hash": r[4],
        "tier": _TIERS[r[5]], "status": _STATUSES[r[6]], "value": r[7], "values": values or {}, "score": r[9],
        "uncertainty": r[10], "feedback": r[11] or "", "cost_s": r[12], "wall_s": r[13], "request_id": r[14],
        "created_at": _utc(created),
    })
    # Every field is set, so one shared set serves all rows (assignment only re-adds a member).
    object.__setattr__(obj, "__pydantic_fields_set__", _VERDICT_FIELDSET)
    object.__setattr__(obj, "__pydantic_extra__", None)
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj


def _verdict_from_mapping(m: Any) -> Verdict:
    return Verdict.model_construct(
        id=m["id"], candidate_key=m["candidate_key"], verifier=m["verifier"], version=m["version"],
        params_hash=m["params_hash"], tier=Tier(m["tier"]), status=Status(m["status"]), value=m["value"],
        values=m["values"] or {}, score=m["score"], uncertainty=m["uncertainty"], feedback=m["feedback"] or "",
        cost_s=m["cost_s"], wall_s=m["wall_s"], request_id=m["request_id"], created_at=_utc(m["created_at"]),
    )


def _lab(row: LabRequestRow) -> LabRequest:
    return LabRequest(
        id=row.id, run_id=row.run_id, candidate_key=row.candidate_key, payload=row.payload, verifier=row.verifier,
        version=row.version, params_hash=row.params_hash, status=Status(row.status), value=row.value,
        notes=row.notes, created_at=_utc(row.created_at), completed_at=_utc(row.completed_at),
    )
