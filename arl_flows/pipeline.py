"""The asynchronous pipeline: a sampler, the verification service and a learner at once, over the ledger.

``pipeline = "async"`` in a run config. The synchronous step (:func:`arl_flows.step.run_step`)
is a barrier: sample, verify in rounds, learn, and while DFT runs the policy
waits. Here three parts run side by side, on the same stages:

- the **sampler** (a thread) samples batch after batch with the newest weights
  (:meth:`RunSession.sample_batch`), each trajectory recording the policy
  version that sampled it, its tokens and its behaviour log-probs, and stops
  when ``streaming.max_ahead`` batches are out (sampled, not yet learned);
- the **verification service** (a thread, :class:`~arl_flows.verification_service.VerificationService`)
  keeps every tier's calls in flight (``streaming.slots``), escalating each
  candidate as verdicts arrive, with no round barrier, and hands over each
  group once its rewards are settled;
- the **learner** (the caller's thread) takes ``rollout.prompts_per_step``
  settled groups, oldest first, and makes one GRPO step with the decoupled
  loss (:func:`policies.losses.decoupled_ppo_loss`): their stored behaviour
  log-probs against the proximal policy (these weights before the update),
  rows more than ``trainer.max_staleness`` versions old dropped. Then
  hindsight, then the checkpoint, which records the step, its metrics and
  the groups it learned from in one transaction.

**No group is learned staler than** ``trainer.max_staleness``. A group waits
for its verdicts while the learner learns from groups that settled sooner, so
a slow top tier would otherwise leave it behind by as many versions as the
learner steps meanwhile (and the loss would then drop it). Before each step
the learner has the service hand over, as they stand, the groups whose
sampling policy will be ``max_staleness`` versions old at the next step (one
step of slack: several batches may share a policy version), and learns the
oldest policy first; a group at its last step is learned even if the step
then takes more than ``prompts_per_step`` groups. What arrives for them later
is a late verdict.

Sampling and learning share the policy's weights and take turns on them (a
lock); verification overlaps both. One learner step is a step of the run
(``steps``), with a checkpoint, exactly as in sync mode.

**Late verdicts become hindsight data.** A verdict that lands after its group
was learned updates the ledger, the group's reward estimates and the
surrogate at once (the service does), and its trajectories join the next
hindsight distillation (first in line, and in the learner's idle time if
``streaming.learner_idle = "hindsight"``). Hindsight rather than a replayed
GRPO group: relabelling is off-policy by construction (it trains on
"goal achieved -> completion" pairs, whatever policy wrote them), so it needs
no importance weights however stale the group, and a top-tier verdict is what
makes its relabel exact (``hindsight.max_value_std``). A replayed group would
be as stale as the verdict was slow, and dropped by ``max_staleness``.

**The budget ends sampling.** Once what the run's verification budget has
left (``scheduler.budget_per_run`` less what is paid and what the calls in
flight hold) cannot pay one more top-tier call, the sampler stops: new
batches could only learn from the surrogate. The learner still learns every
group already sampled, then the run ends, with fewer than ``steps`` steps.
Each step's ``pipeline/top_tier_share`` (its trajectories with a top-tier
verdict) and ``pipeline/budget_committed`` (learned after that point) say what
the last steps learned from.

**Crash safety.** Trajectories are written when sampled, verdicts as each call
returns (with their bill), and an expensive call is recorded before it is
sent. A step counts once its checkpoint is registered with the ids of the
groups it learned. ``arl run --resume`` re-opens every group sampled and not
learned, from its stored tokens and log-probs (nothing is sampled twice), and
continues the calls still in flight (nothing is paid twice).
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from arl_flows.step import StageHooks, finish_step, learn
from arl_flows.recording import has_behaviour
from arl_flows.training import LateTrajectory, RunSession, StepState, StepSummary
from arl_flows.verification_service import LateVerdict, SettledGroup, VerificationService, verify_one
from storage.records import Trajectory, Verdict
from verifiers import Candidate, RemoteVerifier, Verifier

__all__ = ["Pipeline", "PipelineHooks", "PipelineReport", "run_pipeline"]

DRAIN_S = 60.0  # how long a stopped pipeline waits for the local calls it has out
log = logging.getLogger("arl.pipeline")


class PipelineHooks(StageHooks):
    """How a caller runs the pipeline's parts; the defaults run them on plain threads, silently.

    :class:`~arl_flows.step.StageHooks` wraps the stages (``rollout`` on the
    sampler's thread, ``grpo``, ``hindsight`` and ``checkpoint`` on the
    learner's) and hears of each finished step, as in the synchronous step;
    the synchronous step's own hooks (tier batches, ``sampled``, ``verified``)
    are not the pipeline's.
    """

    def part(self, name: str, work: Callable[[], None]) -> None:
        """Run one long-lived part (``sampler``, ``verification-service``) to its end, on the current thread."""
        work()

    def call_tier(self, session: RunSession, verifier: Verifier, candidate: Candidate) -> Verdict:
        """One verifier call, on one of the service's slot threads (a flow may send it to a Dask cluster)."""
        return verify_one(verifier, candidate)

    def progress(self, session: RunSession, stats: dict[str, Any]) -> None:
        """Live state every ``streaming.progress_every_s``: queue depths, calls in flight per tier, policy version."""


@dataclass(frozen=True)
class SampledBatch:
    """A batch the sampler wrote to the ledger, waiting for the verification service to open it."""

    index: int  # the batch's number in sampling order
    trajectories: list[Trajectory]
    candidates: list[Candidate]  # one per trajectory, in order
    policy_version: int  # learner updates behind the weights that sampled it


@dataclass
class PipelineReport:
    """What the pipeline measured over its life (the benchmark's and the run's summary)."""

    wall_s: float = 0.0
    steps: int = 0
    learner_idle_s: float = 0.0
    utilisation: dict[str, float] = field(default_factory=dict)  # slot-seconds busy / (slots x wall), per verifier
    calls: dict[str, int] = field(default_factory=dict)
    loans: int = 0  # calls sent on budget lent to an open batch so an expensive slot did not sit idle
    staleness: dict[int, int] = field(default_factory=dict)  # policy versions behind -> trajectories learned
    late_verdicts: int = 0
    late_distilled: int = 0  # late-verdict trajectories handed to hindsight
    idle_distill_steps: int = 0
    batches_sampled: int = 0
    resumed_groups: int = 0
    resumed_calls: int = 0
    budget_committed_before: int | None = None  # the first step learned after the budget was committed

    @property
    def learner_idle_share(self) -> float:
        return self.learner_idle_s / self.wall_s if self.wall_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "wall_s": self.wall_s, "steps": self.steps, "learner_idle_s": self.learner_idle_s,
            "learner_idle_share": self.learner_idle_share, "utilisation": dict(self.utilisation),
            "calls": dict(self.calls), "loans": self.loans, "staleness": {str(k): v for k, v in sorted(self.staleness.items())},
            "late_verdicts": self.late_verdicts, "late_distilled": self.late_distilled,
            "idle_distill_steps": self.idle_distill_steps, "batches_sampled": self.batches_sampled,
            "resumed_groups": self.resumed_groups, "resumed_calls": self.resumed_calls,
            "budget_committed_before": self.budget_committed_before,
        }


class Pipeline:
    """Sampler, verification service and learner for one run session (see the module docstring)."""

    def __init__(self, session: RunSession, hooks: PipelineHooks | None = None) -> None:
        self.session = session
        self.hooks = hooks or PipelineHooks()
        self.cfg = session.config.streaming
        self.per_step = session.config.rollout.prompts_per_step
        self.version = session.start_step  # learner updates behind the current weights
        self.max_staleness = session.config.trainer.max_staleness
        self._due: int | None = None  # groups sampled at this policy version or before are handed over as they stand
        self._rounds = 0  # service loop rounds done (the learner waits for one after moving ``_due``)
        self._round_done = threading.Condition()
        self.report = PipelineReport()
        self._policy_lock = threading.Lock()  # sampling and updating take turns on the weights
        self._turn = threading.Condition()  # the sampler waits here for the learner to free a batch slot
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self._inbox: queue.Queue[SampledBatch] = queue.Queue()  # batches to open
        self._settled: queue.Queue[SettledGroup] = queue.Queue()
        self._late: list[LateTrajectory] = []
        self._sampling_done = threading.Event()
        self._service_done = threading.Event()
        self._groups_out = 0  # sampled (or re-opened) and not yet learned
        self._groups_wanted = 0
        self._groups_sampled = 0  # sampled or re-opened, in all
        self._groups_delivered = 0  # settled and handed to the learner, in all
        self._next_batch = 0
        self._last_progress = 0.0
        self._calls_seen: dict[str, int] = {}
        self.service = VerificationService(
            session.ledger, session.scheduler, session.suite, session.run.id,
            slots=self._slots(), settle_std=self.cfg.settle_std, max_group_wait_s=self.cfg.max_group_wait_s,
            lend_idle_slots=self.cfg.lend_idle_slots,
            execute=lambda verifier, cand: self.hooks.call_tier(session, verifier, cand),
        )

    def _slots(self) -> dict[str, int]:
        config = self.session.config
        out = {}
        for v in self.session.ladder:
            own = getattr(getattr(v, "params", None), "slots", None)
            out[v.name] = int(self.cfg.slots.get(v.name) or own or config.tier_concurrency.get(v.name) or 1)
        return out

    # ------------------------------------------------------------------ the whole
    def run(self) -> PipelineReport:
        """Learn until the run has ``steps`` steps; returns what was measured. Ctrl-C stops all three parts."""
        session = self.session
        t0 = time.monotonic()
        self._reopen()
        self._groups_out = self._groups_sampled = self.report.resumed_groups
        self._groups_wanted = max((session.config.steps - session.start_step) * self.per_step - self._groups_out, 0)
        pending: list[SettledGroup] = []
        threads = [
            self._thread("verification-service", self._serve),
            self._thread("sampler", self._sample),
        ]
        try:
            for step in range(session.start_step, session.config.steps):
                groups = self._take(pending)
                if not groups:
                    if self.report.budget_committed_before is None:
                        log.warning("pipeline: nothing left to learn from at step %d; stopping", step)
                    else:
                        log.info("pipeline: every group sampled before the budget was committed is learned; "
                                 "stopping at step %d", step)
                    break
                self._learn(step, groups)
            self._finish()
        except BaseException:
            self._land_local_calls()  # Ctrl-C, SIGTERM, an error: what is computing now is paid for, keep it
            raise
        finally:
            self._stop.set()
            with self._turn:
                self._turn.notify_all()
            for t in threads:
                t.join(timeout=30)
            self.service.close()
            self.report.wall_s = time.monotonic() - t0
            stats = self.service.stats()
            self.report.utilisation = stats["utilisation"]
            self.report.calls = stats["calls"]
            self.report.loans = stats["loans"]
        return self.report

    def _thread(self, name: str, work: Callable[[], None]) -> threading.Thread:
        context = contextvars.copy_context()  # a flow's run context follows the part onto its thread

        def main() -> None:
            try:
                context.run(self.hooks.part, name, work)
            except BaseException as exc:  # noqa: BLE001 - handed to the learner, which raises it
                self._errors.append(exc)
                self._stop.set()

        thread = threading.Thread(target=main, name=f"arl-{name}", daemon=True)
        thread.start()
        return thread

    def _check(self) -> None:
        if self._errors:
            raise self._errors[0]

    # ------------------------------------------------------------------ resume
    def _reopen(self) -> None:
        """Groups a previous process sampled and never learned go back to the service, as their batches."""
        session = self.session
        learned: set[str] = set()
        for record in session.ledger.training_steps(session.run.id):
            learned.update(record.group_ids)
        rows = session.ledger.run_trajectories(session.run.id)
        self._next_batch = max((t.step for t, _ in rows), default=-1) + 1
        by_batch: dict[int, list[Trajectory]] = {}
        for traj, _ in rows:
            if traj.group_id not in learned:
                by_batch.setdefault(traj.step, []).append(traj)
        prompts = session.ledger.get_prompts({t.prompt_id for ts in by_batch.values() for t in ts})
        for index, trajs in sorted(by_batch.items()):
            cands = [session.suite.completion(prompts[t.prompt_id], t.final_answer)[0] for t in trajs]
            version = min((t.policy_version for t in trajs if t.policy_version is not None), default=self.version)
            self._inbox.put(SampledBatch(index, trajs, cands, version))
            self.report.resumed_groups += len({t.group_id for t in trajs})

    # ------------------------------------------------------------------ sampler
    def _sample(self) -> None:
        session = self.session
        limit = self.cfg.max_ahead * self.per_step
        try:
            while not self._stop.is_set():
                with self._turn:
                    while not self._stop.is_set() and self._groups_out >= limit and self._groups_wanted > 0:
                        self._turn.wait(0.5)
                    if self._stop.is_set() or self._groups_wanted <= 0:
                        return
                index = self._next_batch
                self._next_batch += 1
                with self._policy_lock:
                    version = self.version
                    state = self.hooks.stage(index, "rollout", lambda: session.sample_batch(index, version))
                with self._turn:
                    groups = len({t.group_id for t in state.trajectories})
                    self._groups_out += groups
                    self._groups_wanted -= groups
                    self._groups_sampled += groups
                self.report.batches_sampled += 1
                self._inbox.put(SampledBatch(index, state.trajectories, state.candidates, version))
        finally:
            self._sampling_done.set()

    # ------------------------------------------------------------------ verification service
    def _serve(self) -> None:
        service = self.service
        try:
            # Calls in flight before the stop first: the re-opened plans then see them as pending, never as open.
            self.report.resumed_calls = service.resume_in_flight()
            while not self._stop.is_set():
                self._open_waiting()
                service.pump(0.05)
                for group in service.take_settled(sampled_before=self._sampled_before()):
                    self._settled.put(group)
                    with self._turn:
                        self._groups_delivered += 1
                if self.report.budget_committed_before is None and service.budget_committed():
                    self.report.budget_committed_before = self.version  # the step the learner is on
                    log.info("pipeline: the verification budget is committed before step %d; sampling stops",
                             self.report.budget_committed_before)
                    self.stop_sampling()
                self._publish()
                with self._round_done:
                    self._rounds += 1
                    self._round_done.notify_all()
                if service.draining and not any(service.in_flight.values()):
                    break
        finally:
            self._service_done.set()

    def _sampled_before(self) -> int | None:
        """Groups sampled by a policy version below this are handed over as they stand (None: no deadline)."""
        lag = self.cfg.max_group_lag
        by_lag = None if lag is None else self.version - lag
        by_staleness = None if self._due is None else self._due + 1
        bounds = [b for b in (by_lag, by_staleness) if b is not None]
        return max(bounds, default=None)

    def _hand_over_due(self) -> None:
        """Have the service hand over every group that is ``max_staleness`` versions old by the next step.

        Waits for one whole service round after the deadline moved (a round
        already running may have read the old one), so each such group is in
        the settled queue when the learner picks its groups.
        """
        if self.max_staleness is None:
            return
        self._due = self.version - self.max_staleness + (1 if self.max_staleness > 0 else 0)
        with self._round_done:
            target = self._rounds + 2
            while self._rounds < target and not self._service_done.is_set() and not self._errors:
                self._round_done.wait(0.05)

    def _open_waiting(self) -> None:
        while True:
            try:
                batch = self._inbox.get_nowait()
            except queue.Empty:
                return
            self.service.open_batch(batch.index, batch.trajectories, batch.candidates, policy_version=batch.policy_version)

    def _publish(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_progress < self.cfg.progress_every_s:
            return
        self._last_progress = now
        stats = self.service.stats() | {
            "policy_version": self.version,
            "steps_done": self.report.steps,
            "sampled_waiting": self._inbox.qsize(),
            "settled_waiting": self._settled.qsize(),
            "groups_out": self._groups_out,
            "learner_idle_s": round(self.report.learner_idle_s, 2),
            "final": force,  # the state the run ended in: a display that throttles its updates must still show it
        }
        try:
            self.hooks.progress(self.session, stats)
        except Exception as exc:  # noqa: BLE001 - a progress display never stops the run
            log.warning("pipeline progress report failed: %s", exc)

    # ------------------------------------------------------------------ learner
    def _take(self, pending: list[SettledGroup]) -> list[SettledGroup]:
        """The next step's groups, oldest policy first; waits (using idle time as configured) until enough settled."""
        waited = time.monotonic()
        idle_used = False
        self._hand_over_due()
        while len(pending) < self.per_step:
            self._check()
            self._drain_late()
            try:
                pending.append(self._settled.get(timeout=0.05))
                continue
            except queue.Empty:
                pass
            if self._settled.empty() and self._exhausted():
                break  # nothing more will come: learn from what there is
            if not idle_used and self.cfg.learner_idle == "hindsight" and self._late:
                idle_used = self._idle_distill()
        while True:  # every group handed over so far competes, the ones due first
            try:
                pending.append(self._settled.get_nowait())
            except queue.Empty:
                break
        self.report.learner_idle_s += time.monotonic() - waited
        pending.sort(key=lambda g: (g.policy_version, g.batch))
        last_chance = 0 if self.max_staleness is None else sum(
            1 for g in pending if self.version - g.policy_version >= self.max_staleness)
        n = max(self.per_step, last_chance)
        if n > self.per_step and self.report.budget_committed_before is None:  # sampled again for a later step
            with self._turn:
                self._groups_wanted += n - self.per_step
                self._turn.notify_all()
        groups, pending[:] = pending[:n], pending[n:]
        return groups

    def _exhausted(self) -> bool:
        """Every group that will ever be sampled has been handed to the learner (counted, so no hand-off races it)."""
        with self._turn:
            return self._sampling_done.is_set() and self._groups_delivered >= self._groups_sampled and self._settled.empty()

    def _drain_late(self) -> None:
        while True:
            try:
                late: LateVerdict = self.service.late.get_nowait()
            except queue.Empty:
                return
            self.report.late_verdicts += 1
            prompts = self.session.ledger.get_prompts({t.prompt_id for t in late.trajectories})
            self._late += [LateTrajectory(t, prompts[t.prompt_id], e) for t, e in zip(late.trajectories, late.estimates, strict=True)]

    def _idle_distill(self) -> bool:
        """Hindsight on late verdicts while no group is settled (at most once per step's wait)."""
        late, self._late = self._late, []
        with self._policy_lock:
            metrics = self.session.distill_late(late)
        if metrics.get("hindsight/examples"):
            self.report.idle_distill_steps += 1
            self.report.late_distilled += len(late)
        return True

    def _learn(self, step: int, groups: list[SettledGroup]) -> StepSummary:
        session, hooks = self.session, self.hooks
        started = time.perf_counter()
        self._drain_late()
        state = self._state(groups)
        state.late, self._late = self._late, []
        session.steps[step] = state
        with self._policy_lock:
            metrics = learn(session, step, hooks)
            self.version += 1
        stale = Counter(state.staleness or [])
        for k, n in stale.items():
            self.report.staleness[k] = self.report.staleness.get(k, 0) + n
        self.report.late_distilled += len(state.late)
        stats = self.service.stats()
        metrics |= {
            "pipeline/policy_version": self.version,
            "pipeline/staleness_mean": sum(state.staleness or [0]) / max(len(state.staleness or [0]), 1),
            "pipeline/learner_idle_s": self.report.learner_idle_s,
            "pipeline/late_used": float(len(state.late)),
            "pipeline/groups_out": float(self._groups_out),
            "pipeline/top_tier_share": self._top_tier_share(state),
            "pipeline/budget_committed": float(self.report.budget_committed_before is not None
                                              and step >= self.report.budget_committed_before),
        } | {f"pipeline/utilisation/{k}": v for k, v in stats["utilisation"].items()}
        calls = {n: c - self._calls_seen.get(n, 0) for n, c in stats["calls"].items()}  # since the last step
        self._calls_seen = dict(stats["calls"])
        self.report.steps += 1
        summary = finish_step(session, step, hooks, metrics, started, calls=calls)
        with self._turn:  # learned and registered: the sampler may take the batch slot
            self._groups_out -= len(groups)
            self._turn.notify_all()
        return summary

    def _top_tier_share(self, state: StepState) -> float:
        """Share of the step's trajectories whose reward rests on a top-tier verdict (the rest: surrogate estimates)."""
        top = self.session.ladder[-1].tier
        return sum(1 for e in state.estimates if e.fidelity == top) / max(len(state.estimates), 1)

    def _state(self, groups: list[SettledGroup]) -> StepState:
        """The learner step's state: the groups' rows as one rollout, from their recorded tokens and log-probs."""
        trajs = [t for g in groups for t in g.trajectories]
        state = self.session.rebuild_state(
            trajs, [e for g in groups for e in g.estimates], [c for g in groups for c in g.candidates], behaviour=True
        )
        recorded = has_behaviour(trajs)  # rows from before tokens were recorded are re-encoded: on-policy, staleness 0
        state.staleness = [max(self.version - g.policy_version, 0) if recorded else 0 for g in groups for _ in g.trajectories]
        state.group_ids = [g.group_id for g in groups]
        return state

    def _finish(self) -> None:
        """Send no new calls; let the ones out land (they are paid for), then stop the parts."""
        self.service.draining = True
        self.stop_sampling()
        self._sampling_done.wait(timeout=60)
        while not self._service_done.is_set() and not self._errors:
            self._service_done.wait(0.2)
        self._check()
        self._publish(force=True)

    def _land_local_calls(self) -> None:
        """On a stop, wait up to ``DRAIN_S`` for the local calls out to land, as a sync step waits for its batch.

        Nothing new is sent meanwhile. A remote call (a tier with ``answer``) is
        not waited for: it stays recorded in flight and a resume continues it.
        """
        if self._service_done.is_set():
            return
        self.service.draining = True
        self.stop_sampling()
        local = [v.name for v in self.session.ladder if not isinstance(v, RemoteVerifier)]
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline and not self._service_done.is_set() and any(self.service.in_flight[n] for n in local):
            time.sleep(0.05)

    def stop_sampling(self) -> None:
        """Sample no more batches (safe from any thread); the learner still learns every group already sampled."""
        with self._turn:
            self._groups_wanted = 0
            self._turn.notify_all()


def run_pipeline(session: RunSession, hooks: PipelineHooks | None = None) -> PipelineReport:
    """Train ``session`` to its configured steps with the asynchronous pipeline."""
    return Pipeline(session, hooks).run()
