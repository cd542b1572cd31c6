"""The verification service over a real ledger: no round barrier, slots, budget, in-flight rows, resume, late verdicts."""

from __future__ import annotations

import math

import pytest

from arl_flows.config import load_config
from arl_flows.suites import suite_for
from arl_flows.verification_service import VerificationService
from storage.models import LabRequestRow
from storage.records import Status, Trajectory
from tests.helpers.toy_suite import ToyCluster, ToyLabVowels, ToyLength, toy_overrides
from verifiers.scheduler import Scheduler

# Valid words (so the queue answers ok) spread over vowel counts; two groups of four, one duplicate key.
WORDS = ["b", "ab", "aeb", "aeiob", "oak", "bcdfg", "eueu", "oak"]
CALL_COST = 15.0  # CPU-seconds the queue charges per call


def _config(budget=1000.0):
    """The toy suite's run config; policy 'all': every valid candidate goes to the top tier, so the queue gets each."""
    return load_config(overrides=toy_overrides(name="svc", scheduler={
        "policy": "all", "target_low": 2.0, "target_high": 3.0, "budget_per_step": budget, "budget_per_run": budget}))


def _cluster(latency, slots):
    return ToyCluster({"latency_s": latency, "slots": slots, "cost_per_call": CALL_COST})


def _setup(ledger, *, latency=0.05, slots=2, budget=1000.0):
    config = _config(budget)
    suite = suite_for(config)
    run = ledger.create_run("svc", {})
    (prompt,) = suite.prompts(0)[:1]
    ledger.add_prompts([prompt])
    trajs, cands = [], []
    for k, word in enumerate(WORDS):
        cand, answer, turns = suite.completion(prompt, word)
        cands.append(cand)
        trajs.append(Trajectory(run_id=run.id, prompt_id=prompt.id, step=0, group_id=f"g{k // 4}", turns=turns,
                                final_answer=answer, candidate_key=cand.key))
    ledger.add_trajectories(trajs)
    cluster = _cluster(latency, slots)
    sched = Scheduler([ToyLength(), cluster], config.scheduler, featurize=suite.featurize)
    return suite, run, trajs, cands, cluster, sched


def _drain(service, *, limit=2000):
    taken = []
    for _ in range(limit):
        service.pump(0.05)
        taken += service.take_settled()
        if not service.busy and len(taken) == 2:
            return taken
    raise AssertionError(f"the service did not finish: {service.stats()}")


def test_every_verdict_lands_once_within_budget_and_slots(ledger) -> None:
    suite, run, trajs, cands, cluster, sched = _setup(ledger, budget=70.0)  # 4 top calls of 15 s fit beside the fast tier (< 10 CPU-s), not 7
    service = VerificationService(ledger, sched, suite, run.id, slots={"toy-length": 4, "toy-cluster": 2})
    service.open_batch(0, trajs, cands)
    taken = _drain(service)
    service.close()
    assert sorted(g.group_id for g in taken) == ["g0", "g1"]
    assert all(math.isfinite(e.mean) for g in taken for e in g.estimates)
    keys = {c.key for c in cands}
    verdicts = ledger.verdicts_for(keys)
    assert all(v.status != Status.pending for v in verdicts)
    top = [v for v in verdicts if v.verifier == "toy-cluster"]
    assert len(top) == 4  # the budget buys four 15-second calls, no more
    assert cluster.calls == 4 and cluster.peak_in_flight <= 2
    spend = ledger.spend_by_tier(run.id)
    assert spend["high_fidelity"] == pytest.approx(4 * CALL_COST)
    assert sum(spend.values()) <= 70.0
    assert sched.run_spent == pytest.approx(sum(spend.values()))
    assert all(r.status != Status.pending for r in ledger.lab_requests(run_id=run.id))  # each in-flight row closed


