"""One training step, written once: sample -> verify -> learn -> checkpoint.

``arl run`` (through the Prefect flow in :mod:`arl_flows.flows`), the flows
and the learning benchmark all call :func:`run_step`; what differs between
them is a :class:`StepHooks` object, not a copy of the loop:

- ``run_tier`` runs one verifier on one batch: inline by default, a Prefect
  task (on threads or a Dask cluster) in the flows, a verdict memo in the
  benchmark;
- ``stage`` wraps each stage: the flows make it a Prefect task and report
  progress to the CLI's bars;
- ``sampled`` and ``verified`` see the step's state after its trajectories
  and rewards are written: the benchmark records and audits there, and may
  replace the estimates GRPO trains on (the ledger keeps the scheduler's);
- ``finished`` reports the step once it is done (artifacts, logs, bars).

Crash safety lives in the stages themselves (:class:`~arl_flows.training.RunSession`),
so every caller gets it: trajectories are written right after sampling,
verdicts as each tier batch returns (with their spend, in one transaction),
and a step counts as done only once its checkpoint is registered together
with its metrics. The stages are separate functions (:func:`sample`,
:func:`verify`, :func:`learn`, :func:`checkpoint`) so that a caller can run
them apart, e.g. the single-stage flows, or a pipeline that samples the next
step while this one is verified.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from arl_flows.training import RunSession, StepSummary, StepState
from storage.records import CheckpointRecord, Verdict
from verifiers import Candidate
from verifiers.scheduler import StepResult

__all__ = ["StepHooks", "checkpoint", "learn", "run_step", "sample", "verify"]

T = TypeVar("T")


class StepHooks:
    """How a caller runs a step; the defaults run everything inline in this process, silently.

    Subclass and override what differs. ``max_batch`` is the number of
    candidates per tier batch handed back to the planner (None: each
    request whole); smaller batches reach the ledger sooner.
    """

    max_batch: int | None = None

    def run_tier(self, session: RunSession, name: str, batch: list[Candidate]) -> list[Verdict]:
        """Verdicts of verifier ``name`` on ``batch``, in order; raise ``TierInterrupted`` to stop with what finished."""
        return session.scheduler.verifier(name).verify_batch(batch)

    def stage(self, step: int, name: str, work: Callable[[], T]) -> T:
        """Run one stage (``rollout``, ``verify``, ``grpo``, ``hindsight``, ``checkpoint``): ``work()``, wrapped."""
        return work()

    def sampled(self, session: RunSession, step: int, state: StepState) -> None:
        """After the step's trajectories are in the ledger."""

    def verified(self, session: RunSession, step: int, state: StepState) -> None:
        """After the step's rewards are in the ledger; may replace ``state.estimates`` (what GRPO trains on)."""

    def finished(self, session: RunSession, summary: StepSummary) -> None:
        """After the step's checkpoint is registered: the step is done."""


def sample(session: RunSession, step: int, hooks: StepHooks) -> StepState:
    """Rollout: G completions per prompt, written to the ledger as trajectories before anything is verified."""
    hooks.stage(step, "rollout", lambda: session.rollout(step))
    state = session.steps[step]
    hooks.sampled(session, step, state)
    return state


def verify(session: RunSession, step: int, hooks: StepHooks) -> StepResult:
    """Route the step's candidates through the tiers under the budget; verdicts land as each batch returns."""

    def run_tier(name: str, batch: list[Candidate]) -> list[Verdict]:
        return hooks.run_tier(session, name, batch)

    result = hooks.stage(step, "verify", lambda: session.verify(step, run_tier, max_batch=hooks.max_batch))
    hooks.verified(session, step, session.steps[step])
    return result


def learn(session: RunSession, step: int, hooks: StepHooks) -> dict[str, Any]:
    """GRPO on the step's rewards, then hindsight distillation of its failures; returns their metrics."""
    metrics = hooks.stage(step, "grpo", lambda: session.grpo(step))
    metrics |= hooks.stage(step, "hindsight", lambda: session.hindsight(step))
    return metrics


def checkpoint(session: RunSession, step: int, hooks: StepHooks, metrics: dict[str, Any]) -> CheckpointRecord:
    """Save the policy and register checkpoint and step in one transaction: from here on the step is done."""
    return hooks.stage(step, "checkpoint", lambda: session.checkpoint(step, metrics))


def run_step(session: RunSession, step: int, hooks: StepHooks | None = None) -> StepSummary:
    """rollout -> verify -> GRPO -> hindsight -> checkpoint, redoing whatever an interrupted attempt left."""
    hooks = hooks or StepHooks()
    t0 = time.perf_counter()
    session.prepare_step(step)
    sample(session, step, hooks)
    verify(session, step, hooks)
    metrics = learn(session, step, hooks)
    metrics["step/seconds"] = time.perf_counter() - t0
    checkpoint(session, step, hooks, metrics)
    summary = session.summary(step, metrics, metrics["step/seconds"])
    hooks.finished(session, summary)
    return summary
