"""benchmarks/replay.py: the retrieval and advantage benchmarks run end to end on small pools of synthetic ladders."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from verifiers.base import Candidate
from verifiers.scheduler import Observation
from benchmarks.replay import advantage_benchmark, replay_ladder, retrieval_benchmark


def _data(ladder_factory, pool_factory, n=300, history=300):
    pool, truth = pool_factory(n, seed=11)
    _, hist_truth = pool_factory(history, seed=12, prefix="h")
    ladder = ladder_factory({**truth, **hist_truth}, seed=5)
    held_out = [Observation(k, np.zeros(0), {v.name: v.values[k] for v in ladder}) for k in hist_truth]
    return pool, truth, ladder, held_out


def test_retrieval_benchmark_reports_costs_and_ratios(ladder_factory, pool_factory) -> None:
    pool, truth, ladder, held_out = _data(ladder_factory, pool_factory)
    report = retrieval_benchmark(
        ladder, pool, truth, held_out, low=3.0, high=4.0,
        policies=["voi", "all", "cascade", "random", "oracle"], featurize=None, step_budget=50.0,
        cascade_keeps=(0.9, 1.0), cascade_margins=(0.0, 0.5),
    )
    json.dumps(report)  # serialisable as is
    pols = report["policies"]
    assert {"voi", "all", "cascade", "random", "oracle"} <= set(pols)
    for row in pols.values():
        assert set(row["cost_to_recall"]) == set(row["ratio_to_oracle"]) == {"0.5", "0.8", "0.95"}
    assert pols["oracle"]["ratio_to_oracle"] == {"0.5": 1.0, "0.8": 1.0, "0.95": 1.0}
    hits = report["hits"]
    assert pols["oracle"]["cost_to_recall"]["0.8"] == pytest.approx(10.0 * math.ceil(0.8 * hits))
    assert pols["all"]["final_recall"] == 1.0
    # On a noisy-but-informative synthetic ladder, voi beats all and random at 80% recall.
    assert pols["voi"]["cost_to_recall"]["0.8"] < 0.5 * pols["all"]["cost_to_recall"]["0.8"]
    assert pols["voi"]["cost_to_recall"]["0.8"] < pols["random"]["cost_to_recall"]["0.8"]
    assert report["curves"]["voi"]["recall"][-1] >= 0.95


def test_replay_ladder_keeps_identity_and_charges_the_top_cost(ladder_factory, pool_factory) -> None:
    pool, truth, ladder, _ = _data(ladder_factory, pool_factory, n=20, history=0)
    tables = [{v.candidate_key: v for v in verifier.verify_batch(pool)} for verifier in ladder]
    replay = replay_ladder(ladder, tables, pool, top_cost=42.0)
    assert [(r.name, r.version, r.params_hash) for r in replay] == [(v.name, v.version, v.params_hash) for v in ladder]
    out = replay[-1].verify_batch(pool[:3])
    assert [v.cost_s for v in out] == [42.0] * 3 and replay[-1].expected_cost(pool[0]) == 42.0
    missing = replay[0].verify_batch([Candidate(key="nope", suite="syn", payload="nope")])
    assert missing[0].status.value == "failed"


def test_advantage_benchmark_compares_policies_per_spend(ladder_factory, pool_factory) -> None:
    pool, truth, ladder, held_out = _data(ladder_factory, pool_factory, n=160)
    groups = [pool[i : i + 8] for i in range(0, 160, 8)]
    report = advantage_benchmark(
        ladder, groups, truth, held_out, low=3.0, high=4.0, softness=0.25,
        policies=["voi", "random", "all"], budget_fractions=[0.1, 0.33], featurize=None,
    )
    rows = report["policies"]
    assert rows["all"][0]["spearman"] == pytest.approx(1.0) and rows["all"][0]["rmse"] == pytest.approx(0.0)
    for name in ("voi", "random"):
        assert [r["budget_fraction"] for r in rows[name]] == [0.1, 0.33]
        assert all(r["spend_fraction"] <= r["budget_fraction"] + 1e-9 for r in rows[name])
    voi, rnd = rows["voi"][-1], rows["random"][-1]
    assert voi["rmse"] < rnd["rmse"]


def test_day_one_takes_surrogate_settings_for_an_ablation() -> None:
    from benchmarks.scheduler_day_one import _surrogate_prior

    assert _surrogate_prior([]) is None  # the default surrogate
    prior = _surrogate_prior(["shift_widen=0", "blend_min_pairs=1000000"])
    assert prior.shift_widen == 0.0 and prior.blend_min_pairs == 1_000_000 and prior.shift_cap == 4.0
    with pytest.raises(SystemExit, match="FIELD one of .*shift_widen"):
        _surrogate_prior(["shift_width=0"])
    with pytest.raises(SystemExit, match="shift_widen .*greater than or equal to 0"):
        _surrogate_prior(["shift_widen=-1"])
