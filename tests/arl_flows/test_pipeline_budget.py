"""The asynchronous pipeline stops sampling once the run's verification budget is committed, and says so."""

from __future__ import annotations

import pytest

from arl_flows.config import load_config
from arl_flows.pipeline import Pipeline
from arl_flows.training import RunSession
from storage.ledger import Ledger
from tests.arl_flows.test_pipeline import CLUSTER_COST, _async

BUDGET = 4 * CLUSTER_COST  # four queue calls for the whole run


def test_sampling_stops_once_the_budget_is_committed_and_the_summary_says_what_the_last_steps_learned(
    toy_home, sqlite_url
) -> None:
    config = _async(latency=0.3, steps=12)
    config["scheduler"] = {**config["scheduler"], "budget_per_step": 2 * CLUSTER_COST, "budget_per_run": BUDGET}
    ledger = Ledger(sqlite_url)
    session = RunSession.open(load_config(overrides=config), ledger)
    report = Pipeline(session).run()
    session.finish()
    run_id = session.run.id
    committed = report.budget_committed_before
    assert committed is not None, "the budget of four queue calls must be committed well before step 12"
    # No batch after the commit: the run learns what was out and ends short of its 12 steps.
    steps = ledger.training_steps(run_id)
    assert committed < len(steps) < 12 and report.batches_sampled < 12
    assert ledger.spend_by_tier(run_id).get("high_fidelity", 0.0) <= BUDGET + 1e-9
    learned = [g for r in steps for g in r.group_ids]
    assert len(learned) == len(set(learned)) == len({t.group_id for t, _ in ledger.run_trajectories(run_id)})
    # Each step says whether it learned after the commit, and from how many top-tier verdicts.
    assert [bool(r.metrics["pipeline/budget_committed"]) for r in steps] == [r.step >= committed for r in steps]
    assert all(0.0 <= r.metrics["pipeline/top_tier_share"] <= 1.0 for r in steps)
    summary = ledger.run_summary(run_id)
    assert summary["status"] == "completed" and summary["steps_done"] == len(steps)
    last = steps[-1].step
    span = f"step {committed}" if committed == last else f"steps {committed}-{last}"
    assert summary["learned_from"].startswith(f"{span} learned")
    assert f"before step {committed}" in summary["learned_from"]
    shares = [pytest.approx(r.metrics["pipeline/top_tier_share"]) for r in steps]
    assert [s["top_tier_share"] for s in summary["steps"]] == shares


def test_a_run_whose_budget_lasts_learns_every_step_and_says_nothing_about_it(toy_home, sqlite_url) -> None:
    ledger = Ledger(sqlite_url)
    session = RunSession.open(load_config(overrides=_async(latency=0.05, steps=2)), ledger)
    report = Pipeline(session).run()
    session.finish()
    assert report.budget_committed_before is None and report.steps == 2
    assert ledger.run_summary(session.run.id)["learned_from"] is None
