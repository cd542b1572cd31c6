"""The verdict cache: look up what was verified, store new verdicts with their bill, at DB-API speed.

A verdict is unique on (candidate key, verifier, version, params hash), so
nothing is verified twice at the same tier and version. Lookups and bulk
writes are the hot path of every step (10,000 keys at a time), so they skip
SQLAlchemy's per-row type processing: raw ``executemany`` of
``INSERT ... ON CONFLICT DO NOTHING`` and raw ``SELECT``s whose rows become
:class:`~storage.records.Verdict` objects without revalidation (they were
validated when written).
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

import orjson
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from storage.ledger._engine import _chunks, _Database, _utc
from storage.ledger._errors import LedgerError, _is_utf8, _storable_text
from storage.models import SpendRow, VerdictRow
from storage.records import SpendRecord, Status, Tier, Verdict, utcnow

_LOOKUP_CHUNK = 10_000  # the cache lookup is hot: fewer, larger statements (still under both limits)


class _VerdictCache(_Database):
    def lookup_verdicts(
        self, keys: Iterable[str], verifier: str, version: str, params_hash: str
    ) -> dict[str, Verdict]:
        """Cached verdicts of one verifier identity for many candidate keys (one query per 10,000 keys)."""
        keys = list(dict.fromkeys(keys))
        out: dict[str, Verdict] = {}
        mark = self._mark
        with self._engine.connect() as conn:
            for chunk in _chunks(keys, _LOOKUP_CHUNK):
                # Raw DB-API path: SQLAlchemy's per-row type processing dominated
                # the 10k-key lookup; we decode JSON and timestamps ourselves.
                sql = (
                    f"SELECT {_VERDICT_COLUMNS} FROM verdicts WHERE verifier = {mark} AND version = {mark} "
                    f"AND params_hash = {mark} AND candidate_key IN ({', '.join([mark] * len(chunk))})"
                )
                for row in conn.exec_driver_sql(sql, (verifier, version, params_hash, *chunk)).fetchall():
                    try:
                        out[row[1]] = _verdict_from_tuple(row)
                    except UnreadableRow as exc:
                        # A cache hit that cannot be read must not turn into a silent re-verification.
                        raise LedgerError(f"{exc}; `arl db check` lists such rows: delete them or restore a backup") from None
        return out

    def verdicts_for(self, keys: Iterable[str], verifiers: Iterable[str] | None = None) -> list[Verdict]:
        """Every stored verdict about these candidate keys (optionally only from some verifiers)."""
        keys = list(dict.fromkeys(keys))
        names = list(verifiers) if verifiers is not None else None
        mark = self._mark
        out: list[Verdict] = []
        with self._engine.connect() as conn:
            for chunk in _chunks(keys):
                # Raw rows, decoded here: a row that does not read back is left out and counted, not fatal.
                sql = f"SELECT {_VERDICT_COLUMNS} FROM verdicts WHERE candidate_key IN ({', '.join([mark] * len(chunk))})"
                args: list[Any] = list(chunk)
                if names is not None:
                    sql += f" AND verifier IN ({', '.join([mark] * len(names))})" if names else " AND 1 = 0"
                    args += names
                for row in conn.exec_driver_sql(sql + " ORDER BY id", tuple(args)).fetchall():
                    try:
                        out.append(_verdict_from_tuple(row))
                    except UnreadableRow:
                        self._unreadable_verdicts.add(row[0])
        return out

    @property
    def unreadable_verdicts(self) -> int:
        """How many verdict rows reads of this ledger object left out because they do not read back (`arl db check` names them)."""
        return len(self._unreadable_verdicts)

    @functools.cached_property
    def _unreadable_verdicts(self) -> set[int]:
        return set()

    def ok_values(self, verifier: str, version: str | None = None, params_hash: str | None = None) -> dict[str, float]:
        """Every ``ok`` value of one verifier: candidate key -> value, for surrogate history.

        ``version`` and ``params_hash``, when given, keep only the answers of that verifier as configured now:
        a ledger that also holds another basis set's or an older version's answers under the same name must not
        calibrate this run's model with them. Without them every version and setting counts (one value per key,
        whichever the database returns last).
        """
        table = VerdictRow.__table__
        where = [table.c.verifier == verifier, table.c.status == Status.ok.value, table.c.value.is_not(None)]
        if version is not None:
            where.append(table.c.version == version)
        if params_hash is not None:
            where.append(table.c.params_hash == params_hash)
        with self._engine.connect() as conn:
            return {k: float(v) for k, v in conn.execute(select(table.c.candidate_key, table.c.value).where(*where))}

    def put_verdicts(
        self, verdicts: Iterable[Verdict], *, return_stored: bool = True, spend: Iterable[SpendRecord] = ()
    ) -> list[Verdict]:
        """Store verdicts idempotently and return what the ledger holds for them (with row ids).

        The first verdict for a cache key wins, except that a ``pending``
        verdict is replaced in place when a final answer for it arrives.
        ``spend`` (what computing them cost) is written in the same
        transaction, so a crash can never leave paid verdicts unbilled.
        Lone surrogates in ``feedback`` are stored escaped (see
        :func:`~storage.ledger._errors._storable_text`); in a key or request
        id they are a :class:`LedgerError`.
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
            mark = self._mark
            sql = (
                f"INSERT INTO verdicts ({_INSERT_COLUMNS}) VALUES ({', '.join([mark] * len(_VERDICT_FIELDS))}) "
                "ON CONFLICT (candidate_key, verifier, version, params_hash) DO NOTHING"
            )
            cursor = s.connection().connection.driver_connection.cursor()
            tuples = [_verdict_tuple(v, self._dialect) for v in verdicts]
            cursor.executemany(sql, tuples)
            cursor.close()
            if final_keys:
                pending_ids = _pending_ids(s, final_keys)
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

    def _stored(self, verdicts: list[Verdict]) -> list[Verdict]:
        """What the ledger holds for each of ``verdicts`` (the first one stored wins), in their order."""
        by_identity: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        for v in verdicts:
            by_identity[(v.verifier, v.version, v.params_hash)].append(v.candidate_key)
        found: dict[tuple[str, str, str, str], Verdict] = {}
        for (name, version, ph), keys in by_identity.items():
            for key, v in self.lookup_verdicts(keys, name, version, ph).items():
                found[(key, name, version, ph)] = v
        return [found[v.cache_key] for v in verdicts]


