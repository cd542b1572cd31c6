"""benchmarks/baselines.py: the oracle and the tuned cascade behind the scheduler interface, under the same budget rules."""

from __future__ import annotations

import math

import pytest

from benchmarks.baselines import CascadePolicy, OraclePolicy
from verifiers.scheduler import Scheduler, SchedulerConfig
from tests.helpers.synthetic_ladder import ladder_and_pool, verified_by_tier

WINDOW = {"target_low": 3.0, "target_high": 4.0}


def test_cascade_is_tuned_on_the_held_out_split_and_obeys_its_thresholds() -> None:
    pool, truth, ladder, held_out = ladder_and_pool()
    names = [v.name for v in ladder]
    loose = CascadePolicy.tune(held_out, names[:-1], names[-1], 3.0, 4.0, keep=1.0)
    tight = CascadePolicy.tune(held_out, names[:-1], names[-1], 3.0, 4.0, keep=0.8)
    for name in names[:-1]:
        (lo_t, hi_t), (lo_l, hi_l) = tight.thresholds[name], loose.thresholds[name]
        assert lo_l <= lo_t < hi_t <= hi_l
    # keep=1.0 passes every held-out hit through every tier.
    for o in held_out:
        if 3.0 <= o.values[names[-1]] <= 4.0:
            assert all(loose.thresholds[n][0] <= o.values[n] <= loose.thresholds[n][1] for n in names[:-1])
    result = Scheduler(ladder, SchedulerConfig(**WINDOW), policy=tight).run_step(pool)
    tiers = verified_by_tier(result, ladder)
    lo, hi = tight.thresholds[names[0]]
    assert tiers[names[1]] == {k for k in tiers[names[0]] if lo <= ladder[0].values[k] <= hi}
    lo, hi = tight.thresholds[names[1]]
    assert tiers[names[2]] == {k for k in tiers[names[1]] if lo <= ladder[1].values[k] <= hi}
    assert 0 < len(tiers[names[2]]) < len(pool)


def test_cascade_needs_hits_in_the_held_out_split() -> None:
    _, _, ladder, held_out = ladder_and_pool()
    names = [v.name for v in ladder]
    with pytest.raises(ValueError, match="no hits"):
        CascadePolicy.tune(held_out, names[:-1], names[-1], 30.0, 40.0)


def test_oracle_asks_the_top_tier_about_true_hits_only() -> None:
    pool, truth, ladder, _ = ladder_and_pool()
    config = SchedulerConfig(**WINDOW)
    oracle = OraclePolicy(truth, config)
    result = Scheduler(ladder, config, policy=oracle).run_step(pool, budget=math.inf)
    tiers = verified_by_tier(result, ladder)
    hits = {k for k, y in truth.items() if 3.0 <= y <= 4.0}
    assert hits and tiers[ladder[-1].name] == hits
    assert not tiers[ladder[0].name] and not tiers[ladder[1].name]
    assert result.total_spend == pytest.approx(10.0 * len(hits))
