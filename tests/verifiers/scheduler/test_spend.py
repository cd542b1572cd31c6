"""One spend rule: measured CPU-seconds, else the cost model's estimate; the planner and the ledger rows agree."""

from __future__ import annotations

import math

import pytest

from storage.records import Status, Verdict
from verifiers import Candidate, Verifier
from tests.helpers.scheduler import gap_window_config
from verifiers.scheduler import Scheduler, charge, charge_one, spend_records


def _verdict(v: Verifier, c: Candidate, cost: float) -> Verdict:
    return Verdict(candidate_key=c.key, verifier=v.name, version=v.version, params_hash=v.params_hash, tier=v.tier,
                   status=Status.ok, value=1.0, cost_s=cost)


def _unmeasured(verifier: Verifier) -> Verifier:
    """The same verifier, but its verdicts carry no measured cost (as a lab request's or a cut-short batch's)."""
    inner = verifier.verify_batch
    verifier.verify_batch = lambda batch: [v.model_copy(update={"cost_s": 0.0}) for v in inner(batch)]  # type: ignore[method-assign]
    return verifier


def test_measured_cost_wins_and_an_unmeasured_verdict_costs_the_model_estimate(ladder_factory, pool_factory) -> None:  # noqa: ANN001
    pool, truth = pool_factory(4)
    top = ladder_factory(truth)[-1]
    a, b = pool[0], pool[1]
    assert top.expected_cost(b) > 0
    assert charge_one(top, a, _verdict(top, a, 2.5)) == 2.5
    assert charge_one(top, b, _verdict(top, b, 0.0)) == top.expected_cost(b)
    total = charge(top, [a, b], [_verdict(top, a, 2.5), _verdict(top, b, 0.0)])
    assert total == pytest.approx(2.5 + top.expected_cost(b))
    [row] = spend_records("run", 3, top, [a, b], [_verdict(top, a, 2.5), _verdict(top, b, 0.0)])
    assert (row.cost_s, row.calls, row.tier, row.verifier, row.step) == (pytest.approx(total), 2, top.tier, top.name, 3)
    assert spend_records("run", 3, top, [a], []) == []
    with pytest.raises(ValueError, match="without that candidate"):
        charge(top, [a], [_verdict(top, b, 1.0)])


def test_the_planner_charges_its_budget_by_the_same_rule(ladder_factory, pool_factory) -> None:  # noqa: ANN001
    """Every verdict the step produced, charged by the rule, sums to what the planner spent (unmeasured ones too)."""
    pool, truth = pool_factory(12)
    ladder = ladder_factory(truth)
    _unmeasured(ladder[1])
    s = Scheduler(ladder, gap_window_config(policy="all"))
    result = s.run_step(pool, budget=math.inf)
    cands = {c.key: c for c in pool}
    by_rule: dict[str, float] = {}
    for v in result.verdicts:
        by_rule[v.verifier] = by_rule.get(v.verifier, 0.0) + charge_one(s.verifier(v.verifier), cands[v.candidate_key], v)
    assert {v.verifier for v in result.verdicts} == {v.name for v in ladder}
    assert result.spend_by_verifier == pytest.approx(by_rule)
    assert result.spend_by_verifier[ladder[1].name] == pytest.approx(sum(ladder[1].expected_cost(c) for c in pool))


def test_budget_carry_lets_a_step_spend_what_earlier_steps_left(ladder_factory, pool_factory) -> None:  # noqa: ANN001
    """With budget_carry, step n may spend (n + 1) step budgets less what the run spent; never past the run's."""
    pool, truth = pool_factory(8)
    ladder = ladder_factory(truth)
    top_cost = ladder[-1].expected_cost(pool[0])
    per_step = top_cost / 3  # no step affords a top-tier call on its own
    plain = Scheduler(ladder, gap_window_config(policy="all", budget_per_step=per_step, budget_per_run=10 * top_cost))
    carry = Scheduler(
        ladder_factory(truth),
        gap_window_config(policy="all", budget_per_step=per_step, budget_per_run=10 * top_cost, budget_carry=True),
    )
    assert plain.step_budget(5) == pytest.approx(per_step)
    assert carry.step_budget(0) == pytest.approx(per_step) and carry.step_budget(5) == pytest.approx(6 * per_step)
    tops = {s: 0 for s in ("plain", "carry")}
    seen: dict[str, list] = {"plain": [], "carry": []}  # verdicts so far: a step pays only for new ones (the ledger's cache)
    for step in range(9):
        for name, s in (("plain", plain), ("carry", carry)):
            result = s.run_step(pool, step=step, cached=list(seen[name]))
            seen[name] += result.verdicts
            tops[name] += sum(v.verifier == ladder[-1].name for v in result.verdicts)
            assert s.run_spent <= per_step * (step + 1) + 1e-9  # carrying never spends ahead of the accrual
    assert tops["plain"] == 0 and tops["carry"] >= 1  # each plain step is too small for the top tier; carried ones are not
    # What the run has left caps the carry, and what others hold (an async run's open plans) counts as taken.
    capped = Scheduler(ladder, gap_window_config(budget_per_step=per_step, budget_per_run=2 * per_step, budget_carry=True))
    assert capped.step_budget(9) == pytest.approx(2 * per_step)
    assert capped.step_budget(9, committed=1.5 * per_step) == pytest.approx(0.5 * per_step)
