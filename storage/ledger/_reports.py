"""Read models for reports, the CLI and budgets: spend totals, run summaries, the best candidates.

These methods only read, and return plain dicts of JSON-ready values (what
``arl runs show --json`` prints), built from aggregate queries rather than by
loading every record.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select

from storage.ledger._engine import _chunks
from storage.ledger._lab import _LabRequests
from storage.ledger._records import _Records
from storage.models import RewardEstimateRow, SpendRow, TrajectoryRow, VerdictRow
from storage.records import Status, ladder_order


class _Reports(_Records, _LabRequests):
    def spend_by_tier(self, run_id: str) -> dict[str, float]:
        """A run's verification spend (CPU-seconds) per tier, in ladder order."""
        with self._read() as s:
            q = select(SpendRow.tier, func.sum(SpendRow.cost_s)).where(SpendRow.run_id == run_id).group_by(SpendRow.tier)
            totals = {tier: float(total or 0.0) for tier, total in s.execute(q)}
        return {tier: totals[tier] for tier in sorted(totals, key=ladder_order)}

    def spend_by_verifier(self, run_id: str) -> list[dict[str, Any]]:
        """A run's spend per verifier that ran (its tier, CPU-seconds, calls), in ladder order.

        A tier names a fidelity level, not what answered at it: a reference
        table can stand in for the lab, and the summary names it.
        """
        with self._read() as s:
            q = (
                select(SpendRow.tier, SpendRow.verifier, func.sum(SpendRow.cost_s), func.sum(SpendRow.calls))
                .where(SpendRow.run_id == run_id)
                .group_by(SpendRow.tier, SpendRow.verifier)
            )
            rows = [{"tier": t, "verifier": v, "cost_s": float(c or 0.0), "calls": int(n or 0)} for t, v, c, n in s.execute(q)]
        return sorted(rows, key=lambda r: (*ladder_order(r["tier"]), r["verifier"]))

    def spend_by_step(self, run_id: str) -> dict[int, dict[str, float]]:
        """A run's verification spend (CPU-seconds) per step, then per tier."""
        out: dict[int, dict[str, float]] = defaultdict(dict)
        with self._read() as s:
            q = (
                select(SpendRow.step, SpendRow.tier, func.sum(SpendRow.cost_s))
                .where(SpendRow.run_id == run_id)
                .group_by(SpendRow.step, SpendRow.tier)
            )
            for step, tier, total in s.execute(q):
                out[step][tier] = float(total or 0.0)
        return {step: {t: per[t] for t in sorted(per, key=ladder_order)} for step, per in sorted(out.items())}

    def run_summary(self, run_id: str) -> dict[str, Any]:
        """Everything ``arl runs show`` prints about a run: status, spend, rewards, verdicts, steps."""
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
            "spend_by_verifier": self.spend_by_verifier(run.id),
            "best_reward": best,
            "mean_reward": mean,
            "trajectories": n_traj,
            "candidates": len(keys),
            "verdicts_by_status": self._verdict_counts(keys),
            "checkpoints": len(self.checkpoints(run.id)),
            "lab_pending": len(self.lab_requests(Status.pending, run_id=run.id)),
            "steps": self._step_metrics(run.id),
            "learned_from": self._learned_from(run.id),
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

    def _verdict_counts(self, keys: Iterable[str]) -> dict[str, int]:
        """Verdicts about ``keys`` by status."""
        table = VerdictRow.__table__
        counts: Counter[str] = Counter()
        with self._engine.connect() as conn:
            for chunk in _chunks(list(dict.fromkeys(keys))):
                q = select(table.c.status, func.count()).where(table.c.candidate_key.in_(chunk)).group_by(table.c.status)
                for status, n in conn.execute(q):
                    counts[status] += n
        return dict(counts)

    def _learned_from(self, run_id: str) -> str | None:
        """What the steps after the verification budget was committed learned from (None: it never was)."""
        after = [r for r in self.training_steps(run_id) if r.metrics.get("pipeline/budget_committed")]
        if not after:
            return None
        first, last = after[0].step, after[-1].step
        share = sum(r.metrics.get("pipeline/top_tier_share", 0.0) for r in after) / len(after)
        steps = f"step {first}" if first == last else f"steps {first}-{last}"
        if share == 0.0:
            return f"{steps} learned from surrogate estimates only: the budget was committed before step {first}"
        return (f"{steps} learned after the budget was committed (before step {first}): {share:.0%} of their "
                "trajectories from top-tier verdicts, the rest from surrogate estimates")

    def _step_metrics(self, run_id: str) -> list[dict[str, Any]]:
        """Per completed step: reward mean and max, validity, seconds, and spend and calls per tier."""
        spend: dict[int, dict[str, float]] = defaultdict(dict)
        calls: dict[int, dict[str, int]] = defaultdict(dict)
        with self._read() as s:
            q = (
                select(SpendRow.step, SpendRow.tier, func.sum(SpendRow.cost_s), func.sum(SpendRow.calls))
                .where(SpendRow.run_id == run_id)
                .group_by(SpendRow.step, SpendRow.tier)
            )
            for step, tier, cost, n in sorted(s.execute(q), key=lambda r: (r[0], *ladder_order(r[1]))):
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
                "top_tier_share": m.get("pipeline/top_tier_share"),
                "spend_by_tier": spend.get(record.step, {}),
                "calls_by_tier": calls.get(record.step, {}),
            })
        return out
