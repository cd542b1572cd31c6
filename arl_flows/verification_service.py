"""The verification service: every tier's slots kept busy, candidates escalated as verdicts arrive.

There is no round barrier. Each sampled batch gets a :class:`~verifiers.scheduler.StepPlan`;
whenever a call returns, its verdict is written to the ledger with its bill
(one transaction), the plan observes it, and every open plan (oldest first)
is asked to fill the slots now free (:meth:`StepPlan.request`). A tier keeps
at most ``slots[name]`` calls in flight, each on a thread of its own pool
(a remote tier's thread sleeps; a local tier's verifier isolates its own
work in worker processes). Calls in flight hold their expected cost against
the plan's budget, and each plan's budget is reserved from what the run has
left when it opens, so the budget is never exceeded however many calls are out.
With ``lend_idle_slots``, an expensive tier's slot that no plan wants within its own
budget is not left idle until the next batch: the newest open batch is lent up to one
more step's budget from what the run has not committed (:meth:`StepPlan.request_on_loan`),
and buys the best call still worth its cost at that budget, if there is one.

A call on a tier at or above ``record_from`` (the expensive ones) is recorded
before it is sent: a lab request row (its id, its submission time) and a
``pending`` verdict. The final verdict replaces the pending one and closes
the request. After a crash, :meth:`VerificationService.resume_in_flight`
finds the requests still pending and continues them (a real lab's, which
``arl lab submit`` answers, stay as they are): a remote tier (one with
an ``answer(candidate, submitted_at)`` method, such as the simulated cluster)
waits only for the rest of its latency; a local computation, whose work died
with the process, is run again, and billed once, when it answers.

One thread owns the plans: the caller's (tests) or the pipeline's service
thread, which calls :meth:`pump` in a loop. Nothing here imports Prefect.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from arl_flows.step import verify_inline
from arl_flows.suites import Lab, Suite
from arl_flows.suites.capabilities import flag_disagreements

from storage.ledger import Ledger
from storage.records import LabRequest, RewardEstimate, Status, Tier, Trajectory, Verdict, new_id, tier_rank
from verifiers import Candidate, LabRequester, RemoteVerifier, Verifier
from verifiers.scheduler import Scheduler, StepPlan
from verifiers.scheduler.spend import spend_records

__all__ = ["LateVerdict", "SettledGroup", "VerificationService", "verify_one"]


@dataclass
class SettledGroup:
    """A group whose rewards are settled: what the learner takes."""

    batch: int
    group_id: str
    trajectories: list[Trajectory]
    candidates: list[Candidate]
    estimates: list[RewardEstimate]  # one per trajectory, in order
    policy_version: int  # the weights that sampled it


@dataclass
class LateVerdict:
    """A verdict that arrived after the group using its candidate was taken by the learner."""

    verdict: Verdict
    trajectories: list[Trajectory]  # of taken groups, with this candidate
    estimates: list[RewardEstimate]  # their estimates now (already written to the ledger)
    previous: list[RewardEstimate]  # what the learner used


@dataclass
class _Batch:
    index: int
    plan: StepPlan
    trajectories: list[Trajectory]
    candidates: list[Candidate]
    policy_version: int
    opened: float
    taken: dict[str, list[RewardEstimate]] = field(default_factory=dict)  # group id -> estimates the learner used
    closed: bool = False


@dataclass
class _Call:
    batch: _Batch | None  # None: a call resumed from the ledger, in no plan
    verifier: Verifier
    candidate: Candidate
    request_id: str | None
    submitted_at: float  # time.time()
    started: float = 0.0
    ended: float = 0.0
    verdict: Verdict | None = None
    error: BaseException | None = None


class VerificationService:
    """Routes batches of candidates through the ladder with calls in flight per tier (see the module docstring)."""

    def __init__(
        self,
        ledger: Ledger,
        scheduler: Scheduler,
        suite: Suite,
        run_id: str,
        *,
        slots: Mapping[str, int],
        settle_std: float | None = None,
        max_group_wait_s: float | None = None,
        record_from: Tier = Tier.high_fidelity,
        execute: Callable[[Verifier, Candidate], Verdict] | None = None,
        lend_idle_slots: bool = False,
    ) -> None:
        self.ledger = ledger
        self.scheduler = scheduler
        self.suite = suite
        self.run_id = run_id
        names = [v.name for v in scheduler.ladder]
        unknown = set(slots) - set(names)
        if unknown:
            raise ValueError(f"slots name verifiers not in the ladder: {', '.join(sorted(unknown))}; use {', '.join(names)}")
        self.slots = {n: max(int(slots.get(n, 1)), 1) for n in names}
        self.settle_std = settle_std
        self.max_group_wait_s = max_group_wait_s
        self.record_from = tier_rank(record_from)
        self.execute = execute or verify_one
        self.lend_idle_slots = lend_idle_slots
        self.loans = 0  # calls sent on a loan (_lend)
        self._expensive = [v.name for v in scheduler.ladder if tier_rank(v.tier) >= self.record_from]
        self.draining = False  # set: no new calls are sent, the ones out finish
        self._pools = {n: ThreadPoolExecutor(self.slots[n], thread_name_prefix=f"arl-{n}") for n in names}
        self._done: queue.Queue[_Call] = queue.Queue()
        self.in_flight = {n: 0 for n in names}
        self.busy_s = {n: 0.0 for n in names}  # slot-seconds spent in calls, per verifier
        self.calls = {n: 0 for n in names}
        self.batches: list[_Batch] = []
        self.late: queue.Queue[LateVerdict] = queue.Queue()
        self.started = time.monotonic()
        self._sent: set[str] = set()  # request ids of the calls this service sent or resumed
        self._held: dict[str, float] = {}  # resumed calls still out (request id -> expected cost): in no plan's budget
        self._lock = threading.Lock()  # guards in_flight / busy_s for readers on other threads
        self._refused: dict[int, tuple[int, float]] = {}  # batch index -> (verdicts seen, headroom) when a loan bought nothing

    # ------------------------------------------------------------------ batches in
    def open_batch(
        self, index: int, trajectories: Sequence[Trajectory], candidates: Sequence[Candidate], policy_version: int = 0
    ) -> StepPlan:
        """Plan a sampled batch (already in the ledger) and start filling slots with its calls."""
        budget = self.scheduler.step_budget(index, committed=self.committed_budget())
        names = [v.name for v in self.scheduler.ladder]
        plan = self.scheduler.plan_step(
            list(candidates),
            group_ids=[t.group_id for t in trajectories],
            trajectory_ids=[t.id for t in trajectories],
            cached=self.ledger.verdicts_for([c.key for c in candidates], verifiers=names),
            budget=budget,
            step=index,
            run_id=self.run_id,
        )
        self.batches.append(_Batch(index, plan, list(trajectories), list(candidates), policy_version, time.monotonic()))
        self._fill()
        return plan

    def resume_in_flight(self) -> int:
        """Continue the calls a previous process sent and never saw answered; returns how many."""
        ladder = {v.name: v for v in self.scheduler.ladder}
        resumed = 0
        for req in self.ledger.lab_requests(Status.pending, run_id=self.run_id):
            if req.id in self._sent:
                continue  # sent by this service: in flight here, not left over from a previous process
            verifier = ladder.get(req.verifier)
            if verifier is None or _external(verifier) or (req.version, req.params_hash) != (verifier.version, verifier.params_hash):
                continue  # a real lab request (answered by `arl lab submit`), or another verifier's
            stored = self.ledger.lookup_verdicts([req.candidate_key], req.verifier, req.version, req.params_hash)
            final = stored.get(req.candidate_key)
            if final is not None and final.status != Status.pending:
                self.ledger.close_lab_requests([final.model_copy(update={"request_id": req.id})])
                continue  # answered before the crash; only the request was left open
            candidate = self.suite.history_candidate(req.candidate_key) if isinstance(self.suite, Lab) else None
            if candidate is None:
                continue
            self._held[req.id] = float(verifier.expected_cost(candidate))  # committed before the stop, paid on landing
            self._submit(_Call(None, verifier, candidate, req.id, req.created_at.timestamp()))
            resumed += 1
        return resumed

    # ------------------------------------------------------------------ the loop
    def pump(self, timeout: float = 0.1) -> int:
        """Handle the calls that returned (waiting up to ``timeout`` for the first), refill slots; returns how many."""
        handled = 0
        try:
            call = self._done.get(timeout=timeout) if timeout > 0 else self._done.get_nowait()
        except queue.Empty:
            self._fill()
            return 0
        while True:
            self._handle(call)
            handled += 1
            try:
                call = self._done.get_nowait()
            except queue.Empty:
                break
        self._fill()
        return handled

    @property
    def busy(self) -> bool:
        """Calls in flight, or open batches whose plans still want work."""
        return any(self.in_flight.values()) or any(not b.plan.done for b in self.batches if not b.closed)

    def take_settled(self, sampled_before: int | None = None) -> list[SettledGroup]:
        """Groups whose rewards are settled, each handed out once.

        Also handed out as they stand (what arrives later arrives late): groups
        that waited ``max_group_wait_s``, and groups sampled by a policy version
        below ``sampled_before`` (the learner's deadline on staleness).
        """
        out: list[SettledGroup] = []
        now = time.monotonic()
        for b in self.batches:
            if b.closed:
                continue
            ready = set(b.plan.settled_groups(self.settle_std))
            waited = self.max_group_wait_s is not None and now - b.opened >= self.max_group_wait_s
            if waited or (sampled_before is not None and b.policy_version < sampled_before):
                ready = set(b.plan.group_ids)  # waited long enough: what arrives now arrives late
            ready -= set(b.taken)
            for g in [g for g in b.plan.group_ids if g in ready]:
                rows = [k for k, t in enumerate(b.trajectories) if t.group_id == g]
                trajs = [b.trajectories[k] for k in rows]
                cands = [b.candidates[k] for k in rows]
                estimates = self._estimates(b, trajs, cands)
                b.taken[g] = estimates
                out.append(SettledGroup(b.index, g, trajs, cands, estimates, b.policy_version))
            self._maybe_close(b)
        return out

    def committed(self) -> float:
        """CPU-seconds of the run's budget paid or held: closed batches' spend, open plans' spend, calls in flight
        (resumed ones included)."""
        return self.scheduler.run_spent + sum(self._held.values()) + sum(b.plan.committed for b in self.batches if not b.closed)

    def budget_committed(self) -> bool:
        """Whether what the run's budget has left cannot pay one more top-tier call (at the newest batch's cheapest)."""
        if not self.batches:
            return False
        top = self.scheduler.ladder[-1]
        costs = [top.expected_cost(c) for c in self.batches[-1].candidates if c.valid]
        if not costs:
            return False
        return self.scheduler.config.budget_per_run - self.committed() < min(costs)

    def stats(self) -> dict[str, Any]:
        """Queue depths, calls in flight and utilisation per verifier (safe from any thread)."""
        wall = max(time.monotonic() - self.started, 1e-9)
        with self._lock:
            return {
                "in_flight": dict(self.in_flight),
                "calls": dict(self.calls),
                "utilisation": {n: self.busy_s[n] / (self.slots[n] * wall) for n in self.slots},
                "open_batches": sum(1 for b in self.batches if not b.closed),
                "late_queue": self.late.qsize(),
                "loans": self.loans,
            }

    def close(self) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ internals
    def _fill(self) -> None:
        if self.draining:
            return
        for b in self.batches:
            if b.closed:
                continue
            free = {n: self.slots[n] - self.in_flight[n] for n in self.slots}
            if not any(v > 0 for v in free.values()):
                break
            self._send(b, b.plan.request(free))
            self._maybe_close(b)
        if self.lend_idle_slots and math.isfinite(self.scheduler.config.budget_per_step):
            self._release()  # with no step budget a plan is never short, and there is nothing to lend
            self._lend()

    def _release(self) -> None:
        """A plan that is done (nothing in flight, nothing worth its cost) gives back its unspent budget.

        Its batch may stay open a while (its groups wait for the learner), and the budget it no longer
        wants would otherwise sit reserved while a slot waits for a loan. Released, it can only buy again
        on a loan (:meth:`_lend`), so the run's budget still holds.
        """
        for b in self.batches:
            if not b.closed and b.plan.done:
                b.plan.give_back()

    def _lend(self) -> None:
        """Expensive slots still free after every plan asked within its own budget: lend the newest batches more.

        A batch's plan spends at most one step's budget, so a slot that frees up between batches would wait for
        the next batch worth a call. Instead the newest open batch is lent up to one more step's budget from what
        the run has not yet reserved, and its plan buys what is worth its cost at that budget (nothing, if
        nothing is). The run's budget holds: a loan is reserved like the plan's own budget until the batch closes.
        It comes from what no open plan holds (done plans hold only what they spent, :meth:`_release`), then from
        the unspent budgets of plans still screening their batches (:meth:`_take_reservations`).
        """
        cfg = self.scheduler.config
        for b in reversed(self.batches):
            while not b.closed and not b.plan.finished:  # the same batch again while it buys and slots are free
                free = {n: self.slots[n] - self.in_flight[n] for n in self._expensive}
                free = {n: k for n, k in free.items() if k > 0}
                if not free:
                    return
                unreserved = cfg.budget_per_run - self.committed_budget()
                donors = [d for d in reversed(self.batches) if d is not b and not d.closed]
                soft = sum(d.plan.unspent for d in donors)
                loan = min(cfg.budget_per_step, unreserved + soft)
                seen = (len(b.plan.new_verdicts), round(unreserved + soft, 3))  # inf with no run budget
                if loan <= 0 or self._refused.get(b.index) == seen:
                    break  # nothing to lend, or this plan refused the same loan knowing what it knows now
                requests, kept = b.plan.request_on_loan(free, loan)
                if not requests:
                    self._refused[b.index] = seen
                    break
                self._take_reservations(donors, kept - max(unreserved, 0.0))
                self.loans += sum(len(c) for c in requests.values())
                self._send(b, requests)

    @staticmethod
    def _take_reservations(donors: Sequence[_Batch], amount: float) -> None:
        """Cover a loan beyond the unreserved budget from other open plans' unspent budgets, newest batch first.

        A plan still screening its batch holds a whole step's budget for calls it may want later; a free slot now
        is worth more than that claim. A donor keeps at least what it has committed, and buys again on loans.
        """
        for d in donors:
            if amount <= 0:
                return
            amount -= d.plan.give_back(amount)

    def committed_budget(self) -> float:
        """CPU-seconds of the run's budget spent or reserved: closed batches' spend, open plans' budgets (loans
        included), resumed calls in flight."""
        return self.scheduler.run_spent + sum(b.plan.budget for b in self.batches if not b.closed) + sum(self._held.values())

    def _send(self, b: _Batch, requests: Mapping[str, Sequence[Candidate]]) -> None:
        for name, batch in requests.items():
            verifier = self.scheduler.verifier(name)
            for cand in batch:
                self._submit(_Call(b, verifier, cand, self._record_in_flight(verifier, cand), time.time()))

    def _record_in_flight(self, verifier: Verifier, cand: Candidate) -> str | None:
        """Write the request and a pending verdict before an expensive call is sent; returns the request id.

        Not for a lab's tier (:func:`_external`): its pending verdict is its own request, for a person to answer; a
        record of the call beside it would take that request's id and read as a call in flight.
        """
        if tier_rank(verifier.tier) < self.record_from or _external(verifier):
            return None
        rid = new_id()
        self.ledger.create_lab_requests([
            LabRequest(id=rid, run_id=self.run_id, candidate_key=cand.key, payload=cand.payload, verifier=verifier.name,
                       version=verifier.version, params_hash=verifier.params_hash, notes=LabRequest.in_flight_note(verifier.name))
        ])
        self.ledger.put_verdicts([verifier.verdict(cand, Status.pending, feedback="in flight", request_id=rid)], return_stored=False)
        return rid

    def _submit(self, call: _Call) -> None:
        name = call.verifier.name
        if call.request_id is not None:
            self._sent.add(call.request_id)
        with self._lock:
            self.in_flight[name] += 1
        self._pools[name].submit(self._run, call)

    def _run(self, call: _Call) -> None:
        call.started = time.monotonic()
        try:
            if isinstance(call.verifier, RemoteVerifier):
                call.verdict = call.verifier.answer(call.candidate, submitted_at=call.submitted_at)
            else:
                call.verdict = self.execute(call.verifier, call.candidate)
        except BaseException as exc:  # noqa: BLE001 - handed to the service thread, which abandons the call
            call.error = exc
        call.ended = time.monotonic()
        self._done.put(call)

    def _handle(self, call: _Call) -> None:
        name = call.verifier.name
        with self._lock:
            self.in_flight[name] -= 1
            self.busy_s[name] += call.ended - call.started
            self.calls[name] += 1
        b = call.batch
        if b is None:
            self._held.pop(call.request_id or "", None)
        if call.verdict is None:
            if b is not None:
                b.plan.abandon(call.candidate.key, name, f"the call raised {type(call.error).__name__}: {call.error}")
            return
        verdict = call.verdict
        if call.request_id is not None:
            verdict = verdict.model_copy(update={"request_id": call.request_id})
        step = b.index if b is not None else 0
        spend = spend_records(self.run_id, step, call.verifier, [call.candidate], [verdict])
        (stored,) = self.ledger.put_verdicts([verdict], spend=spend)
        if call.request_id is not None:
            self.ledger.close_lab_requests([stored])
        if _external(call.verifier) and stored.status == Status.pending:
            # The request a person answers, stored with its pending verdict: a crash before the batch closes (which
            # stores the same request again, idempotently) must not leave a pending verdict that nobody is asked for.
            self.ledger.create_lab_requests(call.verifier.lab_requests([call.candidate], [stored], run_id=self.run_id))
        if b is None:
            self.scheduler.run_spent += sum(r.cost_s for r in spend)  # a plan adds its own spend; this call is in none
            self._teach(call.candidate, stored)
            return
        b.plan.observe([stored])
        self._late(b, call.candidate, stored)

    def _teach(self, candidate: Candidate, verdict: Verdict) -> None:
        """A resumed call's verdict (in no plan) still teaches the surrogate."""
        if verdict.status != Status.ok or verdict.verifier != self.scheduler.ladder[-1].name:
            return
        names = [v.name for v in self.scheduler.ladder]
        values = {v.verifier: float(v.value) for v in self.ledger.verdicts_for([candidate.key], verifiers=names)
                  if v.status == Status.ok and v.value is not None}
        self.scheduler.surrogate.add([self.scheduler.observation(candidate, values)])

    def _late(self, b: _Batch, candidate: Candidate, verdict: Verdict) -> None:
        """A verdict on a candidate of a group the learner already took: new estimates, queued as hindsight data."""
        rows = [k for k, t in enumerate(b.trajectories) if t.group_id in b.taken and b.candidates[k].key == candidate.key]
        if not rows:
            return
        trajs = [b.trajectories[k] for k in rows]
        previous = {e.trajectory_id: e for g in {t.group_id for t in trajs} for e in b.taken[g]}
        estimates = self._estimates(b, trajs, [b.candidates[k] for k in rows])
        self.late.put(LateVerdict(verdict, trajs, estimates, [previous[t.id] for t in trajs]))

    def _estimates(self, b: _Batch, trajs: list[Trajectory], cands: list[Candidate]) -> list[RewardEstimate]:
        """Reward estimates now (the suite's rewards and disagreements applied), written to the ledger."""
        estimates = b.plan.estimates([t.id for t in trajs])
        by_key: dict[str, list[Verdict]] = {}
        for c in cands:
            i = b.plan.index[c.key]
            by_key[c.key] = [v for v in b.plan.verdicts[i] if v is not None]
        estimates = self.suite.rewards(trajs, cands, by_key, estimates)
        estimates = flag_disagreements(self.suite, self.scheduler, cands, by_key, estimates)
        self.ledger.add_reward_estimates(estimates)
        return estimates

    def _maybe_close(self, b: _Batch) -> None:
        """A batch whose plan is done and whose groups were all taken is charged to the run and closed."""
        if b.closed or not b.plan.done or len(b.taken) < len(b.plan.group_ids):
            return
        result = b.plan.result()  # charges the run once
        if result.lab_requests:
            self.ledger.create_lab_requests(result.lab_requests)
        b.closed = True


def _external(verifier: Verifier) -> bool:
    """Whether the verifier's answers come from outside (a lab writing its own requests), not from a computation.

    The tier does not say it: a reference table sits on the lab tier but answers when called.
    """
    return isinstance(verifier, LabRequester)


def verify_one(verifier: Verifier, candidate: Candidate) -> Verdict:
    """One call: the default tier runner on a batch of one (the service's default ``execute``)."""
    (verdict,) = verify_inline(verifier, [candidate])
    return verdict
