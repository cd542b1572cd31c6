"""Record CRUD: runs, prompts, trajectories, reward estimates, training steps, checkpoints, verifier tiers.

Each public method is one transaction and takes or returns
``storage.records`` objects; the row <-> record conversions below are the
only place that knows both shapes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select

from storage.ledger._engine import _chunks, _Database, _utc
from storage.ledger._errors import LedgerError, _is_utf8, _short_repr
from storage.models import (
    CheckpointRow,
    PromptRow,
    RewardEstimateRow,
    RunRow,
    TrainingStepRow,
    TrajectoryRow,
    VerifierTierRow,
)
from storage.records import (
    CheckpointRecord,
    Prompt,
    RewardEstimate,
    RunRecord,
    RunStatus,
    Tier,
    TierDisagreement,
    TrainingStepRecord,
    Trajectory,
    Turn,
    VerifierSpec,
    tier_rank,
    utcnow,
)

_REWARD_UPDATED = ("mean", "std", "fidelity", "verdict_ids", "components", "value_mean", "value_std", "invalid")
_RUN_ID_MAX = 64  # the length of the runs.id column
_SQL_MAX_INT = 2**63 - 1  # larger Python ints cannot be sent as SQL integers (OverflowError)


class _Records(_Database):
    # ------------------------------------------------------------------ runs
    def create_run(self, name: str, config: dict[str, Any] | None = None, run_id: str | None = None) -> RunRecord:
        """Start a run record (status ``running``); ``run_id`` defaults to a new id."""
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
                rows = s.scalars(select(RunRow).where(prefix).order_by(RunRow.id).limit(3)).all()
                if len(rows) > 1:
                    more = ", ..." if len(rows) > 2 else ""
                    raise LedgerError(
                        f"run id {_short_repr(run_id)} is the start of more than one run ({rows[0].id[:12]}, "
                        f"{rows[1].id[:12]}{more}); give more of it (see `arl runs list`)"
                    )
                if not rows:
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
        """Set a run's status (and optionally ``steps_done``); returns the updated run."""
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
        """Store prompts; a prompt whose id is stored already is left as it is."""
        rows = [
            {"id": p.id, "suite": p.suite, "text": p.text, "goal": p.goal, "meta": p.metadata} for p in prompts
        ]
        if not rows:
            return
        with self._write() as s:
            for chunk in _chunks(rows):
                s.execute(self._insert(PromptRow).on_conflict_do_nothing(index_elements=["id"]), list(chunk))

    def get_prompts(self, ids: Iterable[str]) -> dict[str, Prompt]:
        """Stored prompts by id (ids not stored are absent)."""
        ids = list(dict.fromkeys(ids))
        out: dict[str, Prompt] = {}
        with self._read() as s:
            for chunk in _chunks(ids):
                for r in s.scalars(select(PromptRow).where(PromptRow.id.in_(chunk))):
                    out[r.id] = Prompt(id=r.id, suite=r.suite, text=r.text, goal=r.goal, metadata=r.meta)
        return out

    def add_trajectories(self, trajectories: Iterable[Trajectory]) -> None:
        """Store trajectories; one whose id is stored already is left as it is."""
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

    def run_trajectories(self, run_id: str, from_step: int = 0) -> list[tuple[Trajectory, RewardEstimate | None]]:
        """A run's trajectories from step ``from_step`` on, by step then insertion order, with their reward estimates."""
        with self._read() as s:
            q = (
                select(TrajectoryRow, RewardEstimateRow)
                .outerjoin(RewardEstimateRow, RewardEstimateRow.trajectory_id == TrajectoryRow.id)
                .where(TrajectoryRow.run_id == run_id, TrajectoryRow.step >= from_step)
                .order_by(TrajectoryRow.step, TrajectoryRow.created_at, TrajectoryRow.id)
            )
            return [(_trajectory(t), _reward(r) if r else None) for t, r in s.execute(q)]

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

    # ------------------------------------------------------------------ rewards
    def add_reward_estimates(self, estimates: Iterable[RewardEstimate]) -> None:
        """Store reward estimates; a trajectory's new estimate replaces its old one (a late verdict arrived)."""
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
                "value_mean": e.value_mean,
                "value_std": e.value_std,
                "invalid": e.invalid,
            }
            for e in estimates
        ]
        self._upsert(RewardEstimateRow.__table__, rows, ["trajectory_id"], _REWARD_UPDATED)

    # ------------------------------------------------------------------ steps & checkpoints
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
                index_elements=["run_id", "step"], set_={"metrics": stmt.excluded.metrics, "group_ids": stmt.excluded.group_ids}
            )
            s.execute(stmt, [record.model_dump(mode="python")])
            run = s.get(RunRow, record.run_id)
            if run is not None:
                run.steps_done = max(run.steps_done, record.step + 1)
                run.updated_at = utcnow()

    def training_steps(self, run_id: str) -> list[TrainingStepRecord]:
        """A run's recorded training steps, in step order."""
        with self._read() as s:
            q = select(TrainingStepRow).where(TrainingStepRow.run_id == run_id).order_by(TrainingStepRow.step)
            return [
                TrainingStepRecord(run_id=r.run_id, step=r.step, metrics=r.metrics, group_ids=r.group_ids or [],
                                   created_at=_utc(r.created_at))
                for r in s.scalars(q)
            ]

    def checkpoints(self, run_id: str) -> list[CheckpointRecord]:
        """A run's registered checkpoints, in step order."""
        with self._read() as s:
            q = select(CheckpointRow).where(CheckpointRow.run_id == run_id).order_by(CheckpointRow.step, CheckpointRow.id)
            return [
                CheckpointRecord(run_id=r.run_id, step=r.step, path=r.path, sha256=r.sha256, created_at=_utc(r.created_at))
                for r in s.scalars(q)
            ]

    # ------------------------------------------------------------------ verifier tiers
    def record_tiers(self, specs: Iterable[VerifierSpec]) -> None:
        """Record the verifiers a run uses (by name; a newer spec of the same name replaces the old)."""
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
        updated = ("tier", "fidelity", "version", "params", "expected_cost", "description", "origin", "updated_at")
        self._upsert(VerifierTierRow.__table__, rows, ["name"], updated)


