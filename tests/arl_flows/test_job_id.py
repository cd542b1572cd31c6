"""Which job ran a verdict: the batch scheduler's job id, else the Dask worker's name, else none (the run's own)."""

from __future__ import annotations

import sys

import pytest

from arl_flows.flows import _job_id


def test_a_batch_jobs_id_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)  # as when the tests themselves run in a SLURM allocation
    monkeypatch.setenv("PBS_JOBID", "17.server")
    assert _job_id() == "17.server"
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    assert _job_id() == "42"


def test_a_dask_worker_is_named_and_the_runs_own_process_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed import Client, LocalCluster

    for variable in ("SLURM_JOB_ID", "PBS_JOBID"):
        monkeypatch.delenv(variable, raising=False)
    assert _job_id() is None  # Dask is imported here, but this is no worker
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, Client(cluster) as client:
        (name,) = [w["name"] for w in client.scheduler_info()["workers"].values()]
        assert client.submit(_job_id, pure=False).result(timeout=60) == str(name)


def test_a_process_without_dask_does_not_import_it_to_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("SLURM_JOB_ID", "PBS_JOBID"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delitem(sys.modules, "distributed", raising=False)  # as in an `arl run` on threads
    assert _job_id() is None
    assert "distributed" not in sys.modules
