"""Faults inside verifiers cost the faulted candidate only; the batch, the pool and the step go on.

Each test wraps a real isolated verifier in :class:`tests.helpers.faults.FaultInjectingVerifier`,
runs a batch, and checks against a clean run of the same verifier:

- every candidate the plan faulted has a ``failed`` or ``timeout`` verdict with the reason;
- every other candidate has exactly the clean verdict (status, value, values, feedback);
- the pool recovered: at most ``workers`` workers alive, workers replaced only after
  a crash or a hang, the next batch runs on the surviving workers, and no child process
  remains after ``close``.
"""

from __future__ import annotations

import collections
import math

import psutil
import pytest
from tests.helpers.fault_targets import ExactMassVerifier

from arl_flows.suites.molecules.datasets import load_qm9_gaps
from storage.records import Status, Tier
from verifiers.base import Candidate
from arl_flows.suites.molecules import (
    EHTGapVerifier,
    InvalidMolecule,
    ReferenceTableVerifier,
    XTBGapVerifier,
    check_molecule,
    make_candidate,
)
from tests.helpers.faults import FAULT_KINDS, MALFORMED_KINDS, FaultInjectingVerifier, FaultPlan
from verifiers.isolation import IsolatedVerifier
from arl_flows.suites.molecules.features import molecule_features
from verifiers.scheduler import Scheduler, SchedulerConfig

# A hang is killed after this long. The wrapped work takes milliseconds
# (exact mass: well under 1 ms; xTB: ~15 ms), so a healthy call never comes
# near it even on a loaded machine; 200 hangs on two workers cost
# 200 * 1.0 / 2 = 100 s of the 2,000-candidate test.
HANG_TIMEOUT_S = 1.0
XTB_TIMEOUT_S = 1.5
TEN_PERCENT_EACH = {kind: 0.10 for kind in FAULT_KINDS}

# What each fault kind must read like in the verdict's feedback.
EXPECTED = {
    "raise": (Status.failed, "InjectedFault: injected fault for"),
    "abort": (Status.failed, "worker died with signal SIGABRT"),
    "oom": (Status.failed, "out of memory"),
    "hang": (Status.timeout, "no answer within"),  # "no answer within 1 s; worker killed"
}
MALFORMED_FEEDBACK = ("bad result:", "cannot send result back:")


def _molecules(n: int, start: int = 0) -> list[Candidate]:
    """``n`` distinct QM9 molecules that pass the suite's constraints (distinct candidate keys)."""
    out: dict[str, Candidate] = {}
    for smiles, _ in load_qm9_gaps()[start:]:
        c = make_candidate(smiles)
        try:
            check_molecule(smiles)
        except InvalidMolecule:
            continue
        if c.key not in out:
            out[c.key] = c
            if len(out) == n:
                break
    return list(out.values())


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _comparable(v):  # noqa: ANN001, ANN202 - the verdict without what differs between two runs
    return v.model_dump(exclude={"id", "cost_s", "wall_s", "created_at"})


def _check_faulted_batch(make_inner, candidates: list[Candidate], plan: FaultPlan, workers: int) -> dict[str, int]:  # noqa: ANN001
    """Run clean and faulted; assert the contract of the module docstring; return faults by kind."""
    before = _children()
    with make_inner() as clean:
        expected = clean.verify_batch(candidates)
    assert all(v.status == Status.ok for v in expected), "the clean run must verify every candidate"

    faulty = FaultInjectingVerifier(make_inner(), plan)
    try:
        verdicts = faulty.verify_batch(candidates)
        assert len(verdicts) == len(candidates)
        counts = collections.Counter(faulty.injected.values())
        for c, v, clean_v in zip(candidates, verdicts, expected, strict=True):
            assert v.candidate_key == c.key
            assert (v.verifier, v.version, v.params_hash, v.tier) == (clean_v.verifier, clean_v.version, clean_v.params_hash, clean_v.tier)
            fault = faulty.injected[c.key]
            if fault is None:
                assert _comparable(v) == _comparable(clean_v), f"unfaulted candidate {c.key} was affected"
            elif fault == "malformed":
                assert v.status == Status.failed and v.value is None, (c.key, plan.malformed_for(c.key), v)
                assert v.feedback.startswith(MALFORMED_FEEDBACK), v.feedback
            else:
                status, reason = EXPECTED[fault]
                assert v.status == status and v.value is None, (c.key, fault, v)
                assert reason in v.feedback, (fault, v.feedback)

        # The pool recovered and reused its workers.
        live = faulty.pool.worker_pids
        assert 1 <= len(live) <= workers
        assert all(psutil.pid_exists(pid) for pid in live)
        assert _children() - before == set(live), "only the idle workers may be alive between batches"
        # A worker is replaced only after it crashed or hung, never after an exception,
        # a MemoryError or a malformed result.
        assert len(faulty.worker_pids) <= workers + counts["abort"] + counts["hang"]
        # The next batch (candidates the plan leaves alone) runs on the surviving workers.
        more = [c for c in _molecules(300, start=len(candidates) * 3) if plan.fault_for(c.key) is None][:6]
        seen = set(faulty.worker_pids)
        faulty.worker_pids.clear()
        again = faulty.verify_batch(more)
        assert all(v.status == Status.ok for v in again)
        # Survivors are reused; new workers only fill the pool up to its size (workers start lazily).
        assert faulty.worker_pids & set(live), (faulty.worker_pids, live)
        assert len(faulty.worker_pids - set(live)) <= workers - len(live), (faulty.worker_pids, live)
        assert not faulty.worker_pids & (seen - set(live)), "a replaced worker came back"

    finally:
        faulty.close()
    assert _children() - before == set(), "worker processes left behind after close()"
    return dict(counts)