def test_a_call_in_flight_at_a_crash_is_continued_not_repaid(ledger) -> None:
    suite, run, trajs, cands, cluster1, sched = _setup(ledger, latency=3600.0)
    first = VerificationService(ledger, sched, suite, run.id, slots={"toy-length": 4, "toy-cluster": 1})
    first.open_batch(0, trajs, cands)
    for _ in range(200):  # the fast tier answers; one hour-long queue call goes out
        first.pump(0.02)
        if first.in_flight["toy-cluster"] == 1 and first.in_flight["toy-length"] == 0:
            break
    (req,) = ledger.lab_requests(Status.pending, run_id=run.id)  # written before the call was sent
    (pending,) = [v for v in ledger.verdicts_for([req.candidate_key]) if v.verifier == "toy-cluster"]
    assert pending.status == Status.pending and pending.request_id == req.id
    first.close()  # the process "dies": the call never answers here
    cluster1.close()  # (and its waiting thread ends, so the test process can exit)

    # Resume: the queue job was submitted an hour ago, so it is done now; it is continued, not sent again.
    with ledger._write() as s:  # a year passes (the request's submission time moves back)
        s.get(LabRequestRow, req.id).created_at = req.created_at.replace(year=req.created_at.year - 1)
    suite2, _, _, _, cluster2, sched2 = _setup_resume(ledger, run.id)
    second = VerificationService(ledger, sched2, suite2, run.id, slots={"toy-length": 4, "toy-cluster": 1})
    _resume_and_drain(second)
    (final,) = [v for v in ledger.verdicts_for([req.candidate_key]) if v.verifier == "toy-cluster"]
    assert final.status == Status.ok and final.request_id == req.id
    assert final.wall_s < 3600.0  # it waited for no fresh latency
    assert ledger.lab_requests(Status.pending, run_id=run.id) == []
    spend = ledger.spend_by_tier(run.id)
    assert spend["high_fidelity"] == pytest.approx(CALL_COST)  # billed once, when it answered
    assert cluster2.calls == 1


def _setup_resume(ledger, run_id):
    config = _config()
    suite = suite_for(config)
    cluster = _cluster(3600.0, 1)
    sched = Scheduler([ToyLength(), cluster], config.scheduler, featurize=suite.featurize)
    return suite, None, None, None, cluster, sched


def test_groups_taken_before_their_verdicts_get_them_late(ledger) -> None:
    suite, run, trajs, cands, _, sched = _setup(ledger, latency=0.2, slots=2)
    service = VerificationService(ledger, sched, suite, run.id, slots={"toy-length": 8, "toy-cluster": 2},
                                  max_group_wait_s=0.0)
    service.open_batch(0, trajs, cands)
    taken = []
    for _ in range(50):
        service.pump(0.02)
        taken += service.take_settled()
        if taken:
            break
    assert taken  # taken at once: the cluster's verdicts are still out
    for _ in range(2000):
        service.pump(0.05)
        taken += service.take_settled()
        if not service.busy:
            break
    service.close()
    late = []
    while not service.late.empty():
        late.append(service.late.get())
    assert any(v.verdict.verifier == "toy-cluster" for v in late)  # the top tier answered after the take
    newest = {}
    for item in late:
        assert [e.trajectory_id for e in item.estimates] == [t.id for t in item.trajectories]
        if item.verdict.verifier == "toy-cluster" and item.verdict.status == Status.ok:
            assert all(e.std <= p.std for e, p in zip(item.estimates, item.previous))  # the top tier's value is known now
        newest |= {e.trajectory_id: e for e in item.estimates}
    stored = {t.id: e for t, e in ledger.step_trajectories(run.id, 0)}
    assert all(stored[k].mean == pytest.approx(e.mean) for k, e in newest.items())  # the ledger holds the latest


def test_a_computed_lab_tier_call_in_flight_at_a_crash_is_run_again_and_billed_once(ledger) -> None:
    """A tier on the lab tier that computes its answer (as a reference table does): resume runs it again, it does not
    wait for `arl lab submit`."""
    suite, run, trajs, cands, _, _ = _setup(ledger)
    _die_with_a_lab_call_out(ledger, suite, run, trajs, cands)
    (req,) = ledger.lab_requests(Status.pending, run_id=run.id)

    second = VerificationService(ledger, _lab_scheduler(suite), suite, run.id, slots=LAB_SLOTS)
    _resume_and_drain(second)
    (final,) = [v for v in ledger.verdicts_for([req.candidate_key]) if v.verifier == "toy-lab-vowels"]
    assert final.status == Status.ok and final.request_id == req.id
    assert ledger.lab_requests(Status.pending, run_id=run.id) == []  # nobody is asked to measure it by hand
    assert ledger.spend_by_tier(run.id)["lab"] == pytest.approx(5.0)


def test_a_tier_keeps_its_slots_full_and_never_more(ledger) -> None:
    """Counted, not timed: each call is held until the test lets it go; after each answer the slot is refilled."""
    import queue
    import threading

    suite, run, trajs, cands, _, sched = _setup(ledger)
    ledger.put_verdicts(ToyLength().verify_batch(cands))  # fast tier cached: every valid candidate wants the top now
    gates: queue.Queue[threading.Event] = queue.Queue()  # one per call in flight
    cluster = sched.ladder[-1]
    answer = cluster.answer

    def held(candidate, submitted_at=None):  # noqa: ANN001, ANN202
        gate = threading.Event()
        gates.put(gate)
        gate.wait(60)
        return answer(candidate, submitted_at=submitted_at)

    cluster.answer = held
    service = VerificationService(ledger, sched, suite, run.id, slots={"toy-length": 4, "toy-cluster": 3})
    service.open_batch(0, trajs, cands)
    work = len({c.key for c in cands})  # 7 distinct words, all valid: more work than slots
    in_flight = [service.in_flight["toy-cluster"]]
    for done in range(1, work + 1):
        gates.get(timeout=30).set()  # one call answers
        assert service.pump(30) == 1
        in_flight.append(service.in_flight["toy-cluster"])
    service.close()
    assert in_flight == [min(3, work - done) for done in range(work + 1)]  # full while work waits, never over
    assert cluster.calls == work and cluster.peak_in_flight <= 3


def test_groups_sampled_too_many_versions_ago_are_taken_as_they_stand(ledger) -> None:
    suite, run, trajs, cands, cluster, sched = _setup(ledger, latency=3600.0, slots=8)
    service = VerificationService(ledger, sched, suite, run.id, slots={"toy-length": 4, "toy-cluster": 8})
    service.open_batch(0, trajs, cands, policy_version=3)
    for _ in range(200):  # the fast tier answers; the hour-long cluster calls stay out
        service.pump(0.02)
        if service.in_flight["toy-cluster"] and not service.in_flight["toy-length"]:
            break
    assert service.take_settled(sampled_before=3) == []  # sampled by version 3: not behind yet, still waiting
    taken = service.take_settled(sampled_before=4)
    assert sorted(g.group_id for g in taken) == ["g0", "g1"] and all(g.policy_version == 3 for g in taken)
    assert service.take_settled(sampled_before=10) == []  # each group handed out once
    cluster.close()
    service.close()


LAB_SLOTS = {"toy-length": 4, "toy-lab-vowels": 1}


def _lab_scheduler(suite, budget: float = 1000.0) -> Scheduler:  # noqa: ANN001
    """The toy length tier, then a lab tier that computes its answer at 5 CPU-s a call."""
    ladder = [ToyLength(), ToyLabVowels({"cost_per_call": 5.0})]
    return Scheduler(ladder, _config(budget).scheduler, featurize=suite.featurize)


def _die_with_a_lab_call_out(ledger, suite, run, trajs, cands) -> None:  # noqa: ANN001
    """A service that plans the batch, then 'dies' with one lab-tier call out (its request left pending)."""
    import threading

    release = threading.Event()

    def hangs(verifier, candidate):  # noqa: ANN001, ANN202 - the process dies while this call is out
        release.wait(60)
        raise RuntimeError("the process died")

    first = VerificationService(ledger, _lab_scheduler(suite), suite, run.id, slots=LAB_SLOTS,
                                execute=lambda v, c: hangs(v, c) if v.name == "toy-lab-vowels" else v.verify_batch([c])[0])
    first.open_batch(0, trajs, cands)
    for _ in range(200):
        first.pump(0.02)
        if first.in_flight["toy-lab-vowels"] == 1 and first.in_flight["toy-length"] == 0:
            break
    first.close()
    release.set()


def _resume_and_drain(service: VerificationService) -> None:
    """Resume the one request the ledger holds in flight and pump the service until it is idle, then close it."""
    assert service.resume_in_flight() == 1
    for _ in range(200):
        service.pump(0.05)
        if not service.busy:
            break
    service.close()


