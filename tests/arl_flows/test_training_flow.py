"""training_run, resume, the single-stage flows and lab_results under one Prefect test harness, on the core's toy suite."""

from __future__ import annotations

import math

import pytest

from storage.ledger import Ledger
from storage.records import LabRequest, RunStatus, Status, Tier, Verdict
from tests.helpers.toy_suite import toy_overrides


def _artifacts(run_id: str) -> dict[str, object]:
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(like_=run_id[:12])))
    return {a.key: a for a in arts}


def test_training_run_completes_and_the_ledger_adds_up(prefect_harness, toy_home, sqlite_url) -> None:
    from arl_flows.flows import run_training

    summary = run_training(toy_overrides(), database_url=sqlite_url)  # any suite runs so: the core's toy one
    assert summary["status"] == "completed" and summary["steps_done"] == 2
    ledger = Ledger(sqlite_url)
    run_id = summary["id"]
    assert summary["trajectories"] == 2 * 2 * 4
    # Every trajectory has a reward estimate, and every estimate that claims a fidelity cites verdicts.
    for step in (0, 1):
        rows = ledger.step_trajectories(run_id, step)
        assert len(rows) == 8 and all(est is not None for _, est in rows)
    assert ledger.integrity_problems() == []
    # Spend adds up: the run's spend equals the CPU-seconds of the verdicts it paid for.
    spend = ledger.spend_by_tier(run_id)
    assert set(spend) <= {t.value for t in Tier}
    assert spend.get("fast", 0.0) > 0.0
    # 'all' sends every valid candidate through the ladder: each valid one reached the top tier.
    keys = {t.candidate_key for s in (0, 1) for t, _ in ledger.step_trajectories(run_id, s)}
    verdicts = ledger.verdicts_for(keys)
    valid = {v.candidate_key for v in verdicts if v.verifier == "toy-length" and v.status == Status.ok}
    top = {v.candidate_key for v in verdicts if v.verifier == "toy-vowels"}
    assert valid <= top
    assert len(ledger.checkpoints(run_id)) == 2 and [s.step for s in ledger.training_steps(run_id)] == [0, 1]
    metrics = ledger.training_steps(run_id)[0].metrics
    assert "reward/mean" in metrics
    assert "loss/policy" in metrics or metrics.get("step/skipped") == 1.0  # all-equal groups are skipped (DAPO)
    arts = _artifacts(run_id)
    assert any(k.startswith("best-candidates-") for k in arts)
    assert any(k.startswith("report-") for k in arts)
    assert any(k.startswith("progress-") for k in arts)
    report = next(a for k, a in arts.items() if k.startswith("report-"))
    assert "Spend by tier" in report.data and "data:image/png;base64" in report.data
    # Each stage is a task run named for it ("grpo-update-<id>": what the crash benchmark waits for).
    from prefect import get_client

    with get_client(sync_client=True) as client:
        stages = {t.name.rsplit("-", 1)[0] for t in client.read_task_runs()}
    assert {"rollout", "grpo-update", "hindsight-distill", "checkpoint"} <= stages


@pytest.mark.slow  # 11 s on 2 loaded cores, about 5 s idle
def test_resume_continues_from_the_last_completed_step_without_repaying(prefect_harness, toy_home, sqlite_url) -> None:  # noqa: ANN001
    from arl_flows.config import load_config
    from arl_flows.flows import run_training
    from arl_flows.step import run_step
    from arl_flows.training import RunSession

    # An "interrupted" run: one step done, then the process stops.
    ledger = Ledger(sqlite_url)
    session = RunSession.open(load_config(overrides=toy_overrides(steps=3)), ledger)
    run_step(session, 0)
    session.prepare_step(1)
    session.rollout(1)  # half a step: trajectories written, nothing verified
    session.finish(RunStatus.interrupted)
    run_id = session.run.id
    paid_before = {v.cache_key for v in ledger.verdicts_for([t.candidate_key for t, _ in ledger.step_trajectories(run_id, 0)])}

    summary = run_training(toy_overrides(steps=3), resume=run_id, database_url=sqlite_url)
    assert summary["status"] == "completed" and summary["steps_done"] == 3
    assert [s.step for s in ledger.training_steps(run_id)] == [0, 1, 2]
    assert len(ledger.step_trajectories(run_id, 1)) == 8  # the half step was redone, not duplicated
    after = ledger.verdicts_for([t.candidate_key for t, _ in ledger.step_trajectories(run_id, 0)])
    assert {v.cache_key for v in after} == paid_before  # nothing of step 0 was verified again
    assert ledger.integrity_problems() == []


def test_single_stage_flows_and_lab_results(prefect_harness, toy_home, sqlite_url) -> None:
    from arl_flows.config import load_config
    from arl_flows.flows import LabSubmission, grpo_update, hindsight_distill, lab_results, rollout, verify
    from arl_flows.training import RunSession

    ledger = Ledger(sqlite_url)
    session = RunSession.open(load_config(overrides=toy_overrides(steps=1)), ledger)
    run_id = session.run.id
    session.finish(RunStatus.interrupted)  # nothing in memory: the flows must rebuild from the ledger
    ids = rollout(run_id, 0, database_url=sqlite_url)
    assert len(ids) == 8
    from arl_flows import flows as flows_module

    flows_module._SESSIONS.clear()  # as if verify ran in another process
    out = verify(run_id, 0, database_url=sqlite_url)
    distinct = {t.candidate_key for t, _ in ledger.step_trajectories(run_id, 0)}
    assert out["calls"]["toy-length"] == len(distinct) and out["rounds"] >= 1  # fresh ledger: nothing cached
    assert all(est is not None for _, est in ledger.step_trajectories(run_id, 0))
    flows_module._SESSIONS.clear()
    metrics = grpo_update(run_id, 0, database_url=sqlite_url)
    assert "reward/mean" in metrics
    hindsight_distill(run_id, 0, database_url=sqlite_url)

    # lab_results: a pending lab verdict becomes ok.
    ledger.put_verdicts([Verdict(candidate_key="toy:aloe", verifier="lab", version="1", params_hash="p",
                                 tier=Tier.lab, status=Status.pending, request_id="req-1")])
    ledger.create_lab_requests([LabRequest(id="req-1", candidate_key="toy:aloe", payload="aloe", verifier="lab",
                                           version="1", params_hash="p", run_id=run_id)])
    result = lab_results(LabSubmission(request_id="req-1", value=8.1, notes="UV-vis"), database_url=sqlite_url)
    assert result["status"] == "ok" and math.isclose(result["value"], 8.1)
    assert ledger.lab_requests(Status.pending) == []
    with pytest.raises(Exception, match="already has a result"):
        lab_results(LabSubmission(request_id="req-1", value=1.0), database_url=sqlite_url)


def test_report_names_tiers_that_were_down(sqlite_url) -> None:
    from arl_flows.report import build_report
    from storage.records import TrainingStepRecord

    ledger = Ledger(sqlite_url)
    run = ledger.create_run("down", {"steps": 2, "tiers": [{"verifier": "rdkit-eht"}, {"verifier": "gfn2-xtb"}]})
    ledger.record_step(TrainingStepRecord(run_id=run.id, step=0, metrics={"reward/mean": 0.1}))
    ledger.record_step(TrainingStepRecord(run_id=run.id, step=1, metrics={"reward/mean": 0.2, "tiers/unavailable": ["gfn2-xtb"]}))
    md = build_report(ledger, run.id).markdown
    assert "## Tier health" in md and "step 1: `gfn2-xtb` failed every recent call" in md
