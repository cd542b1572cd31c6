"""The escalation rule: budget, cache, exactness, infinite budget, objectives, caps, lab requests."""

from __future__ import annotations

import math

import numpy as np
import pytest

from storage.records import Status
from verifiers.base import Candidate
from verifiers.scheduler import Observation, Scheduler, SchedulerConfig, TierCaps

WINDOW = {"target_low": 3.0, "target_high": 4.0}


def _history(ladder, keys):
    values = [{v.name: v.values[k] for v in ladder} for k in keys]
    return [Observation(k, np.zeros(0), vals) for k, vals in zip(keys, values)]


def _setup(ladder_factory, pool_factory, n=120, history=150, seed=0, **ladder_kw):
    pool, truth = pool_factory(n, seed=seed)
    hist_pool, hist_truth = pool_factory(history, seed=seed + 100, prefix="h")
    ladder = ladder_factory({**truth, **hist_truth}, seed=seed, **ladder_kw)
    return pool, truth, ladder, _history(ladder, list(hist_truth))


def _pairs(result):
    return {(v.candidate_key, v.verifier) for v in result.verdicts}


@pytest.mark.parametrize("objective", ["discovery", "advantage"])
@pytest.mark.parametrize("budget", [0.5, 3.0, 25.0, 80.0])
def test_never_exceeds_the_budget(ladder_factory, pool_factory, objective, budget) -> None:
    pool, _, ladder, hist = _setup(ladder_factory, pool_factory)
    s = Scheduler(ladder, SchedulerConfig(objective=objective, **WINDOW))
    s.add_history(hist)
    groups = [f"g{i // 8}" for i in range(len(pool))]
    result = s.run_step(pool, group_ids=groups, budget=budget)
    assert result.total_spend <= budget + 1e-9
    assert result.total_spend == pytest.approx(sum(v.cost_s for v in result.verdicts))
    assert len(result.estimates) == len(pool)


def test_budget_defaults_to_the_smaller_of_step_and_run_left(ladder_factory, pool_factory) -> None:
    pool, _, ladder, hist = _setup(ladder_factory, pool_factory)
    s = Scheduler(ladder, SchedulerConfig(budget_per_step=40.0, budget_per_run=50.0, **WINDOW))
    s.add_history(hist)
    first = s.run_step(pool)
    assert first.total_spend <= 40.0 + 1e-9
    second = s.run_step(pool, cached=first.verdicts)
    assert first.total_spend + second.total_spend <= 50.0 + 1e-9


def test_never_repays_a_cached_verdict(ladder_factory, pool_factory) -> None:
    pool, _, ladder, hist = _setup(ladder_factory, pool_factory)
    s = Scheduler(ladder, SchedulerConfig(**WINDOW))
    s.add_history(hist)
    first = s.run_step(pool, budget=60.0)
    for v in ladder:
        v.calls.clear()
    second = s.run_step(pool, cached=first.verdicts, budget=60.0)
    asked = {(k, v.name) for v in ladder for k in v.calls}
    assert not asked & _pairs(first)
    assert ladder[0].calls == []  # the fast tier was cached for everyone
    # A cached verdict counts as observed: the posterior of a cached top value is exact.
    top_keys = [v.candidate_key for v in first.verdicts if v.verifier == ladder[-1].name]
    assert top_keys and all(second.posteriors[k][1] == 0.0 for k in top_keys)


def test_cached_verdicts_of_another_version_are_not_used(ladder_factory, pool_factory) -> None:
    pool, _, ladder, _ = _setup(ladder_factory, pool_factory, n=10)
    stale = [v.model_copy(update={"version": "0"}) for v in ladder[0].verify_batch(pool)]
    ladder[0].calls.clear()
    Scheduler(ladder, SchedulerConfig(policy="fast-only", **WINDOW)).run_step(pool, cached=stale)
    assert sorted(ladder[0].calls) == sorted(c.key for c in pool)


def test_exact_fast_tier_escalates_nothing(ladder_factory, pool_factory) -> None:
    pool, _, ladder, hist = _setup(ladder_factory, pool_factory, fast_noise=0.0, fast_slope=1.0, fast_offset=0.0)
    for objective in ("discovery", "advantage"):
        s = Scheduler(ladder, SchedulerConfig(objective=objective, **WINDOW))
        s.add_history(hist)
        result = s.run_step(pool, group_ids=[f"g{i // 8}" for i in range(len(pool))], budget=1e6)
        assert {v.verifier for v in result.verdicts} == {ladder[0].name}
        assert all(e.std < 1e-6 for e in result.estimates)