def _pending_ids(s: Session, keys: set[tuple[str, str, str, str]]) -> dict[tuple[str, str, str, str], int]:
    """Row ids of the ``pending`` verdicts among ``keys`` (cache keys), which a final verdict replaces."""
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


# ---------------------------------------------------------------------- verdict <-> row
def _storable_verdict(v: Verdict) -> Verdict:
    """``v`` as the ledger can store it: feedback with lone surrogates escaped; keys and ids must be UTF-8."""
    for field in ("candidate_key", "verifier", "version", "params_hash", "request_id"):
        text = getattr(v, field)
        if text is not None and not _is_utf8(text):
            raise LedgerError(f"verdict {field} {text!r} has a lone surrogate, which the ledger cannot store")
    if _is_utf8(v.feedback):
        return v
    return v.model_copy(update={"feedback": _storable_text(v.feedback)})


_VERDICT_FIELDS = (
    "candidate_key", "verifier", "version", "params_hash", "tier", "status", "value", "values",
    "uncertainty", "feedback", "cost_s", "wall_s", "request_id", "created_at", "job_id",
)
_INSERT_COLUMNS = ", ".join(f'"{c}"' for c in _VERDICT_FIELDS)
_VERDICT_COLUMNS = "id, " + _INSERT_COLUMNS


def _verdict_row(v: Verdict) -> dict[str, Any]:
    """``v`` as the values of its ``_VERDICT_FIELDS`` columns, tier and status as the strings stored."""
    return {**{f: getattr(v, f) for f in _VERDICT_FIELDS}, "tier": v.tier.value, "status": v.status.value}

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
        v.uncertainty, v.feedback, v.cost_s, v.wall_s, v.request_id, created, v.job_id,
    )


_VERDICT_FIELDSET = set(Verdict.model_fields)


class UnreadableRow(ValueError):
    """A stored row that does not read back as a record (unknown status or tier, undecodable values, bad timestamp)."""


def _verdict_from_tuple(r: Any) -> Verdict:
    """Build a Verdict from a row without pydantic validation (hot path of cache lookups); UnreadableRow if it cannot be.

    The row was validated when written, so only what a damaged or hand-edited database can hold is
    checked: the tier and status names, the values' JSON and the timestamp.
    """
    if r[5] not in _TIERS or r[6] not in _STATUSES:
        field, got, allowed = ("tier", r[5], _TIERS) if r[5] not in _TIERS else ("status", r[6], _STATUSES)
        raise UnreadableRow(f"verdict row {r[0]} has {field} {str(got)[:40]!r}, not one of {', '.join(allowed)}")
    values = r[8]
    if isinstance(values, (str, bytes)):
        try:
            values = orjson.loads(values) if values != "{}" else {}
        except orjson.JSONDecodeError:
            raise UnreadableRow(f"verdict row {r[0]} has values that are not JSON: {str(values)[:40]!r}") from None
    if values is not None and not isinstance(values, dict):
        raise UnreadableRow(f"verdict row {r[0]} has values that are not a JSON object: {str(values)[:40]!r}")
    created = r[14]
    if isinstance(created, str):
        try:
            created = datetime.fromisoformat(created)
        except ValueError:
            raise UnreadableRow(f"verdict row {r[0]} has a timestamp that is not one: {created[:40]!r}") from None
    if not isinstance(created, datetime):
        raise UnreadableRow(f"verdict row {r[0]} has a timestamp that is not one: {str(created)[:40]!r}")
    # Equivalent to model_construct, at a fifth of its cost: the row was validated when written.
    obj = Verdict.__new__(Verdict)
    object.__setattr__(obj, "__dict__", {
        "id": r[0], "candidate_key": r[1], "verifier": r[2], "version": r[3], "params_hash": r[4],
        "tier": _TIERS[r[5]], "status": _STATUSES[r[6]], "value": r[7], "values": values or {},
        "uncertainty": r[9], "feedback": r[10] or "", "cost_s": r[11], "wall_s": r[12], "request_id": r[13],
        "created_at": _utc(created), "job_id": r[15],
    })
    # Every field is set, so one shared set serves all rows (assignment only re-adds a member).
    object.__setattr__(obj, "__pydantic_fields_set__", _VERDICT_FIELDSET)
    object.__setattr__(obj, "__pydantic_extra__", None)
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj
