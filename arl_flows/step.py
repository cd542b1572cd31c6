"""One training step, written once: sample -> verify -> learn -> checkpoint.

``arl run`` (through the Prefect flow in :mod:`arl_flows.flows`), the flows
and the learning benchmark all call :func:`run_step`; what differs between
them is a :class:`StepHooks` object, not a copy of the loop:

- ``run_tier`` runs one verifier on one batch: :func:`verify_inline` by
  default, a Prefect task (on threads or a Dask cluster) in the flows, a
  verdict memo in the benchmark;
- ``stage`` wraps each stage: the flows make it a Prefect task and report
  progress to the CLI's bars;
- ``sampled`` and ``verified`` see the step's state after its trajectories
  and rewards are written: the benchmark records and audits there, and may
  replace the estimates GRPO trains on (the ledger keeps the scheduler's);
- ``finished`` reports the step once it is done (artifacts, logs, bars).

The verify stage reads here in full: :func:`verify` hands the step's
candidates to :func:`verify_candidates`, whose loop calls ``hooks.run_tier``
for each tier batch; what a hook does with the batch is the caller's file
(for the flows, :class:`arl_flows.flows.FlowHooks`).

The asynchronous pipeline (:mod:`arl_flows.pipeline`) has hooks of its own
(:class:`~arl_flows.pipeline.PipelineHooks`); both kinds share
:class:`StageHooks`, and both end a step with :func:`learn` and
:func:`finish_step`, so the step's tail exists once.

Crash safety lives in the stages themselves (:class:`~arl_flows.training.RunSession`
and :func:`verify_candidates`), so every caller gets it: trajectories are
written right after sampling, verdicts as each tier batch returns (with their
spend, in one transaction), and a step counts as done only once its
checkpoint is registered together with its metrics. The stages are separate
functions (:func:`sample`, :func:`verify`, :func:`learn`, :func:`checkpoint`)
so that a caller can run them apart, e.g. the single-stage flows, or a
pipeline that samples the next step while this one is verified.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from arl_flows.suites import Suite
from arl_flows.suites.capabilities import flag_disagreements
from arl_flows.training import RunSession, StepState, StepSummary
from storage.ledger import Ledger
from storage.records import CheckpointRecord, Trajectory, Verdict
from verifiers import Candidate, Verifier
from verifiers.base import check_batch
from verifiers.scheduler import Scheduler, StepResult, spend_records

__all__ = [
    "StageHooks",
    "StepHooks",
    "TierInterrupted",
    "TierRunner",
    "checkpoint",
    "finish_step",
    "learn",
    "run_step",
    "sample",
    "verify",
    "verify_candidates",
    "verify_inline",
]

T = TypeVar("T")

TierRunner = Callable[[Verifier, list[Candidate]], list[Verdict]]
"""Runs one verifier on a batch of candidates, verdicts in order; flows pass a Prefect task here."""


class TierInterrupted(BaseException):
    """Raised by a tier runner when the run is interrupted: carries the verdicts the batch finished."""

    def __init__(self, verdicts: list[Verdict], cause: BaseException) -> None:
        super().__init__(str(cause))
        self.verdicts = verdicts
        self.cause = cause


def verify_inline(verifier: Verifier, batch: list[Candidate]) -> list[Verdict]:
    """The default tier runner: the verifier's own ``verify_batch`` in this process (native tiers isolate their work)."""
    verdicts = verifier.verify_batch(batch)
    check_batch(verifier, batch, verdicts)
    return verdicts


class StageHooks:
    """What every way of running a step's stages shares: how a stage runs, and who hears of a finished step."""

    def stage(self, step: int, name: str, work: Callable[[], T]) -> T:
        """Run one stage (``rollout``, ``verify``, ``grpo``, ``hindsight``, ``checkpoint``): ``work()``, wrapped."""
        return work()

    def finished(self, session: RunSession, summary: StepSummary) -> None:
        """After the step's checkpoint is registered: the step is done."""


class StepHooks(StageHooks):
    """How a caller runs the synchronous step; the defaults run everything inline in this process, silently.

    Subclass and override what differs. ``max_batch`` is the number of
    candidates per tier batch handed back to the planner (None: each
    request whole); smaller batches reach the ledger sooner.
    """

    max_batch: int | None = None

    def run_tier(self, verifier: Verifier, batch: list[Candidate]) -> list[Verdict]:
        """Verdicts of ``verifier`` on ``batch``, in order; raise ``TierInterrupted`` to stop with what finished."""
        return verify_inline(verifier, batch)

    def sampled(self, session: RunSession, step: int, state: StepState) -> None:
        """After the step's trajectories are in the ledger."""

    def verified(self, session: RunSession, step: int, state: StepState) -> None:
        """After the step's rewards are in the ledger; may replace ``state.estimates`` (what GRPO trains on)."""


def sample(session: RunSession, step: int, hooks: StepHooks) -> StepState:
    """Rollout: G completions per prompt, written to the ledger as trajectories before anything is verified."""
    hooks.stage(step, "rollout", lambda: session.rollout(step))
    state = session.steps[step]
    hooks.sampled(session, step, state)
    return state