def test_a_resumed_call_holds_its_cost_from_the_run_budget_until_it_lands(ledger) -> None:
    """A resumed call is in no plan: before, a resumed run bought new calls with the budget it held, and overspent."""
    import threading

    suite, run, trajs, cands, _, _ = _setup(ledger)
    _die_with_a_lab_call_out(ledger, suite, run, trajs, cands)
    hold = threading.Event()

    def held(verifier, candidate):  # noqa: ANN001, ANN202 - the resumed call stays out until the batch is planned
        if verifier.name == "toy-lab-vowels":
            hold.wait(60)
        return verifier.verify_batch([candidate])[0]

    second = VerificationService(ledger, _lab_scheduler(suite, 12.0), suite, run.id, slots=LAB_SLOTS, execute=held)
    assert second.resume_in_flight() == 1
    assert second.committed() == pytest.approx(5.0)  # held while out
    plan = second.open_batch(1, trajs, cands)
    assert plan.budget == pytest.approx(7.0)  # 12 of run budget, 5 held by the resumed call
    hold.set()
    for _ in range(400):
        second.pump(0.05)
        second.take_settled()
        if not second.busy:
            break
    second.close()
    assert ledger.spend_by_tier(run.id)["lab"] <= 12.0 + 1e-9  # the resumed call and what the 7 left could buy
    assert second.scheduler.run_spent >= 5.0  # the resumed call's cost counts once it lands


def _one_call_steps(ledger, run_budget):
    """A batch whose step budget buys one top-tier call, in a run whose budget buys more; the fast tier cached."""
    suite, run, trajs, cands, cluster, _ = _setup(ledger)
    config = load_config(overrides=toy_overrides(name="svc", scheduler={
        "policy": "all", "target_low": 2.0, "target_high": 3.0, "budget_per_step": CALL_COST + 1.0,
        "budget_per_run": run_budget}))
    sched = Scheduler([ToyLength(), cluster], config.scheduler, featurize=suite.featurize)
    ledger.put_verdicts(ToyLength().verify_batch(cands))
    return suite, run, trajs, cands, cluster, sched


@pytest.mark.parametrize("lend", [False, True])
def test_a_free_expensive_slot_is_lent_budget_instead_of_waiting_for_the_next_batch(ledger, lend) -> None:
    suite, run, trajs, cands, cluster, sched = _one_call_steps(ledger, run_budget=1000.0)
    service = VerificationService(ledger, sched, suite, run.id, slots={"toy-length": 4, "toy-cluster": 3},
                                  lend_idle_slots=lend)
    service.open_batch(0, trajs, cands)
    assert service.in_flight["toy-cluster"] == (3 if lend else 1)  # counted when sent, before any answers
    taken = _drain(service)
    service.close()
    work = len({c.key for c in cands})  # 7 distinct valid words, each worth the top tier under policy "all"
    assert cluster.calls == (work if lend else 1) and service.loans == (work - 1 if lend else 0)
    assert sorted(g.group_id for g in taken) == ["g0", "g1"]
    assert sched.run_spent == pytest.approx(sum(ledger.spend_by_tier(run.id).values()))


def test_loans_never_take_the_run_past_its_budget(ledger) -> None:
    suite, run, trajs, cands, cluster, sched = _one_call_steps(ledger, run_budget=3 * CALL_COST + 5.0)
    service = VerificationService(ledger, sched, suite, run.id, slots={"toy-length": 4, "toy-cluster": 4},
                                  lend_idle_slots=True)
    service.open_batch(0, trajs, cands)
    assert service.in_flight["toy-cluster"] == 3  # a fourth call would pass the run's budget: its slot stays free
    _drain(service)
    service.close()
    assert cluster.calls == 3 and service.loans == 2
    assert sum(ledger.spend_by_tier(run.id).values()) <= 3 * CALL_COST + 5.0
    assert service.committed_budget() == pytest.approx(sched.run_spent)  # every loan returned with its batch


def test_a_done_plan_gives_back_its_unspent_budget_for_loans(ledger) -> None:
    """Batch 0 has every top-tier verdict cached (its plan is done at once, its groups not yet taken); batch 1's step
    budget buys one call. The run's budget is two steps': without the release batch 0 would hold its whole step
    budget until the learner took its groups, and batch 1 could borrow nothing for the free slots."""
    suite, run, trajs, cands, cluster, sched = _one_call_steps(ledger, run_budget=2 * (CALL_COST + 1.0))
    ledger.put_verdicts(cluster.verify_batch(cands))  # batch 0: nothing left to buy
    words = ["abab", "eeb", "ub", "iiob"]
    cands1, trajs1 = [], []
    for k, word in enumerate(words):
        cand, answer, turns = suite.completion(suite.prompts(0)[0], word)
        cands1.append(cand)
        trajs1.append(Trajectory(run_id=run.id, prompt_id=trajs[0].prompt_id, step=1, group_id=f"h{k // 2}",
                                 turns=turns, final_answer=answer, candidate_key=cand.key))
    ledger.add_trajectories(trajs1)
    ledger.put_verdicts(ToyLength().verify_batch(cands1))
    service = VerificationService(ledger, sched, suite, run.id, slots={"toy-length": 4, "toy-cluster": 3},
                                  lend_idle_slots=True)
    service.open_batch(0, trajs, cands)
    assert service.batches[0].plan.done and service.in_flight["toy-cluster"] == 0
    service.open_batch(1, trajs1, cands1)
    # Its own call, and a second on the budget batch 0 gave back: 2 x 15 of the run's 32 CPU-s, the third slot idle.
    assert service.in_flight["toy-cluster"] == 2 and service.loans == 1
    _drain_all(service)
    service.close()
    assert sum(ledger.spend_by_tier(run.id).values()) <= 2 * (CALL_COST + 1.0)


