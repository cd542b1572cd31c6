"""Lab requests: candidates sent out for an answer that arrives days later.

A lab verifier stores a ``pending`` verdict and a request; ``arl lab submit``
answers the request and turns that verdict into ``ok`` in one transaction.
One pending request stands for each verdict identity, so one answer can
never complete two requests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select, update

from storage.ledger._cache import _VerdictCache
from storage.ledger._engine import _chunks, _utc
from storage.ledger._errors import LedgerError, _is_utf8, _short_repr, _storable_text
from storage.models import LabRequestRow, VerdictRow
from storage.records import LabRequest, Status, Tier, Verdict, utcnow


class _LabRequests(_VerdictCache):
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
        """Lab requests, oldest first, optionally only those with ``status`` or of one run."""
        with self._read() as s:
            q = select(LabRequestRow).order_by(LabRequestRow.created_at, LabRequestRow.id)
            if status is not None:
                q = q.where(LabRequestRow.status == Status(status).value)
            if run_id is not None:
                q = q.where(LabRequestRow.run_id == run_id)
            return [_lab(r) for r in s.scalars(q)]

    def lab_requests_named(self, request_id: str) -> list[LabRequest]:
        """The request whose id is ``request_id``, else those it is the start of (at most two: a unique prefix is one)."""
        with self._read() as s:
            return [_lab(r) for r in _requests_named(s, request_id)]

    def close_lab_requests(self, verdicts: Iterable[Verdict]) -> int:
        """Mark the pending requests of these stored final verdicts (by ``request_id``) answered; returns how many.

        For requests a remote tier answers itself (a cluster queue): the verdict
        is stored first (it replaces the pending one), then its request is
        closed here with the verdict's status and value. Idempotent: a closed
        request is left as it is.
        """
        done = [v for v in verdicts if v.request_id and v.status != Status.pending]
        if not done:
            return 0
        table = LabRequestRow.__table__
        now = utcnow()
        closed = 0
        with self._write() as s:
            for v in done:
                closed += s.execute(
                    update(table)
                    .where(table.c.id == v.request_id, table.c.status == Status.pending.value)
                    .values(status=v.status.value, value=v.value, completed_at=now)
                ).rowcount or 0
        return closed

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
            rows = _requests_named(s, request_id)
            if len(rows) > 1:
                raise LedgerError(f"lab request id {_short_repr(request_id)} is the start of more than one request "
                                  f"({rows[0].id[:12]}, {rows[1].id[:12]}, ...); give more of it")
            req = rows[0] if rows else None
            if req is None:
                raise LedgerError(f"no lab request with id {_short_repr(request_id)} (see `arl lab list`)")
            request_id = req.id
            if req.notes == LabRequest.in_flight_note(req.verifier):
                raise LedgerError(f"request {request_id[:12]} is a call a run sent to its own {req.verifier} tier, not a "
                                  "lab's: the tier answers it (`arl run --resume` sends it again after a crash)")
            if req.status != Status.pending.value:
                raise LedgerError(
                    f"lab request {request_id!r} already has a result ({req.value!r}); results are not overwritten "
                    "(the ledger keeps the first answer: a run may have learned from it)"
                )
            key = (req.candidate_key, req.verifier, req.version, req.params_hash)
            row = s.execute(
                select(table).where(
                    table.c.candidate_key == key[0], table.c.verifier == key[1],
                    table.c.version == key[2], table.c.params_hash == key[3],
                )
            ).mappings().first()
            problem = LabRequest.value_problem(row["values"] if row is not None else None, value)
            if problem:
                raise LedgerError(f"lab request {request_id[:12]}: {problem}")
            now = utcnow()
            req.status = Status.ok.value
            req.value = value
            req.notes = notes
            req.completed_at = now
            feedback = f"lab result: {notes}" if notes else "lab result"
            if row is None:
                s.execute(
                    table.insert(),
                    [{
                        "candidate_key": key[0], "verifier": key[1], "version": key[2], "params_hash": key[3],
                        "tier": Tier.lab.value, "status": Status.ok.value, "value": value, "values": {"value": value},
                        "uncertainty": None, "feedback": feedback, "cost_s": 0.0, "wall_s": 0.0,
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


def _requests_named(s: Any, request_id: str) -> list[LabRequestRow]:
    """The row with id ``request_id``, else up to two rows whose id starts with it (as users copy short ids)."""
    if not request_id or not _is_utf8(request_id):  # a lone surrogate cannot be in the ledger (nor be sent to it)
        return []
    row = s.get(LabRequestRow, request_id)
    if row is not None:
        return [row]
    prefix = func.substr(LabRequestRow.id, 1, len(request_id)) == request_id  # '%' and '_' are literal, unlike LIKE
    return list(s.scalars(select(LabRequestRow).where(prefix).order_by(LabRequestRow.id).limit(2)))


def _lab(row: LabRequestRow) -> LabRequest:
    return LabRequest(
        id=row.id, run_id=row.run_id, candidate_key=row.candidate_key, payload=row.payload, verifier=row.verifier,
        version=row.version, params_hash=row.params_hash, status=Status(row.status), value=row.value,
        notes=row.notes, created_at=_utc(row.created_at), completed_at=_utc(row.completed_at),
    )
