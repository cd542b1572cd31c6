"""Integrity checks: what `arl db check` reports, in plain words, and never by raising.

Three layers: what the database engine finds wrong with its own file
(SQLite's ``quick_check``), rows that do not read back as records (a status
or tier outside its names, JSON that does not decode, a timestamp that is
not one), then whether the records agree with each other and with the
checkpoints on disk (orphans, gaps in steps, estimates citing verdicts that
are not stored, half-written weights).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Column, DateTime, func, select
from sqlalchemy.exc import DatabaseError

from storage.ledger._engine import _Database
from storage.ledger._errors import LedgerError, _plain
from storage.models import (
    Base,
    CheckpointRow,
    LabRequestRow,
    PromptRow,
    RewardEstimateRow,
    RunRow,
    TrainingStepRow,
    TrajectoryRow,
    VerdictRow,
)
from storage.records import RunStatus, Status, Tier

# Columns that hold one of a fixed set of names, per table (the ORM types them as plain strings).
_NAMED = {
    ("runs", "status"): RunStatus, ("verdicts", "status"): Status, ("verdicts", "tier"): Tier,
    ("lab_requests", "status"): Status,
}


def _column_reader(table: str, column: Column[Any]) -> Callable[[str, Any], str | None] | None:
    """A check of one column's stored value (None: the column needs none): returns why it does not read back."""
    names = _NAMED.get((table, column.name))
    if names is not None:
        allowed = {m.value for m in names}
        return lambda name, v: None if v is None or v in allowed else f"{name} {str(v)[:40]!r} is not one of {', '.join(sorted(allowed))}"
    if isinstance(column.type, JSON):
        return _json_problem
    if isinstance(column.type, DateTime):
        return _timestamp_problem
    return None


def _json_problem(name: str, value: Any) -> str | None:
    if not isinstance(value, (str, bytes)):
        return None
    try:
        json.loads(value)
    except ValueError:
        return f"{name} is not JSON: {str(value)[:40]!r}"
    return None


def _timestamp_problem(name: str, value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return f"{name} is not a timestamp: {value[:40]!r}"
    return None


class _Integrity(_Database):
    def integrity_problems(self) -> list[str]:
        """Plain-word descriptions of anything inconsistent in the ledger (empty list: healthy).

        A damaged database is reported as problems too (what SQLite's own
        check finds, or the first read that fails), never raised.
        """
        problems = self._storage_problems()
        if problems:
            return problems
        try:
            problems.extend(self.unreadable_rows())
            self._consistency_problems(problems)
        except LedgerError as exc:
            problems.append(f"part of the ledger cannot be read, so the checks stopped early: {exc}")
        except (ValueError, TypeError) as exc:  # a row that reads back but is not a valid record
            problems.append(f"a row of the ledger holds a value ARL cannot read back: {' '.join(str(exc).split())[:300]}")
        return problems

    def _storage_problems(self) -> list[str]:
        """What the database engine itself finds wrong with its file (SQLite's quick_check; nothing on PostgreSQL)."""
        if self._dialect != "sqlite":
            return []
        try:
            with self._engine.connect() as conn:
                rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA quick_check(20)")]
        except (DatabaseError, UnicodeDecodeError) as exc:
            return [f"the database file is damaged: SQLite cannot check it ({_plain(exc)}); restore a backup or use a new ledger"]
        if rows == ["ok"]:
            return []
        return [f"the database file is damaged (SQLite's quick_check): {' '.join(r.split())[:300]}" for r in rows]

    def unreadable_rows(self, shown: int = 20) -> list[str]:
        """Rows that do not read back as records, in plain words: an unknown status or tier, JSON that does not
        decode, a timestamp that is not one (what a damaged or hand-edited database holds). At most ``shown`` per
        table by name, then a count."""
        problems: list[str] = []
        with self._engine.connect() as conn:
            for table in Base.metadata.sorted_tables:
                checks = [(c.name, _column_reader(table.name, c)) for c in table.columns]
                checks = [(name, read) for name, read in checks if read is not None]
                if not checks:
                    continue
                keys = [c.name for c in table.primary_key.columns]
                columns = ", ".join(f'"{c}"' for c in [*keys, *(name for name, _ in checks)])
                found = 0
                for row in conn.exec_driver_sql(f"SELECT {columns} FROM {table.name}"):
                    key, values = row[: len(keys)], row[len(keys):]
                    reasons = [why for (name, read), value in zip(checks, values) if (why := read(name, value))]
                    if not reasons:
                        continue
                    found += 1
                    if found <= shown:
                        problems.append(f"{table.name} row {'/'.join(str(k)[:40] for k in key)}: {'; '.join(reasons)}: "
                                        "reads leave it out or stop at it; delete the row or restore a backup")
                if found > shown:
                    problems.append(f"{found - shown} more {table.name} rows do not read back")
        return problems

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
                    VerdictRow.status != Status.ok.value, VerdictRow.value.is_not(None)
                )
            )
            if bad:
                problems.append(f"{bad} verdicts that are not 'ok' carry a value")
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


def _checkpoint_problem(cp: CheckpointRow) -> list[str]:
    """A registered checkpoint that is missing, has no weights, or whose weights do not match its sha256."""
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
