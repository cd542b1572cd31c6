"""The built-in baseline policies (all, fast-only, random) behind the scheduler interface, and the registry, which
knows nothing of the benchmarks' baselines (oracle, cascade: tests/benchmarks/test_scheduler_baselines.py)."""

from __future__ import annotations

import pytest

from verifiers.scheduler import Scheduler, SchedulerConfig, make_policy
from tests.helpers.synthetic_ladder import ladder_and_pool, verified_by_tier

WINDOW = {"target_low": 3.0, "target_high": 4.0}


def test_all_sends_every_candidate_through_every_tier() -> None:
    pool, _, ladder, _ = ladder_and_pool()
    result = Scheduler(ladder, SchedulerConfig(policy="all", **WINDOW)).run_step(pool)
    keys = {c.key for c in pool}
    assert all(got == keys for got in verified_by_tier(result, ladder).values())
    assert result.rounds == 4  # fast, sim, top, then nothing left
    assert all(e.fidelity.value == "high_fidelity" and e.std == 0.0 for e in result.estimates)


def test_fast_only_stops_at_the_fast_tier() -> None:
    pool, _, ladder, _ = ladder_and_pool()
    result = Scheduler(ladder, SchedulerConfig(policy="fast-only", **WINDOW)).run_step(pool)
    tiers = verified_by_tier(result, ladder)
    assert tiers[ladder[0].name] == {c.key for c in pool}
    assert not tiers[ladder[1].name] and not tiers[ladder[2].name]
    assert all(e.fidelity.value == "fast" and e.std > 0 for e in result.estimates)


def test_random_spends_the_same_budget_reproducibly() -> None:
    pool, _, ladder, _ = ladder_and_pool()
    picks = []
    for seed in (1, 1, 2):
        result = Scheduler(ladder, SchedulerConfig(policy="random", seed=seed, **WINDOW)).run_step(pool, budget=60.0)
        assert result.total_spend <= 60.0 + 1e-9
        assert result.total_spend > 60.0 - 10.0  # it keeps buying until the next call would not fit
        picks.append({(v.candidate_key, v.verifier) for v in result.verdicts})
    assert picks[0] == picks[1] and picks[0] != picks[2]


def test_the_benchmark_baselines_are_not_scheduler_policies_a_config_can_name() -> None:
    """oracle and cascade need the truth: the benchmarks pass them as instances; to a config they are unknown names."""
    from pydantic import ValidationError

    for name in ("oracle", "cascade"):
        with pytest.raises(ValidationError, match=f"unknown scheduler policy '{name}'; known: all, fast-only, random, voi"):
            SchedulerConfig(policy=name)
        with pytest.raises(ValueError, match=f"unknown scheduler policy '{name}'"):
            make_policy(name, SchedulerConfig())
    with pytest.raises(ValueError, match="unknown scheduler policy 'greedy'; known: all, fast-only, random, voi$"):
        make_policy("greedy", SchedulerConfig())


def test_a_policy_is_one_registered_class_and_configs_know_it_by_name() -> None:
    """Adding a policy is one file: a class with a name and @register_policy; the config then accepts the name."""
    from pydantic import ValidationError

    from verifiers.scheduler import Action, EscalationPolicy, PlanView, policy_names, register_policy
    from verifiers.scheduler.policies import _POLICIES

    with pytest.raises(ValidationError, match="unknown scheduler policy 'cheapest-first'; known: all, fast-only"):
        SchedulerConfig(policy="cheapest-first")

    @register_policy
    class CheapestFirst(EscalationPolicy):
        name = "cheapest-first"

        def escalate(self, view: PlanView) -> list[Action]:
            nxt = view.next_tier()
            return [Action(int(i), int(nxt[i]), None, "cheapest first") for i in nxt.argsort() if nxt[i] >= 0]

    try:
        assert "cheapest-first" in policy_names()
        config = SchedulerConfig(policy="cheapest-first")
        assert isinstance(make_policy(config.policy, config), CheapestFirst)
    finally:
        _POLICIES.pop("cheapest-first")


def test_a_run_config_naming_a_benchmark_baseline_fails_in_one_line(tmp_path) -> None:  # noqa: ANN001
    from arl_flows.config import ConfigError, load_config

    path = tmp_path / "run.toml"
    path.write_text('[scheduler]\npolicy = "oracle"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "\n" not in message
    assert "scheduler.policy: unknown scheduler policy 'oracle'" in message
    assert message.endswith("known: all, fast-only, random, voi")