def _exact_mass() -> IsolatedVerifier:
    return ExactMassVerifier({"workers": 2, "threads": 1, "timeout_s": HANG_TIMEOUT_S, "memory_mb": 1024})


def _xtb() -> IsolatedVerifier:
    return XTBGapVerifier({"workers": 2, "threads": 1, "timeout_s": XTB_TIMEOUT_S, "memory_mb": 1024})


def test_plan_is_deterministic_and_hits_the_asked_fractions() -> None:
    keys = [f"molecules:k{i}" for i in range(20_000)]
    plan = FaultPlan(fractions=TEN_PERCENT_EACH, seed=3)
    faults = [plan.fault_for(k) for k in keys]
    assert faults == [FaultPlan(fractions=TEN_PERCENT_EACH, seed=3).fault_for(k) for k in keys]
    counts = collections.Counter(faults)
    for kind in FAULT_KINDS:
        assert counts[kind] / len(keys) == pytest.approx(0.10, abs=0.01)
    assert faults != [FaultPlan(fractions=TEN_PERCENT_EACH, seed=4).fault_for(k) for k in keys]
    assert set(collections.Counter(plan.malformed_for(k) for k in keys)) == set(MALFORMED_KINDS)
    assert {FaultPlan(fractions={"raise": 1.0}).fault_for(k) for k in keys} == {"raise"}


@pytest.mark.parametrize("fractions", [{"raise": 1.5}, {"hang": -0.1}, {"raise": 0.6, "abort": 0.6}])
def test_plan_rejects_impossible_fractions(fractions: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="fraction"):
        FaultPlan(fractions=fractions)


def test_oom_fault_needs_a_memory_limit() -> None:
    with pytest.raises(ValueError, match="memory limit"):
        FaultInjectingVerifier(ExactMassVerifier({"memory_mb": None}), {"fractions": {"oom": 0.1}})


def test_wrapper_keeps_the_wrapped_identity() -> None:
    inner = _xtb()
    faulty = FaultInjectingVerifier(inner, {"fractions": {"raise": 0.5}})
    assert (faulty.name, faulty.tier, faulty.version, faulty.params_hash) == (
        inner.name, inner.tier, inner.version, inner.params_hash,
    )
    c = make_candidate("CCO")
    assert faulty.expected_cost(c) == inner.expected_cost(c)


def test_invalid_candidates_are_never_faulted() -> None:
    cands = [make_candidate("C1CC"), make_candidate("CN(C)(C)(C)C")]
    with FaultInjectingVerifier(_exact_mass(), {"fractions": {"abort": 1.0}}) as faulty:
        verdicts = faulty.verify_batch(cands)
        assert [v.status for v in verdicts] == [Status.invalid, Status.invalid]
        assert faulty.injected == {} and faulty.pool.worker_pids == []


@pytest.mark.slow  # 31 s on 2 loaded cores, about 15 s idle
def test_ten_percent_of_each_fault_small_batch() -> None:
    counts = _check_faulted_batch(_exact_mass, _molecules(100), FaultPlan(fractions=TEN_PERCENT_EACH, seed=0), workers=2)
    assert set(counts) == {None, *FAULT_KINDS}, counts  # every kind really happened


@pytest.mark.slow  # 60 s on 2 loaded cores, about 30 s idle
def test_ten_percent_of_each_fault_on_the_real_xtb_tier() -> None:
    plan = FaultPlan(fractions=TEN_PERCENT_EACH, seed=5)  # every malformed kind, NaN included
    counts = _check_faulted_batch(_xtb, _molecules(30, start=200), plan, workers=2)
    assert set(counts) == {None, *FAULT_KINDS}, counts