# ---------------------------------------------------------------------- row <-> record
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
        "policy_version": t.policy_version,
        "completion_ids": t.completion_ids,
        "behaviour_logprobs": t.behaviour_logprobs,
        "created_at": t.created_at,
    }


def _trajectory(row: TrajectoryRow) -> Trajectory:
    return Trajectory(
        id=row.id, run_id=row.run_id, prompt_id=row.prompt_id, step=row.step, group_id=row.group_id,
        turns=[Turn(**t) for t in row.turns], final_answer=row.final_answer, candidate_key=row.candidate_key,
        prompt_tokens=row.prompt_tokens, completion_tokens=row.completion_tokens, truncated=row.truncated,
        policy_version=row.policy_version, completion_ids=row.completion_ids, behaviour_logprobs=row.behaviour_logprobs,
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
    # Rows written before revision 0003 kept the posterior and the invalid flag as components.
    old_mean, old_std, old_invalid = (components.pop(k, None) for k in ("value_mean", "value_std", "invalid"))
    return RewardEstimate(
        trajectory_id=row.trajectory_id, run_id=row.run_id, step=row.step, mean=row.mean, std=row.std,
        fidelity=Tier(row.fidelity) if row.fidelity else None, verdict_ids=list(row.verdict_ids or []),
        value_mean=row.value_mean if row.value_mean is not None else old_mean,
        value_std=row.value_std if row.value_std is not None else old_std,
        invalid=bool(row.invalid) if row.invalid is not None else bool(old_invalid),
        components=components, disagreement=TierDisagreement.model_validate(disagreement) if disagreement else None,
    )
