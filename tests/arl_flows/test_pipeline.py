"""The asynchronous pipeline end to end: every group learned once, recorded policy versions, resume after a stop."""

from __future__ import annotations

import threading
import time

import pytest

from arl_flows.config import load_config
from arl_flows.pipeline import Pipeline, PipelineHooks
from arl_flows.training import RunSession
from storage.ledger import Ledger
from storage.records import RunStatus, Status


from tests.helpers.toy_suite import COUNT_LOG_ENV, read_calls, toy_overrides

CLUSTER_COST = 15.0
FAST = "tests.helpers.toy_suite:ToyLength"
TOP = "tests.helpers.toy_suite:ToyCluster"
COUNTING = "tests.helpers.toy_suite:ToyCounting"


def _async(*, latency: float, steps: int = 3, **streaming: object) -> dict[str, object]:
    """A toy run (a fresh policy of letters: most of its words are valid, so the queue gets calls), a queue on top."""
    return toy_overrides(
        steps=steps,
        pipeline="async",
        tiers=[{"verifier": FAST},
               {"verifier": TOP, "params": {"latency_s": latency, "slots": 4, "cost_per_call": CLUSTER_COST}}],
        scheduler={"policy": "all", "target_low": 2.0, "target_high": 3.0, "budget_per_step": 1000.0,
                   "budget_per_run": 5000.0},
        streaming={"max_ahead": 2, **streaming},
    )


def _learned(ledger: Ledger, run_id: str) -> list[str]:
    return [g for record in ledger.training_steps(run_id) for g in record.group_ids]


@pytest.mark.slow  # 18 s on 2 loaded cores, about 9 s idle
def test_async_run_learns_every_group_once_from_the_policy_that_sampled_it(prefect_harness, toy_home, sqlite_url) -> None:
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from arl_flows.flows import run_training

    summary = run_training(_async(latency=0.2), database_url=sqlite_url)
    assert summary["status"] == "completed" and summary["steps_done"] == 3
    ledger = Ledger(sqlite_url)
    run_id = summary["id"]
    learned = _learned(ledger, run_id)
    assert len(learned) == 3 * 2 and len(set(learned)) == len(learned)  # two groups a step, none twice
    rows = ledger.run_trajectories(run_id)
    by_group: dict[str, list] = {}
    for traj, estimate in rows:
        by_group.setdefault(traj.group_id, []).append((traj, estimate))
        assert traj.policy_version is not None and traj.policy_version <= traj.step
        assert len(traj.completion_ids or []) == len(traj.behaviour_logprobs or []) == traj.completion_tokens > 0
        assert all(lp <= 0.0 for lp in traj.behaviour_logprobs or [])
    for group in learned:
        assert len(by_group[group]) == 4 and all(e is not None for _, e in by_group[group])
    # Staleness: versions between sampler and learner, never more than the batches allowed out.
    steps = ledger.training_steps(run_id)
    for record in steps:
        stale = {int(k.split("/")[1]): v for k, v in record.metrics.items() if k.startswith("staleness/")}
        assert sum(stale.values()) == 8 and max(stale) <= 2
    assert [r.metrics["pipeline/policy_version"] for r in steps] == [1, 2, 3]
    # Nothing left in flight, nothing billed twice: one 15 CPU-s bill per queue verdict.
    assert all(r.status != Status.pending for r in ledger.lab_requests(run_id=run_id))
    keys = {t.candidate_key for t, _ in rows}
    top = [v for v in ledger.verdicts_for(keys) if v.verifier == "toy-cluster"]
    assert top and all(v.status != Status.pending for v in top)
    assert ledger.spend_by_tier(run_id).get("high_fidelity", 0.0) == pytest.approx(CLUSTER_COST * len(top))
    assert ledger.integrity_problems() == []
    # Visible in Prefect: the long-lived parts as task runs of their own, and the live pipeline table.
    with get_client(sync_client=True) as client:
        names = {t.name for t in client.read_task_runs()}
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(like_=f"pipeline-{run_id[:12]}")))
    assert {"sampler", "verification-service"} <= names
    assert arts and "policy version" in (arts[0].description or "")
    # The table ends at the state the run ended in, not at its first snapshot.
    latest = max(arts, key=lambda a: a.created)
    assert "3 steps learned" in (latest.description or "") and "policy version 3" in (latest.description or "")


class _StopAfterFirstStep(PipelineHooks):
    """Ctrl-C as soon as step 0 is checkpointed, while cluster calls are still out."""

    def finished(self, session, summary) -> None:  # noqa: ANN001
        raise KeyboardInterrupt("stop after step 0")


