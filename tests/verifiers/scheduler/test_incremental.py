"""The plan without a round barrier: work for free slots, verdicts one at a time, in any order."""

from __future__ import annotations

import numpy as np
import pytest

from verifiers.scheduler import Observation, Scheduler, SchedulerConfig

WINDOW = {"target_low": 3.0, "target_high": 4.0}


def _setup(ladder_factory, pool_factory, n=64, seed=0):
    pool, truth = pool_factory(n, seed=seed)
    hist_pool, hist_truth = pool_factory(150, seed=seed + 100, prefix="h")
    ladder = ladder_factory({**truth, **hist_truth}, seed=seed)
    hist = [Observation(k, np.zeros(0), {v.name: v.values[k] for v in ladder}) for k in hist_truth]
    return pool, ladder, hist


def _drive(plan, ladder, slots, rng, check=lambda plan: None):
    """Run a plan to the end, returning one call at a time in random order; every step checked."""
    by_name = {v.name: v for v in ladder}
    in_flight: list[tuple[str, object]] = []
    asked: list[tuple[str, str]] = []
    peak = {name: 0 for name in slots}
    while True:
        free = {name: slots[name] - sum(1 for n, _ in in_flight if n == name) for name in slots}
        for name, batch in plan.request(free).items():
            in_flight += [(name, c) for c in batch]
            asked += [(c.key, name) for c in batch]
        for name in slots:
            peak[name] = max(peak[name], sum(1 for n, _ in in_flight if n == name))
        assert plan.committed <= plan.budget + 1e-9  # calls in flight count at their expected cost
        check(plan)
        if not in_flight:
            assert plan.done
            return asked, peak
        name, cand = in_flight.pop(int(rng.integers(len(in_flight))))
        plan.observe(by_name[name].verify_batch([cand]))


@pytest.mark.parametrize("objective", ["discovery", "advantage"])
@pytest.mark.parametrize("budget", [3.0, 40.0])
def test_slots_budget_and_no_repeats(ladder_factory, pool_factory, objective, budget) -> None:
    pool, ladder, hist = _setup(ladder_factory, pool_factory)
    s = Scheduler(ladder, SchedulerConfig(objective=objective, **WINDOW))
    s.add_history(hist)
    plan = s.plan_step(pool, group_ids=[f"g{i // 8}" for i in range(len(pool))], budget=budget)
    slots = {"syn-fast": 16, "syn-sim": 4, "syn-top": 2}
    asked, peak = _drive(plan, ladder, slots, np.random.default_rng(1))
    assert len(asked) == len(set(asked))  # never paid twice
    assert all(peak[n] <= slots[n] for n in slots)
    assert peak["syn-fast"] == 16
    result = plan.result()
    assert result.total_spend <= budget + 1e-9
    assert len(result.estimates) == len(pool)
    assert set(plan.settled_groups()) == {f"g{i}" for i in range(8)}
    if budget == 40.0:
        assert result.calls["syn-top"] > 0


def test_a_group_with_a_call_in_flight_is_not_settled(ladder_factory, pool_factory) -> None:
    pool, ladder, hist = _setup(ladder_factory, pool_factory)
    s = Scheduler(ladder, SchedulerConfig(objective="advantage", **WINDOW))
    s.add_history(hist)
    groups = [f"g{i // 8}" for i in range(len(pool))]
    plan = s.plan_step(pool, group_ids=groups, budget=40.0)
    seen_partial = []

    def check(plan):
        settled = set(plan.settled_groups())
        busy = {groups[[c.key for c in pool].index(plan.keys[i])] for i, _ in plan.outstanding}
        assert not settled & busy
        if settled and len(settled) < 8:
            seen_partial.append(len(settled))

    _drive(plan, ladder, {"syn-fast": 64, "syn-sim": 8, "syn-top": 2}, np.random.default_rng(2), check)
    assert seen_partial  # some groups were ready for the learner before the whole batch was


def test_an_abandoned_call_frees_its_budget_and_is_not_asked_again(ladder_factory, pool_factory) -> None:
    pool, ladder, hist = _setup(ladder_factory, pool_factory, n=8)
    s = Scheduler(ladder, SchedulerConfig(objective="advantage", **WINDOW))
    s.add_history(hist)
    plan = s.plan_step(pool, budget=40.0)
    first = plan.request({"syn-fast": 1})
    (cand,) = first["syn-fast"]
    assert plan.committed > 0
    plan.abandon(cand.key, "syn-fast")
    assert plan.committed == 0
    again = plan.request({"syn-fast": 100})
    assert cand.key not in {c.key for c in again["syn-fast"]}
    assert len(again["syn-fast"]) == 7