def _drain_all(service, *, limit=2000):
    for _ in range(limit):
        service.pump(0.05)
        service.take_settled()
        if not service.busy:
            return
    raise AssertionError(f"the service did not finish: {service.stats()}")


def test_a_loan_can_draw_on_the_budget_of_a_batch_still_screening(ledger) -> None:
    """Batch 0 is still on its fast tier (its plan holds a step's budget for calls it may want later); batch 1 has its
    fast verdicts and its own budget buys one call. A free top-tier slot now is worth more than batch 0's claim: the
    loan takes it, batch 0 keeps what it has committed, and the run's budget (two steps') holds."""
    suite, run, trajs, cands, cluster, sched = _one_call_steps(ledger, run_budget=2 * (CALL_COST + 1.0))
    # _one_call_steps cached batch 0's fast tier; batch 0 here is a fresh set of words whose fast tier is not.
    words0, words1 = ["abab", "eeb", "ub", "iiob"], ["obo", "aab", "uub", "eib"]
    batches = []
    for step, words in enumerate((words0, words1)):
        cs, ts = [], []
        for k, word in enumerate(words):
            cand, answer, turns = suite.completion(suite.prompts(0)[0], word)
            cs.append(cand)
            ts.append(Trajectory(run_id=run.id, prompt_id=trajs[0].prompt_id, step=step, group_id=f"s{step}g{k // 2}",
                                 turns=turns, final_answer=answer, candidate_key=cand.key))
        ledger.add_trajectories(ts)
        batches.append((ts, cs))
    ledger.put_verdicts(ToyLength().verify_batch(batches[1][1]))
    service = VerificationService(ledger, sched, suite, run.id, slots={"toy-length": 4, "toy-cluster": 3},
                                  lend_idle_slots=True)
    service.open_batch(0, *batches[0])
    assert service.in_flight["toy-length"] == 4 and not service.batches[0].plan.done
    service.open_batch(1, *batches[1])
    assert service.in_flight["toy-cluster"] == 2 and service.loans == 1  # its own call and one on batch 0's claim
    # The loan used batch 1's own unspent 1 CPU-s first; batch 0 gave the other 14 and keeps 2.
    assert service.batches[0].plan.budget == pytest.approx(2 * (CALL_COST + 1.0) - 2 * CALL_COST, abs=0.01)
    assert service.committed_budget() <= 2 * (CALL_COST + 1.0) + 1e-9
    _drain_all(service)
    service.close()
    assert sum(ledger.spend_by_tier(run.id).values()) <= 2 * (CALL_COST + 1.0)


@pytest.mark.parametrize("budgets", [{"budget_per_step": math.inf, "budget_per_run": math.inf},
                                     {"budget_per_step": CALL_COST + 1.0, "budget_per_run": math.inf}])
def test_lending_with_no_run_budget_or_no_budget_at_all(ledger, budgets) -> None:
    """The scheduler's defaults are infinite budgets: lending must neither fail on them nor change what is bought."""
    suite, run, trajs, cands, cluster, _ = _setup(ledger)
    config = load_config(overrides=toy_overrides(name="svc", scheduler={
        "policy": "all", "target_low": 2.0, "target_high": 3.0, **budgets}))
    sched = Scheduler([ToyLength(), cluster], config.scheduler, featurize=suite.featurize)
    ledger.put_verdicts(ToyLength().verify_batch(cands))
    service = VerificationService(ledger, sched, suite, run.id, slots={"toy-length": 4, "toy-cluster": 3},
                                  lend_idle_slots=True)
    service.open_batch(0, trajs, cands)
    assert service.in_flight["toy-cluster"] == 3
    _drain(service)
    service.close()
    no_step_budget = math.isinf(budgets["budget_per_step"])
    assert cluster.calls == len({c.key for c in cands}) and service.loans == (0 if no_step_budget else 6)


