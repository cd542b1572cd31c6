"""What a verdict costs: the one rule every caller charges by.

A verdict is charged the CPU-seconds its verifier measured (``cost_s``); a
verdict with no measured cost (a lab request, a verifier that cannot measure
itself, a batch cut short) is charged what the verifier's cost model expects
for its candidate. The planner charges the step's budget by it, the flows
write the ledger's spend rows by it, and the benchmarks count a regime's
spend by it, so the budget the scheduler sees and the spend the ledger
reports cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence

from storage.records import SpendRecord, Verdict
from verifiers.base import Candidate, Verifier

__all__ = ["charge", "charge_one", "spend_records"]


def charge_one(verifier: Verifier, candidate: Candidate, verdict: Verdict) -> float:
    """CPU-seconds one verdict of ``verifier`` on ``candidate`` costs: measured, else the cost model's estimate."""
    return verdict.cost_s if verdict.cost_s > 0 else verifier.expected_cost(candidate)


def charge(verifier: Verifier, batch: Sequence[Candidate], verdicts: Sequence[Verdict]) -> float:
    """CPU-seconds of ``verdicts`` (of ``verifier``, on candidates of ``batch``), by :func:`charge_one`."""
    by_key = {c.key: c for c in batch}
    total = 0.0
    for v in verdicts:
        candidate = by_key.get(v.candidate_key)
        if candidate is None:
            raise ValueError(f"a verdict on {v.candidate_key!r} came back for a batch without that candidate")
        total += charge_one(verifier, candidate, v)
    return total


def spend_records(
    run_id: str, step: int, verifier: Verifier, batch: Sequence[Candidate], verdicts: Sequence[Verdict]
) -> list[SpendRecord]:
    """The ledger's spend row of one batch (none when no verdict came back), charged by :func:`charge`."""
    if not verdicts:
        return []
    cost = charge(verifier, batch, verdicts)
    return [SpendRecord(run_id=run_id, step=step, tier=verifier.tier, verifier=verifier.name, cost_s=cost, calls=len(verdicts))]