def verify(session: RunSession, step: int, hooks: StepHooks) -> StepResult:
    """Route the step's candidates through the tiers under the budget; verdicts land as each batch returns."""
    state = session.steps[step]

    def work() -> StepResult:
        return verify_candidates(
            session.ledger, session.scheduler, session.suite, session.run.id, step, state.trajectories, state.candidates,
            run_tier=hooks.run_tier, max_batch=hooks.max_batch,
        )

    state.result = result = hooks.stage(step, "verify", work)
    state.estimates = result.estimates
    hooks.verified(session, step, state)
    return result


def learn(session: RunSession, step: int, hooks: StageHooks) -> dict[str, Any]:
    """GRPO on the step's rewards, then hindsight distillation of its failures; returns their metrics."""
    metrics = hooks.stage(step, "grpo", lambda: session.grpo(step))
    metrics |= hooks.stage(step, "hindsight", lambda: session.hindsight(step))
    return metrics


def checkpoint(session: RunSession, step: int, hooks: StageHooks, metrics: dict[str, Any]) -> CheckpointRecord:
    """Save the policy and register checkpoint and step in one transaction: from here on the step is done."""
    return hooks.stage(step, "checkpoint", lambda: session.checkpoint(step, metrics))


def finish_step(
    session: RunSession,
    step: int,
    hooks: StageHooks,
    metrics: dict[str, Any],
    started: float,
    calls: dict[str, int] | None = None,
) -> StepSummary:
    """The tail after learning: time the step (since ``started``, a ``perf_counter``), checkpoint it, report it.

    ``calls`` replaces the summary's verifier calls (the pipeline counts them
    since its last step; a synchronous step's come from its verify result).
    """
    metrics["step/seconds"] = time.perf_counter() - started
    checkpoint(session, step, hooks, metrics)
    summary = session.summary(step, metrics, metrics["step/seconds"])
    if calls is not None:
        summary.calls = calls
    hooks.finished(session, summary)
    return summary


def run_step(session: RunSession, step: int, hooks: StepHooks | None = None) -> StepSummary:
    """rollout -> verify -> GRPO -> hindsight -> checkpoint, redoing whatever an interrupted attempt left."""
    hooks = hooks or StepHooks()
    started = time.perf_counter()
    session.prepare_step(step)
    sample(session, step, hooks)
    verify(session, step, hooks)
    return finish_step(session, step, hooks, learn(session, step, hooks), started)


def verify_candidates(
    ledger: Ledger,
    scheduler: Scheduler,
    suite: Suite,
    run_id: str,
    step: int,
    trajectories: list[Trajectory],
    candidates: list[Candidate],
    *,
    run_tier: TierRunner | None = None,
    max_batch: int | None = None,
    budget: float | None = None,
    deadline: float | None = None,
) -> StepResult:
    """Route candidates (one per trajectory, already in the ledger) through the tiers under the budget.

    Cached verdicts come from the ledger and are never paid for again; each
    tier batch's verdicts land in the ledger with their bill in one
    transaction before the next round is planned; the suite turns verdicts
    into rewards, which are written too. ``budget`` (CPU-seconds) defaults to
    the scheduler's step budget capped by what its run has left.
    ``deadline`` (a ``time.monotonic()`` value) stops starting new batches
    once passed: the rewards then come from the verdicts in hand, so a
    caller is never held much past it (at most one batch of ``max_batch``,
    whose isolated verifiers have their own timeouts). ``run_tier`` runs each
    batch (default :func:`verify_inline`).
    """
    run_tier = run_tier or verify_inline
    names = [v.name for v in scheduler.ladder]
    cached = ledger.verdicts_for([c.key for c in candidates], verifiers=names)
    plan = scheduler.plan_step(
        candidates,
        group_ids=[t.group_id for t in trajectories],
        trajectory_ids=[t.id for t in trajectories],
        cached=cached,
        budget=budget,
        step=step,
        run_id=run_id,
    )
    late = False
    while not late and (requests := plan.next_round()):
        for name, batch in requests.items():
            verifier = scheduler.verifier(name)
            size = max_batch or len(batch)
            for i in range(0, len(batch), size):
                if deadline is not None and time.monotonic() >= deadline:
                    late = True
                    break
                try:
                    verdicts = run_tier(verifier, batch[i : i + size])
                except TierInterrupted as stop:
                    # Ctrl-C / SIGTERM while a batch ran: keep what it finished, then stop.
                    done = {v.candidate_key for v in stop.verdicts}
                    cands = [c for c in batch if c.key in done]
                    ledger.put_verdicts(stop.verdicts, spend=spend_records(run_id, step, verifier, cands, stop.verdicts))
                    raise stop.cause from None
                # Verdicts and their bill land in one transaction (and the bill is never deleted):
                # a crash leaves no paid call unbilled and no verdict unpaid for.
                spend = spend_records(run_id, step, verifier, batch[i : i + size], verdicts)
                plan.observe(ledger.put_verdicts(verdicts, spend=spend))
            if late:
                break
    result = plan.result()
    if result.lab_requests:
        ledger.create_lab_requests(result.lab_requests)
    by_key: dict[str, list[Verdict]] = {}
    for v in [*cached, *result.verdicts]:
        by_key.setdefault(v.candidate_key, []).append(v)
    result.estimates = suite.rewards(trajectories, candidates, by_key, result.estimates)
    result.estimates = flag_disagreements(suite, scheduler, candidates, by_key, result.estimates)
    ledger.add_reward_estimates(result.estimates)
    return result
