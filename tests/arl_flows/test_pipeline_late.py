"""Late verdicts in the asynchronous pipeline: they update the ledger and reach hindsight, first in line."""

from __future__ import annotations

import time

from arl_flows.config import load_config
from arl_flows.pipeline import Pipeline, PipelineHooks
from arl_flows.training import RunSession
from storage.ledger import Ledger
from storage.records import Status
from tests.helpers.toy_suite import toy_overrides


class _WaitForALateVerdict(PipelineHooks):
    """Step 1's GRPO waits until a late verdict is queued, so step 2 has one to hand to hindsight (no race on timing)."""

    pipeline: Pipeline

    def stage(self, step, name, work):  # noqa: ANN001, ANN201
        if step == 1 and name == "grpo":
            deadline = time.monotonic() + 120
            while self.pipeline.service.late.empty() and time.monotonic() < deadline:
                time.sleep(0.05)
        return work()


def test_a_verdict_after_its_group_was_learned_updates_the_ledger_and_feeds_hindsight(toy_home, sqlite_url) -> None:
    # A toy run (a fresh policy of letters: most of its words are valid, so the queue gets calls), a queue on top.
    config = toy_overrides(
        steps=3,
        pipeline="async",
        tiers=[{"verifier": "tests.helpers.toy_suite:ToyLength"},
               {"verifier": "tests.helpers.toy_suite:ToyCluster", "params": {"latency_s": 0.5, "slots": 8, "cost_per_call": 15.0}}],
        # The learner takes each group 0.2 s after sampling, as it stands: every queue verdict lands late.
        streaming={"max_ahead": 2, "max_group_wait_s": 0.2, "learner_idle": "hindsight"},
        hindsight={"enabled": True, "threshold": 1.0},  # every trajectory counts as failed: all of them are hindsight data
    )
    ledger = Ledger(sqlite_url)
    session = RunSession.open(load_config(overrides=config), ledger)
    given: set[str] = set()  # candidate keys of the failures hindsight was given (it keeps one trajectory per key)
    suite_hindsight = session.suite.hindsight

    def spy(policy, failures):  # noqa: ANN001, ANN202
        given.update(f.trajectory.candidate_key for f in failures)
        return suite_hindsight(policy, failures)

    session.suite.hindsight = spy  # type: ignore[method-assign]
    hooks = _WaitForALateVerdict()
    pipeline = hooks.pipeline = Pipeline(session, hooks)
    drained: list = []  # late-verdict trajectories the learner picked up (before a step, or while idle)
    drain = pipeline._drain_late

    def record() -> None:
        before = len(pipeline._late)
        drain()
        drained.extend(pipeline._late[before:])

    pipeline._drain_late = record  # type: ignore[method-assign]
    report = pipeline.run()
    session.finish()
    assert report.late_verdicts > 0 and report.late_distilled > 0

    run_id = session.run.id
    rows = ledger.run_trajectories(run_id)
    top = {v.candidate_key: v for v in ledger.verdicts_for({t.candidate_key for t, _ in rows}) if v.verifier == "toy-cluster"}
    assert top and all(v.status != Status.pending for v in top.values())
    # The ledger's estimates of learned trajectories with a top-tier verdict cite it: updated after the group was taken.
    learned = {g for r in ledger.training_steps(run_id) for g in r.group_ids}
    late_trajs = [(t, e) for t, e in rows if t.group_id in learned and t.candidate_key in top and top[t.candidate_key].status == Status.ok]
    assert late_trajs
    assert all(e is not None and e.value_std is not None and e.value_std <= 0.5 for _, e in late_trajs)
    # Every late-verdict trajectory the learner picked up that still counts as failed went to hindsight.
    failed = {x.trajectory.candidate_key for x in drained if x.estimate.mean < 1.0 and x.trajectory.completion_ids}
    assert failed and failed <= given
    used = sum(r.metrics.get("pipeline/late_used", 0.0) for r in ledger.training_steps(run_id))
    assert used + report.idle_distill_steps > 0
