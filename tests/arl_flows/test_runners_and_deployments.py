"""The Dask task runner on a LocalCluster, and served deployments triggered with parameters."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage.ledger import Ledger
from storage.records import LabRequest, Status, Tier, Verdict


@pytest.mark.slow(seconds=75)  # 76 s on 2 busy cores (2026-12-06), about 26 s idle
def test_dask_task_runner_on_a_local_cluster(prefect_harness, flow_home, overrides, sqlite_url) -> None:
    pytest.importorskip("prefect_dask")
    from arl_flows.flows import run_training

    summary = run_training(overrides(steps=1, task_runner="dask"), database_url=sqlite_url)
    assert summary["status"] == "completed" and summary["steps_done"] == 1
    ledger = Ledger(sqlite_url)
    assert ledger.spend_by_tier(summary["id"]).get("fast", 0) > 0
    assert ledger.integrity_problems() == []


@pytest.mark.slow
def test_ray_task_runner_where_prefect_ray_installs(prefect_harness, flow_home, overrides, sqlite_url) -> None:
    pytest.importorskip("prefect_ray", reason="prefect-ray is not installed (pip install 'arl[ray]')")
    from arl_flows.flows import run_training

    summary = run_training(overrides(steps=1, task_runner="ray"), database_url=sqlite_url)
    assert summary["status"] == "completed" and summary["steps_done"] == 1
    assert Ledger(sqlite_url).spend_by_tier(summary["id"]).get("fast", 0) > 0


def _wait_for_deployment(name: str, seconds: float = 120):  # noqa: ANN202
    from prefect import get_client

    deadline = time.monotonic() + seconds
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            try:
                return client.read_deployment_by_name(name)
            except Exception:  # noqa: BLE001 - not registered yet
                time.sleep(1)
    raise AssertionError(f"deployment {name} was not registered within {seconds} s")


@pytest.mark.slow(seconds=75)  # 124 s on 2 loaded cores, about 62 s idle
def test_arl_deploy_serves_scheduled_deployments_that_run_with_parameters(
    prefect_harness, flow_home, overrides, sqlite_url, tmp_path: Path
) -> None:
    from prefect.deployments import run_deployment

    ledger = Ledger(sqlite_url)
    ledger.put_verdicts([Verdict(candidate_key="molecules:CCN", verifier="lab", version="1", params_hash="p",
                                 tier=Tier.lab, status=Status.pending, request_id="req-d")])
    ledger.create_lab_requests([LabRequest(id="req-d", candidate_key="molecules:CCN", payload="CCN", verifier="lab",
                                           version="1", params_hash="p")])
    env = os.environ | {"PREFECT_API_URL": prefect_harness, "ARL_HOME": str(flow_home)}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from arl_flows.cli import main; main()", "deploy", "--cron", "0 3 * * *",
         "--name", "nightly", "--url", sqlite_url],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        dep = _wait_for_deployment("training_run/nightly")
        assert any(getattr(s.schedule, "cron", None) == "0 3 * * *" for s in dep.schedules)
        _wait_for_deployment("lab_results/lab-results")
        run = run_deployment(
            "lab_results/lab-results",
            parameters={"submission": {"request_id": "req-d", "value": 7.25, "notes": "from the UI form"}},
            timeout=180, poll_interval=1,
        )
        assert run.state.is_completed(), run.state
        assert ledger.lookup_verdicts(["molecules:CCN"], "lab", "1", "p")["molecules:CCN"].value == 7.25
        run = run_deployment(
            "training_run/nightly", parameters={"config": overrides(steps=1, name="deployed")}, timeout=600, poll_interval=2
        )
        assert run.state.is_completed(), run.state
        assert any(r.name == "deployed" and r.steps_done == 1 for r in ledger.list_runs())
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