def test_with_budget_carry_a_batch_gets_what_earlier_steps_left(ledger) -> None:
    """budget_carry in the async service: batch n is planned with (n + 1) step budgets less what is committed."""
    suite, run, trajs, cands, cluster, _ = _setup(ledger)
    config = load_config(overrides=toy_overrides(name="svc", scheduler={
        "policy": "all", "target_low": 2.0, "target_high": 3.0, "budget_per_step": CALL_COST + 1.0,
        "budget_per_run": 1000.0, "budget_carry": True}))
    sched = Scheduler([ToyLength(), cluster], config.scheduler, featurize=suite.featurize)
    ledger.put_verdicts(ToyLength().verify_batch(cands))
    service = VerificationService(ledger, sched, suite, run.id, slots={"toy-length": 4, "toy-cluster": 4},
                                  lend_idle_slots=False)
    plan = service.open_batch(2, trajs, cands)  # the third step, nothing spent before it: three steps' budgets
    assert plan.budget == pytest.approx(3 * (CALL_COST + 1.0))
    assert service.in_flight["toy-cluster"] == 3  # three calls fit, where one step's budget buys one
    _drain(service)
    service.close()
    assert cluster.calls == 3 and sum(ledger.spend_by_tier(run.id).values()) <= 3 * (CALL_COST + 1.0)


def _molecule_lab_service(ledger, molecules: list[str], slots: int):  # noqa: ANN001, ANN202
    """A service over the molecules suite's EHT tier and its lab tier (a LabRequester), with two molecules a group."""
    from verifiers import registry

    config = load_config(overrides={"name": "svc-lab", "tiers": [{"verifier": "rdkit-eht"}, {"verifier": "lab"}],
                                    "scheduler": {"policy": "all", "budget_per_step": 1e6, "budget_per_run": 1e6}})
    suite = suite_for(config)
    run = ledger.create_run("svc-lab", {})
    (prompt,) = suite.prompts(0)[:1]
    ledger.add_prompts([prompt])
    trajs, cands = [], []
    for k, smiles in enumerate(molecules):
        cand, answer, turns = suite.completion(prompt, smiles)
        cands.append(cand)
        trajs.append(Trajectory(run_id=run.id, prompt_id=prompt.id, step=0, group_id=f"g{k // 2}", turns=turns,
                                final_answer=answer, candidate_key=cand.key))
    ledger.add_trajectories(trajs)
    ladder = [registry.get(r.verifier)(r.params) for r in config.tiers]
    service = VerificationService(ledger, Scheduler(ladder, config.scheduler, featurize=suite.featurize), suite, run.id,
                                  slots={"rdkit-eht": slots, "lab": slots})
    return service, run, trajs, cands


def test_a_labs_request_in_an_async_run_is_one_request_for_a_person(ledger) -> None:
    """The service recorded a lab tier's call as 'in flight' under the id its lab request then took: the request a
    person must answer read as a run's own call (and `arl lab list` hides those)."""
    service, run, trajs, cands = _molecule_lab_service(ledger, ["CCO", "CCN", "CC=O", "CCC"], slots=2)
    service.open_batch(0, trajs, cands)
    _drain(service)
    service.close()
    requests = ledger.lab_requests(Status.pending, run_id=run.id)
    assert sorted(r.candidate_key for r in requests) == sorted(c.key for c in cands)  # one a molecule
    assert not any(r.in_flight for r in requests), [r.notes for r in requests]


def test_a_labs_request_is_stored_with_its_verdict_not_when_the_batch_closes(ledger) -> None:
    """A crash between a lab tier's pending verdict and its batch's close left a verdict nobody was asked to measure."""
    service, run, (traj,), (cand,) = _molecule_lab_service(ledger, ["CCO"], slots=1)
    service.open_batch(0, [traj], [cand])
    for _ in range(400):  # the group is never taken, so the batch never closes: the process 'dies' here
        service.pump(0.02)
        if any(v.verifier == "lab" for v in ledger.verdicts_for([cand.key])):
            break
    service.close()
    (request,) = ledger.lab_requests(Status.pending, run_id=run.id)
    (pending,) = [v for v in ledger.verdicts_for([cand.key]) if v.verifier == "lab"]
    assert request.candidate_key == cand.key and pending.request_id == request.id and not request.in_flight