def test_a_stopped_async_run_resumes_its_unlearned_groups_and_calls_in_flight(toy_home, sqlite_url) -> None:
    ledger = Ledger(sqlite_url)
    # Calls that take an hour: the learner takes groups after 1 s as they stand, so cluster calls are out at the stop.
    first = RunSession.open(load_config(overrides=_async(latency=3600.0, steps=2, max_group_wait_s=1.0)), ledger)
    run_id = first.run.id
    with pytest.raises(KeyboardInterrupt):
        Pipeline(first, _StopAfterFirstStep()).run()
    first.finish(RunStatus.interrupted)
    assert [r.step for r in ledger.training_steps(run_id)] == [0]
    in_flight = [r for r in ledger.lab_requests(Status.pending, run_id=run_id)]
    assert in_flight, "the test needs cluster calls in flight at the stop"
    sampled = {t.group_id for t, _ in ledger.run_trajectories(run_id)}
    assert len(sampled) > 2  # the sampler was a batch ahead

    # Resume with a fast cluster (latency is not part of its cache identity: the same verifier).
    config = load_config(overrides=_async(latency=0.05, steps=2))
    second = RunSession.open(config, ledger, resume=run_id)
    pipeline = Pipeline(second)
    report = pipeline.run()
    second.finish()
    assert report.resumed_calls == len(in_flight)
    assert report.resumed_groups == len(sampled) - 2
    assert [r.step for r in ledger.training_steps(run_id)] == [0, 1]
    learned = _learned(ledger, run_id)
    assert len(learned) == len(set(learned)) == 4
    assert set(learned[2:]) <= sampled  # step 1 learned groups sampled before the stop (nothing resampled first)
    assert all(r.status != Status.pending for r in ledger.lab_requests(run_id=run_id))
    keys = {t.candidate_key for t, _ in ledger.run_trajectories(run_id)}
    top = [v for v in ledger.verdicts_for(keys) if v.verifier == "toy-cluster"]
    assert all(v.status != Status.pending for v in top)
    assert ledger.spend_by_tier(run_id).get("high_fidelity", 0.0) == pytest.approx(CLUSTER_COST * len(top))  # none paid twice
    assert ledger.integrity_problems() == []


def test_sampler_waits_for_the_learner_when_max_ahead_batches_are_out(toy_home, sqlite_url) -> None:
    ledger = Ledger(sqlite_url)
    session = RunSession.open(load_config(overrides=_async(latency=0.05, steps=3, max_ahead=1)), ledger)
    seen: list[int] = []
    lock = threading.Lock()

    class Watch(PipelineHooks):
        def stage(self, step, name, work):  # noqa: ANN001, ANN201
            if name == "rollout":
                with lock:
                    seen.append(len(ledger.training_steps(session.run.id)))
            return work()

    report = Pipeline(session, Watch()).run()
    session.finish()
    assert report.steps == 3 and report.batches_sampled == 3
    assert seen == [0, 1, 2]  # with one batch out at most, batch k is sampled only after step k-1 is learned
    assert set(report.staleness) == {0}


@pytest.mark.slow(seconds=55)
def test_async_run_on_a_dask_cluster_sends_top_tier_calls_to_its_workers(
    prefect_harness, toy_home, sqlite_url, tmp_path, monkeypatch
) -> None:
    pytest.importorskip("prefect_dask")
    import os


    from arl_flows.flows import run_training

    import distributed

    clusters: list[object] = []

    class Counted(distributed.LocalCluster):
        def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
            clusters.append(self)
            super().__init__(*args, **kwargs)

    # The service's slot threads submit at once: one cluster must be started, not one per racing thread.
    monkeypatch.setattr(distributed, "LocalCluster", Counted)
    log = tmp_path / "top_calls.log"
    monkeypatch.setenv(COUNT_LOG_ENV, str(log))  # the LocalCluster's worker processes inherit it
    config = _async(latency=0.0, steps=1, slots={"toy-length": 4, "toy-counting": 2})
    config |= {"task_runner": "dask", "tiers": [{"verifier": FAST}, {"verifier": COUNTING, "params": {"cost_per_call": 5.0}}]}
    summary = run_training(config, database_url=sqlite_url)
    assert summary["status"] == "completed" and summary["steps_done"] == 1
    assert len(clusters) == 1
    ledger = Ledger(sqlite_url)
    run_id = summary["id"]
    calls = read_calls(log)
    assert calls, "the run needs top-tier calls"
    assert {pid for _, pid, _, _ in calls}.isdisjoint({os.getpid()})  # computed on the Dask workers, not here
    keys = {t.candidate_key for t, _ in ledger.run_trajectories(run_id)}
    landed = [v for v in ledger.verdicts_for(keys) if v.verifier == "toy-counting"]
    assert sorted(v.candidate_key for v in landed) == sorted(k for e, _, _, k in calls if e == "start")
    assert all(v.status != Status.pending for v in landed)
    assert ledger.lab_requests(Status.pending, run_id=run_id) == []
    assert ledger.spend_by_tier(run_id)["high_fidelity"] == pytest.approx(5.0 * len(landed))
    assert len(_learned(ledger, run_id)) == 2
    assert ledger.integrity_problems() == []


