"""The asynchronous pipeline never learns a group staler than trainer.max_staleness, however slow its verdicts."""

from __future__ import annotations

import threading
import time

from arl_flows.config import load_config
from arl_flows.pipeline import Pipeline, PipelineHooks
from arl_flows.training import RunSession
from storage.ledger import Ledger
from tests.helpers.toy_suite import toy_overrides

SLOW_S = 4.0  # a top-tier call on the first batch's candidates: many learner steps long


class _FirstBatchIsSlow(PipelineHooks):
    """Top-tier calls on the candidates of batch 0 take ``SLOW_S``; every other call answers at once."""

    def __init__(self) -> None:
        self.slow: set[str] = set()
        self.lock = threading.Lock()

    def stage(self, step, name, work):  # noqa: ANN001, ANN201
        out = work()
        if name == "rollout" and step == 0:
            with self.lock:
                self.slow = {c.key for c in out.candidates}
        return out

    def call_tier(self, session, verifier, candidate):  # noqa: ANN001, ANN201
        with self.lock:
            slow = candidate.key in self.slow
        if slow and verifier.name == session.ladder[-1].name:
            time.sleep(SLOW_S)
        return super().call_tier(session, verifier, candidate)


def test_a_group_waiting_for_a_slow_top_tier_is_learned_within_max_staleness(toy_home, sqlite_url) -> None:
    config = toy_overrides(  # the toy suite's fresh policy: most words valid, so nearly every group reaches the top tier
        steps=8,
        pipeline="async",
        tier_concurrency={"toy-vowels": 8},
        trainer={"group_size": 4, "max_new_tokens": 8, "max_staleness": 1},
        streaming={"max_ahead": 2},
    )
    ledger = Ledger(sqlite_url)
    session = RunSession.open(load_config(overrides=config), ledger)
    hooks = _FirstBatchIsSlow()
    report = Pipeline(session, hooks).run()
    session.finish()
    assert hooks.slow, "the test needs batch 0's candidates"
    steps = ledger.training_steps(session.run.id)
    assert [r.step for r in steps] == list(range(8))
    # Every trajectory of batch 0 was learned, and none later than max_staleness versions after it was sampled.
    versions = {t.group_id: t.policy_version for t, _ in ledger.run_trajectories(session.run.id)}
    first = {t.group_id for t, _ in ledger.run_trajectories(session.run.id) if t.step == 0}
    learned_at = {g: r.step for r in steps for g in r.group_ids}
    assert first <= set(learned_at)
    lags = {g: learned_at[g] - versions[g] for g in learned_at}
    assert max(lags.values()) <= 1, lags
    for record in steps:
        stale = {int(k.split("/")[1]): v for k, v in record.metrics.items() if k.startswith("staleness/")}
        assert max(stale) <= 1, (record.step, stale)
    assert sum(report.staleness.values()) == 8 * 2 * 4  # every learned trajectory counted, none dropped
    # The slow verdicts landed after their groups were learned: late, for hindsight, not waited for.
    assert report.late_verdicts > 0
