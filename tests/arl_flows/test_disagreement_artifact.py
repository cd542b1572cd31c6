"""The training run's artifacts list the candidates whose tiers disagree."""

from __future__ import annotations

import json

from storage.ledger import Ledger
from storage.records import Prompt, RewardEstimate, TierDisagreement, TrainingStepRecord, Trajectory


def test_flagged_candidates_become_a_table_artifact(prefect_harness, sqlite_url: str) -> None:
    from prefect import flow, get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from arl_flows.flows import _publish_artifacts

    ledger = Ledger(sqlite_url)
    run = ledger.create_run("flags", {"steps": 1})
    ledger.add_prompts([Prompt(id="code:sum-to-n", suite="code", text="t", goal={"task_id": "sum-to-n"})])
    answers = {"honest": "def solve(n): ...", "printer": "print(5050)"}
    trajs = [
        Trajectory(run_id=run.id, prompt_id="code:sum-to-n", step=0, group_id="g", final_answer=text, candidate_key=f"code:sum-to-n:{name}")
        for name, text in answers.items()
    ]
    ledger.add_trajectories(trajs)
    flag = TierDisagreement(kind="lower_pass_upper_fail", lower="code-exec", upper="code-tests", lower_value=1.0,
                            upper_value=0.0, detail="passes code-exec but fails code-tests: 0/5 hidden tests passed")  # fmt: skip
    ledger.add_reward_estimates([
        RewardEstimate(trajectory_id=trajs[0].id, run_id=run.id, step=0, mean=1.65, std=0.0),
        RewardEstimate(trajectory_id=trajs[1].id, run_id=run.id, step=0, mean=0.25, std=0.0, disagreement=flag),
    ])  # fmt: skip
    ledger.record_step(TrainingStepRecord(run_id=run.id, step=0, metrics={"reward/mean": 0.95}))

    @flow(name="publish-artifacts-probe")
    def publish() -> None:
        _publish_artifacts(ledger, run.id)

    publish()
    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(like_=run.id[:12])))
    by_key = {a.key: a for a in arts}
    table = by_key[f"tier-disagreements-{run.id[:12]}"]
    rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert [(r["answer"], r["kind"], r["lower"], r["upper"]) for r in rows] == [
        ("print(5050)", "lower_pass_upper_fail", "code-exec", "code-tests")
    ]
    assert "| 0 | 2 | 1 | 50.0% |" in by_key[f"report-{run.id[:12]}"].data