def test_infinite_budget_equals_all(ladder_factory, pool_factory) -> None:
    pool, _, ladder, hist = _setup(ladder_factory, pool_factory, n=60)
    runs = {}
    for policy in ("voi", "all"):
        s = Scheduler(ladder, SchedulerConfig(policy=policy, **WINDOW))
        s.add_history(hist)
        runs[policy] = s.run_step(pool, budget=math.inf)
    assert _pairs(runs["voi"]) == _pairs(runs["all"])
    assert len(_pairs(runs["all"])) == 3 * len(pool)
    assert runs["voi"].total_spend == pytest.approx(runs["all"].total_spend)


def test_discovery_finds_more_hits_than_random_at_the_same_budget(ladder_factory, pool_factory) -> None:
    pool, truth, ladder, hist = _setup(ladder_factory, pool_factory, n=300)
    found = {}
    for policy in ("voi", "random"):
        s = Scheduler(ladder, SchedulerConfig(policy=policy, seed=1, **WINDOW))
        s.add_history(hist)
        result = s.run_step(pool, budget=150.0)
        found[policy] = sum(
            1 for v in result.verdicts if v.verifier == ladder[-1].name and 3.0 <= truth[v.candidate_key] <= 4.0
        )
    assert found["voi"] >= 2 * max(found["random"], 1)


def test_advantage_leaves_groups_of_clear_misses_alone(ladder_factory) -> None:
    # Group "bad": far above the window. Group "edge": around its upper edge.
    truth = {f"bad{i}": 9.0 + 0.3 * i for i in range(8)} | {f"edge{i}": 3.6 + 0.1 * i for i in range(8)}
    hist_rng = np.random.default_rng(0)
    hist_truth = {f"h{i}": float(hist_rng.normal(5.0, 1.5)) for i in range(200)}
    ladder = ladder_factory({**truth, **hist_truth})
    s = Scheduler(ladder, SchedulerConfig(objective="advantage", window_softness=0.2, **WINDOW))
    s.add_history(_history(ladder, list(hist_truth)))
    pool = [Candidate(key=k, suite="syn", payload=k) for k in truth]
    result = s.run_step(pool, group_ids=[k.rstrip("0123456789") for k in truth], budget=60.0)
    escalated = {v.candidate_key for v in result.verdicts if v.verifier != ladder[0].name}
    assert escalated and all(k.startswith("edge") for k in escalated)


def test_singleton_groups_are_not_worth_escalating_for_advantages(ladder_factory, pool_factory) -> None:
    pool, _, ladder, hist = _setup(ladder_factory, pool_factory, n=30)
    s = Scheduler(ladder, SchedulerConfig(objective="advantage", **WINDOW))
    s.add_history(hist)
    result = s.run_step(pool, group_ids=[c.key for c in pool], budget=100.0)
    assert {v.verifier for v in result.verdicts} == {ladder[0].name}


def test_caps_per_step_and_per_round(ladder_factory, pool_factory) -> None:
    pool, _, ladder, hist = _setup(ladder_factory, pool_factory)
    top = ladder[-1].name
    config = SchedulerConfig(policy="all", caps={top: TierCaps(max_calls_per_step=5, max_concurrency=2), "simulation": TierCaps(max_concurrency=7)}, **WINDOW)
    s = Scheduler(ladder, config)
    plan = s.plan_step(pool)
    top_calls = 0
    while requests := plan.next_round():
        assert len(requests.get(top, [])) <= 2
        assert len(requests.get(ladder[1].name, [])) <= 7
        top_calls += len(requests.get(top, []))
        for name, batch in requests.items():
            plan.observe(s.verifier(name).verify_batch(batch))
    assert top_calls == 5


def test_lab_requests_are_queued_not_awaited(ladder_factory, pool_factory) -> None:
    pool, _, ladder, hist = _setup(ladder_factory, pool_factory, n=40, top_pending=True)
    s = Scheduler(ladder, SchedulerConfig(**WINDOW))
    s.add_history([Observation(o.key, o.features, {k: v for k, v in o.values.items()}) for o in hist])
    result = s.run_step(pool, budget=80.0)
    pending = [v for v in result.verdicts if v.status == Status.pending]
    assert pending and len(result.lab_requests) == len(pending)
    assert {r.id for r in result.lab_requests} == {v.request_id for v in pending}
    by_key = {e.trajectory_id: e for e in result.estimates}
    for v in pending:  # the estimate stays at the lower tier's fidelity, with its uncertainty
        assert by_key[v.candidate_key].fidelity.value in ("fast", "simulation")
        assert by_key[v.candidate_key].std > 0
    # The next step does not ask again for what is pending.
    ladder[-1].calls.clear()
    s.run_step(pool, cached=result.verdicts, budget=80.0)
    assert not set(ladder[-1].calls) & {v.candidate_key for v in pending}


