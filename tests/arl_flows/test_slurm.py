"""The DFT tier on a real batch scheduler: Dask workers started as SLURM jobs by dask-jobqueue.

Needs a SLURM cluster that answers ``sinfo`` (``.ci/slurm-up`` starts a single-node one on this machine).
Without one the tests skip, saying so; in CI (``CI=true``) they fail instead, so a broken cluster is seen.
The cluster keeps no accounting database, so finished jobs are read from its job completion log
(``JobCompLoc``, see ``scontrol show config``) and running ones from ``squeue``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from storage.ledger import Ledger
from storage.records import Status, Verdict

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

ROOT = Path(__file__).resolve().parents[2]
DFT = "pyscf-b3lyp"


def _sh(*args: str) -> str:
    return subprocess.run(args, capture_output=True, text=True, timeout=20, check=True).stdout


@pytest.fixture(scope="module")
def slurm_partition() -> str:
    """The default partition of a SLURM cluster that answers; skip (or fail in CI) without one."""
    pytest.importorskip("dask_jobqueue", reason="dask-jobqueue is not installed (pip install 'arl[dask]')")
    reason = None
    if shutil.which("sinfo") is None:
        reason = "SLURM is not installed (run .ci/slurm-up as root to start a single-node cluster)"
    else:
        try:
            lines = _sh("sinfo", "-h", "-o", "%P %T").split("\n")
        except (subprocess.SubprocessError, OSError) as exc:
            lines, reason = [], f"SLURM does not answer sinfo ({exc}); run .ci/slurm-up"
        usable = [ln.split()[0] for ln in lines if ln.strip() and ln.split()[1] in ("idle", "mixed", "allocated")]
        if reason is None and not usable:
            reason = f"no SLURM partition has a usable node ({' / '.join(lines).strip()}); run .ci/slurm-up"
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI needs the SLURM cluster: {reason}")
        pytest.skip(reason)
    default = [p for p in usable if p.endswith("*")]
    return (default or usable)[0].rstrip("*")


def _job_history() -> str:
    """Finished jobs, one line each, from the job completion log (this cluster keeps no sacct database)."""
    match = re.search(r"^JobCompLoc\s*=\s*(\S+)", _sh("scontrol", "show", "config"), re.MULTILINE)
    path = Path(match.group(1)) if match else None
    return path.read_text() if path is not None and path.is_file() else ""


def _slurm_config(partition: str, **extra: object) -> dict[str, object]:
    """One step of 1 prompt x 3 samples; the DFT tier (minimal basis, small molecules) runs in SLURM jobs."""
    from tests.helpers.tiny_prior import quick_overrides

    return quick_overrides(
        name="slurm-run", steps=1, rollout={"prompts_per_step": 1},
        trainer={"group_size": 3, "max_new_tokens": 32, "temperature": 0.8},
        tiers=[
            {"verifier": "rdkit-eht"},
            {"verifier": DFT, "params": {"basis": "sto-3g", "conv_tol": 1e-6, "timeout_s": 300.0, "workers": 1}},
        ],
        tier_concurrency={},
        cluster={"kind": "slurm", "queue": partition, "cores": 1, "memory": "1GB", "walltime": "00:10:00",
                 "min_jobs": 0, "max_jobs": 2, **extra},
    )


def _dft_verdicts(ledger: Ledger, run_id: str) -> list[Verdict]:
    keys = {t.candidate_key for t, _ in ledger.run_trajectories(run_id) if t.candidate_key}
    return [v for v in ledger.verdicts_for(keys, [DFT]) if v.status != Status.pending]


def _wait_for_history(job_ids: set[str], seconds: float = 60.0) -> str:
    """The completion log once every job in ``job_ids`` is in it (the cluster cancels its jobs on close)."""
    deadline = time.monotonic() + seconds
    history = _job_history()
    while not all(f"JobId={j} " in history for j in job_ids) and time.monotonic() < deadline:
        time.sleep(1)
        history = _job_history()
    return history


def test_the_dft_tier_runs_in_slurm_jobs_and_the_ledger_names_them(
    slurm_partition, prefect_harness, flow_home, sqlite_url, monkeypatch
) -> None:
    from arl_flows.flows import run_training

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the jobs' workers import this checkout
    seen: set[str] = set()
    stop = threading.Event()

    def watch() -> None:  # what squeue shows while the run is in flight
        while not stop.is_set():
            try:
                seen.update(_sh("squeue", "-h", "-n", "arl-tier", "-o", "%i").split())
            except (subprocess.SubprocessError, OSError):
                pass
            stop.wait(1.0)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        summary = run_training(_slurm_config(slurm_partition), database_url=sqlite_url)
    finally:
        stop.set()
        watcher.join()
    assert summary["status"] == "completed" and summary["steps_done"] == 1
    ledger = Ledger(sqlite_url)
    verdicts = _dft_verdicts(ledger, summary["id"])
    assert verdicts, "no candidate reached the DFT tier"
    jobs = {v.job_id for v in verdicts}
    assert None not in jobs and all(j.isdigit() for j in jobs), jobs  # SLURM job ids, not the run's own process
    assert jobs <= seen, f"the verdicts' jobs {jobs} were not in squeue while the run ran (saw {seen})"
    history = _wait_for_history(jobs)
    for job in jobs:
        assert re.search(rf"JobId={job} .*Name=arl-tier", history), f"job {job} is not in the job completion log"
    assert ledger.spend_by_tier(summary["id"]).get("high_fidelity", 0) > 0
    assert ledger.integrity_problems() == []


def _dft_running_in(job: str) -> bool:
    """Whether a PySCF worker process runs inside SLURM job ``job`` (its DFT call is in flight)."""
    try:
        pids = [p for p in _sh("scontrol", "listpids", job).split() if p.isdigit()]
    except (subprocess.SubprocessError, OSError):
        return False
    for pid in pids:
        try:
            if b"pyscf" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def test_a_job_killed_mid_call_is_replaced_and_its_call_is_paid_once(
    slurm_partition, prefect_harness, flow_home, sqlite_url, monkeypatch
) -> None:
    """``scancel`` of the job running a DFT call (as a walltime kill does): Dask runs the call again in a new job."""
    from arl_flows.flows import run_training

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    killed: list[str] = []
    stop = threading.Event()

    def kill_the_first_job_in_a_dft_call() -> None:
        while not stop.is_set() and not killed:
            try:
                running = _sh("squeue", "-h", "-n", "arl-tier", "-t", "R", "-o", "%i").split()
            except (subprocess.SubprocessError, OSError):
                running = []
            for job in running:
                if _dft_running_in(job):
                    subprocess.run(["scancel", job], timeout=20, check=True)
                    killed.append(job)
                    break
            stop.wait(0.5)

    killer = threading.Thread(target=kill_the_first_job_in_a_dft_call, daemon=True)
    killer.start()
    try:
        summary = run_training(_slurm_config(slurm_partition, max_jobs=1), database_url=sqlite_url)
    finally:
        stop.set()
        killer.join()
    assert killed, "no job was seen running a DFT call"
    assert summary["status"] == "completed" and summary["steps_done"] == 1
    ledger = Ledger(sqlite_url)
    verdicts = _dft_verdicts(ledger, summary["id"])
    assert verdicts and all(v.job_id and v.job_id != killed[0] for v in verdicts), [v.job_id for v in verdicts]
    (dft_spend,) = [r for r in ledger.spend_by_verifier(summary["id"]) if r["verifier"] == DFT]
    assert dft_spend["calls"] == len(verdicts)  # each call charged once: the killed job's attempt never was
    assert dft_spend["cost_s"] == pytest.approx(sum(v.cost_s for v in verdicts))
    assert re.search(rf"JobId={killed[0]} .*JobState=CANCELLED", _wait_for_history({killed[0]}))
    assert ledger.integrity_problems() == []


def test_a_run_killed_with_a_dft_job_in_flight_resumes_and_pays_each_call_once(
    slurm_partition, prefect_harness, flow_home, sqlite_url, tmp_path
) -> None:
    """SIGKILL of ``arl run`` while a SLURM job computes a DFT call; ``arl run --resume`` finishes the run."""
    tomli_w = pytest.importorskip("tomli_w")
    from benchmarks import crash

    config = tmp_path / "run.toml"
    config.write_text(tomli_w.dumps(_slurm_config(slurm_partition)))
    env = crash.arl_env(flow_home, prefect_harness, tmp_path / "count.log") | {"PYTHONPATH": str(ROOT)}
    run = crash.RunProcess(["run", "--config", str(config), "--url", sqlite_url], env, tmp_path / "run.log")
    in_flight: list[str] = []

    def dft_in_flight(_lines: object) -> bool:
        try:
            running = _sh("squeue", "-h", "-n", "arl-tier", "-t", "R", "-o", "%i").split()
        except (subprocess.SubprocessError, OSError):
            return False
        in_flight[:] = [j for j in running if _dft_running_in(j)]
        return bool(in_flight)

    try:
        assert run.wait_for(dft_in_flight, timeout=480, poll=0.5), run.text()[-3000:]
    finally:
        run.kill_group()
    ledger = Ledger(sqlite_url)
    (killed_run,) = ledger.list_runs()
    assert killed_run.status.value == "running"  # SIGKILL: nothing could mark it

    resumed = crash.RunProcess(["run", "--resume", killed_run.id, "--url", sqlite_url], env, tmp_path / "resume.log")
    rc = resumed.wait(900)
    if rc is None:
        resumed.kill_group()
    assert rc == 0, resumed.text()[-3000:]
    assert ledger.get_run(killed_run.id).status.value == "completed"
    verdicts = _dft_verdicts(ledger, killed_run.id)
    assert verdicts and all(v.job_id and v.job_id not in in_flight for v in verdicts), (in_flight, verdicts)
    (dft_spend,) = [r for r in ledger.spend_by_verifier(killed_run.id) if r["verifier"] == DFT]
    assert dft_spend["calls"] == len(verdicts)  # the call lost with the killed run was never charged
    # The orphaned job's worker lost its scheduler and ended by itself (death timeout), holding no core.
    assert all(f"JobId={j} " in _wait_for_history(set(in_flight), seconds=120) for j in in_flight)
    assert ledger.integrity_problems() == []