def test_streaming_slots_set_each_tiers_calls_in_flight(toy_home, sqlite_url) -> None:
    """[streaming] slots wins over the verifier's own `slots` (the cluster's 4) and over tier_concurrency."""
    config = _async(latency=0.05, steps=1, slots={"toy-cluster": 3})
    config["tier_concurrency"] = {"toy-cluster": 2, "toy-length": 5}
    session = RunSession.open(load_config(overrides=config), Ledger(sqlite_url))
    try:
        for streaming_slots, expected in [({"toy-cluster": 3}, 3), ({}, 4)]:  # 4: the cluster's own
            session.config.streaming.slots = streaming_slots
            service = Pipeline(session).service
            assert service.slots == {"toy-length": 5, "toy-cluster": expected}
            service.close()
    finally:
        session.finish()


class _PartDies(PipelineHooks):
    """A part of the pipeline raises: the sampler in its second batch's rollout, or the service in its loop."""

    def __init__(self, part: str) -> None:
        self.part_name = part

    def stage(self, step, name, work):  # noqa: ANN001, ANN201
        if self.part_name == "sampler" and name == "rollout" and step == 1:
            raise RuntimeError("sampler died")
        return work()

    def progress(self, session, stats) -> None:  # noqa: ANN001
        if self.part_name == "verification-service" and any(stats["calls"].values()):
            raise SystemExit("service died")  # not an Exception: progress' own guard does not swallow it


@pytest.mark.parametrize("part", ["sampler", "verification-service"])
def test_a_part_that_dies_stops_the_run_and_resume_continues(part, toy_home, sqlite_url) -> None:
    ledger = Ledger(sqlite_url)
    config = load_config(overrides=_async(latency=0.2, steps=2, progress_every_s=0.01))
    first = RunSession.open(config, ledger)
    run_id = first.run.id
    with pytest.raises((RuntimeError, SystemExit), match=f"{part.split('-')[-1]} died"):
        Pipeline(first, _PartDies(part)).run()
    first.finish(RunStatus.failed)
    assert ledger.integrity_problems() == []
    before = {v.cache_key: v for v in ledger.verdicts_for({t.candidate_key for t, _ in ledger.run_trajectories(run_id)})}

    second = RunSession.open(load_config(overrides=_async(latency=0.05, steps=2)), ledger, resume=run_id)
    start = second.start_step
    report = Pipeline(second).run()
    second.finish()
    assert ledger.get_run(run_id).status == RunStatus.completed
    assert [r.step for r in ledger.training_steps(run_id)] == [0, 1] and report.steps == 2 - start
    learned = _learned(ledger, run_id)
    assert len(learned) == len(set(learned)) == 4
    after = {v.cache_key: v for v in ledger.verdicts_for({v.candidate_key for v in before.values()})}
    for key, v in before.items():  # no verdict lost or changed; one in flight may only have become final
        assert key in after and (v.status == Status.pending or (after[key].status, after[key].value) == (v.status, v.value))
    assert all(r.status != Status.pending for r in ledger.lab_requests(run_id=run_id))
    assert ledger.integrity_problems() == []


def test_a_stop_lets_the_local_calls_out_land_before_the_run_ends(toy_home, sqlite_url, tmp_path, monkeypatch) -> None:

    log = tmp_path / "calls.log"
    monkeypatch.setenv(COUNT_LOG_ENV, str(log))
    config = _async(latency=0.0, steps=2, max_group_wait_s=0.2, slots={"toy-counting": 4})
    config["tiers"] = [{"verifier": FAST},
                       {"verifier": COUNTING,
                        "params": {"seconds_per_call": 1.0, "cost_per_call": CLUSTER_COST}}]
    ledger = Ledger(sqlite_url)
    session = RunSession.open(load_config(overrides=config), ledger)

    class StopWhileTheTopTierComputes(PipelineHooks):
        def finished(self, session, summary) -> None:  # noqa: ANN001
            deadline = time.monotonic() + 60
            while not pipeline.service.in_flight["toy-counting"] and time.monotonic() < deadline:
                time.sleep(0.02)
            raise KeyboardInterrupt("stop with top-tier calls computing")

    pipeline = Pipeline(session, StopWhileTheTopTierComputes())
    with pytest.raises(KeyboardInterrupt):
        pipeline.run()
    session.finish(RunStatus.interrupted)
    calls = read_calls(log)
    started = {key for event, _, _, key in calls if event == "start"}
    assert started, "the test needs top-tier calls computing at the stop"
    assert started == {key for event, _, _, key in calls if event == "done"}  # each ran to its end ...
    stored = {v.candidate_key: v for v in ledger.verdicts_for(started) if v.verifier == "toy-counting"}
    assert set(stored) == started and all(v.status != Status.pending for v in stored.values())  # ... and landed
    assert ledger.lab_requests(Status.pending, run_id=session.run.id) == []