@pytest.mark.slow  # 12 s on 2 loaded cores, about 6 s idle
def test_nan_result_of_xtb_is_a_failed_verdict() -> None:
    cands = _molecules(3, start=400)
    with FaultInjectingVerifier(_xtb(), {"fractions": {"malformed": 1.0}, "malformed": ["nan"]}) as faulty:
        verdicts = faulty.verify_batch(cands)
    assert all(v.status == Status.failed and v.value is None for v in verdicts), [(v.status, v.value) for v in verdicts]
    assert all(v.feedback == "bad result: value is nan: input should be a finite number" for v in verdicts), verdicts


@pytest.mark.soak
def test_ten_percent_of_each_fault_across_2000_candidates() -> None:
    counts = _check_faulted_batch(_exact_mass, _molecules(2000), FaultPlan(fractions=TEN_PERCENT_EACH, seed=1), workers=2)
    print(f"\nfaults injected across 2000 candidates: {counts}")
    for kind in FAULT_KINDS:
        assert 150 <= counts[kind] <= 250, counts  # 10% of 2000, give or take the hash's spread


# --------------------------------------------------------------------------
# A dead tier in a scheduler step
# --------------------------------------------------------------------------


@pytest.mark.slow  # 15 s on 2 loaded cores, about 7 s idle
def test_scheduler_step_survives_a_simulation_tier_that_always_fails() -> None:
    goal = {"property": "gap_ev", "low": 6.0, "high": 8.0}
    cands = [make_candidate(c.payload, goal=goal) for c in _molecules(24, start=100)]
    cands += [make_candidate("C1CC", goal=goal), make_candidate("xyz", goal=goal)]
    groups = [f"g{i // 8}" for i in range(len(cands))]
    dead = FaultInjectingVerifier(_xtb(), {"fractions": {"raise": 1.0}})
    fast, top = EHTGapVerifier(), ReferenceTableVerifier()
    try:
        for budget in (math.inf, 2000.0):  # everything affordable; the top tier for a few only
            s = Scheduler([fast, dead, top], SchedulerConfig(target_low=6.0, target_high=8.0), featurize=molecule_features)
            result = s.run_step(cands, group_ids=groups, budget=budget)
            assert len(result.estimates) == len(cands)
            by_key = collections.defaultdict(dict)
            for v in result.verdicts:
                by_key[v.candidate_key][v.verifier] = v
            sim = [v for v in result.verdicts if v.verifier == dead.name]
            assert sim, "the scheduler never tried the simulation tier"
            assert all(v.status == Status.failed and "InjectedFault" in v.feedback for v in sim)
            for c, est in zip(cands, result.estimates, strict=True):
                # Estimates rest on the tiers that work: never on the dead one.
                assert est.fidelity in (None, Tier.fast, Tier.lab), est
                assert math.isfinite(est.mean) and math.isfinite(est.std)
                if not c.valid:
                    assert est.fidelity is None and est.invalid and est.components == {}
                else:
                    assert by_key[c.key][fast.name].status == Status.ok
                    assert est.fidelity == (Tier.lab if top.name in by_key[c.key] else Tier.fast)
            # Never asked twice for one (candidate, dead tier) pair within the step.
            assert len({v.candidate_key for v in sim}) == len(sim)
            if budget == math.inf:
                assert {e.fidelity for e in result.estimates if e.fidelity} == {Tier.lab}
            else:
                assert result.total_spend <= budget + 1e-9
                assert Tier.fast in {e.fidelity for e in result.estimates}
        # The next step with the same scheduler probes the dead tier a few times only, then steps over it.
        step2 = s.run_step(cands, group_ids=groups, budget=math.inf)
        assert dead.name in step2.unavailable
        assert sum(1 for v in step2.verdicts if v.verifier == dead.name) <= s.config.dead_after  # probes only
        fresh = [make_candidate(c.payload, goal=goal) for c in _molecules(16, start=300)]
        step3 = s.run_step(fresh, group_ids=[f"h{i // 8}" for i in range(len(fresh))], budget=math.inf)
        assert sum(1 for v in step3.verdicts if v.verifier == dead.name) <= s.config.dead_after
        assert any("recent calls all failed" in d.reason for d in step3.decisions)
        valid = [c for c in fresh if c.valid]
        assert sum(1 for v in step3.verdicts if v.verifier == top.name) == len(valid)  # fell back to the top tier
    finally:
        dead.close()