def test_invalid_candidates_get_the_invalid_reward_and_no_escalation(ladder_factory, pool_factory) -> None:
    pool, truth, ladder, hist = _setup(ladder_factory, pool_factory, n=20)
    bad = Candidate(key=pool[0].key, suite="syn", payload="invalid")
    s = Scheduler(ladder, SchedulerConfig(policy="all", invalid_reward=-1.0, **WINDOW))
    result = s.run_step([bad, *pool[1:]], budget=math.inf)
    assert [v.verifier for v in result.verdicts if v.candidate_key == bad.key] == [ladder[0].name]
    est = result.estimates[0]
    assert (est.mean, est.std, est.invalid, est.value_mean, est.components) == (-1.0, 0.0, True, None, {})


def test_trajectories_sharing_a_key_share_verdicts(ladder_factory, pool_factory) -> None:
    pool, _, ladder, _ = _setup(ladder_factory, pool_factory, n=5)
    s = Scheduler(ladder, SchedulerConfig(policy="all", **WINDOW))
    result = s.run_step([*pool, pool[0]], trajectory_ids=[f"t{i}" for i in range(6)], budget=math.inf)
    assert len(result.verdicts) == 3 * 5
    assert result.estimates[0].mean == result.estimates[5].mean
    assert result.verdicts_used["t0"] == result.verdicts_used["t5"]
    assert result.estimates[0].fidelity.value == "high_fidelity"


def test_observe_rejects_verdicts_that_were_not_requested(ladder_factory, pool_factory) -> None:
    pool, _, ladder, _ = _setup(ladder_factory, pool_factory, n=5)
    plan = Scheduler(ladder, SchedulerConfig(**WINDOW)).plan_step(pool)
    plan.next_round()
    with pytest.raises(ValueError, match="not requested"):
        plan.observe(ladder[-1].verify_batch(pool[:1]))


def test_decision_log_and_spend_per_tier(ladder_factory, pool_factory) -> None:
    pool, _, ladder, hist = _setup(ladder_factory, pool_factory)
    s = Scheduler(ladder, SchedulerConfig(**WINDOW))
    s.add_history(hist)
    result = s.run_step(pool, budget=50.0)
    assert len(result.decisions) == len(result.verdicts)
    assert all(d.reason for d in result.decisions)
    assert result.spend["fast"] == pytest.approx(0.01 * len(pool))
    assert sum(result.spend.values()) == pytest.approx(result.total_spend)
    records = result.spend_records("run", 0, {v.name: v.tier for v in ladder})
    assert sum(r.cost_s for r in records) == pytest.approx(result.total_spend)


def test_config_rejects_a_reversed_window() -> None:
    with pytest.raises(ValueError, match="swap"):
        SchedulerConfig(target_low=4.0, target_high=3.0)


def _learning_view(ladder, disagreement: list[float], learning_value: float):
    """Candidates with the same posterior, all with the fast and simulation tiers done (next: the top)."""
    from verifiers.scheduler.escalation import PlanView

    n = len(disagreement)
    cands = [Candidate(key=f"k{i}", suite="syn", payload=f"k{i}") for i in range(n)]
    return PlanView(
        round=1, keys=[c.key for c in cands], candidates=cands, ladder=ladder,
        level=np.full(n, 1), open=np.ones(n, dtype=bool),
        mean=np.full(n, 4.3), std=np.full(n, 0.4), tail_rate=np.zeros(n), tail_scale=np.ones(n),
        next_std=np.zeros(n), cost=np.tile([0.01, 0.5, 10.0], (n, 1)),
        values=[{} for _ in range(n)], exact={}, groups=[list(range(n))], budget_left=10.0,
        config=SchedulerConfig(learning_value=learning_value, **WINDOW),
        disagreement=np.array(disagreement),
    )


def test_an_answer_where_the_ensemble_disagrees_is_worth_more(ladder_factory) -> None:
    from verifiers.scheduler.policies.voi import VoiPolicy

    ladder = ladder_factory({"k0": 4.0, "k1": 4.0})
    view = _learning_view(ladder, [0.3, 0.02], learning_value=0.5)
    rates = {a.index: a.value_per_cost for a in VoiPolicy().escalate(view)}
    assert set(rates) == {0, 1}  # both are worth the top tier (the budget buys one of them)
    assert rates[0] > 1.2 * rates[1]  # identical posteriors: only what the answer teaches differs
    exploit = {a.index: a.value_per_cost for a in VoiPolicy().escalate(_learning_view(ladder, [0.3, 0.02], learning_value=0.0))}
    assert exploit[0] == pytest.approx(exploit[1])  # pure exploitation ignores the disagreement
    assert exploit[0] == pytest.approx(rates[1], rel=0.02)  # and agreement adds (almost) nothing
