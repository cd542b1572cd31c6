"""Worker-process isolation: a crash, hang or runaway allocation costs one candidate, not the batch."""

from __future__ import annotations

import pytest
from tests.helpers.faulty_work import FaultyVerifier, misbehave

from storage.records import Status
from verifiers.base import Candidate
from verifiers.isolation import WorkerPool

# Long enough that a loaded 2-core machine finishes the other jobs (filling 300 MB takes ~1-2 s there).
HANG_TIMEOUT_S = 5.0


def test_pool_isolates_faults_and_reuses_workers() -> None:
    jobs = ["a", "b", "abort", "c", "hang", "d", "oom", "e", "segfault", "f", "raise", "g"]
    with WorkerPool(workers=1, threads=1, memory_mb=300) as pool:
        outcomes = pool.run(misbehave, jobs, timeout_s=HANG_TIMEOUT_S)
        assert [o.kind for o in outcomes] == [
            "ok", "ok", "crashed", "ok", "timeout", "ok", "out_of_memory", "ok", "crashed", "ok", "error", "ok",
        ]
        by_job = dict(zip(jobs, outcomes, strict=True))
        assert by_job["abort"].error == "worker died with signal SIGABRT"
        assert by_job["segfault"].error == "worker died with signal SIGSEGV"
        assert by_job["oom"].error == "out of memory"
        assert "ValueError: boom" in by_job["raise"].error
        assert "no answer within" in by_job["hang"].error
        # The worker that ran "a" also ran "b": reused, not spawned per candidate.
        assert by_job["a"].result["pid"] == by_job["b"].result["pid"] == by_job["a"].worker_pid
        # A crash replaces the worker; an exception or MemoryError does not.
        assert by_job["c"].result["pid"] != by_job["a"].result["pid"]
        assert by_job["e"].result["pid"] == by_job["d"].result["pid"]
        assert by_job["g"].result["pid"] == by_job["f"].result["pid"]
        last_pid = by_job["g"].result["pid"]
        assert pool.worker_pids == [last_pid]
        # The pool recovered: the next call runs on the surviving worker.
        again = pool.run(misbehave, ["h"], timeout_s=30)
        assert again[0].ok and again[0].result["pid"] == last_pid


def test_pool_sets_thread_counts_and_runs_in_parallel() -> None:
    with WorkerPool(workers=2, threads=2) as pool:
        outcomes = pool.run(misbehave, ["x", "y", "z", "w"], timeout_s=30)
    assert all(o.ok for o in outcomes)
    assert {o.result["omp"] for o in outcomes} == {"2"}
    assert len({o.result["pid"] for o in outcomes}) <= 2


def test_each_task_can_have_its_own_timeout() -> None:
    with WorkerPool(workers=1, threads=1) as pool:
        hang, ok = pool.run(misbehave, ["hang", "a"], timeout_s=[HANG_TIMEOUT_S, 600.0])
        assert (hang.kind, ok.kind) == ("timeout", "ok")
        assert f"no answer within {HANG_TIMEOUT_S:g} s" in hang.error
        with pytest.raises(ValueError, match="2 timeouts for 1 tasks"):
            pool.run(misbehave, ["a"], timeout_s=[1.0, 2.0])


def test_closed_pool_refuses_work() -> None:
    pool = WorkerPool()
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.run(misbehave, ["a"], timeout_s=5)


def _candidates(kinds: list[str]) -> list[Candidate]:
    return [Candidate(key=f"test:{i}:{k}", suite="test", payload=k) for i, k in enumerate(kinds)]


def test_isolated_verifier_turns_faults_into_verdicts() -> None:
    kinds = ["ok1", "abort", "ok2", "hang", "ok3", "oom", "ok4"]
    with FaultyVerifier({"timeout_s": HANG_TIMEOUT_S, "memory_mb": 300, "workers": 1}) as verifier:
        verdicts = verifier.verify_batch(_candidates(kinds))
        assert [v.status for v in verdicts] == [
            Status.ok, Status.failed, Status.ok, Status.timeout, Status.ok, Status.failed, Status.ok,
        ]
        assert verdicts[1].feedback == "worker died with signal SIGABRT"
        assert verdicts[5].feedback == "out of memory"
        assert "no answer within 5 s" in verdicts[3].feedback
        assert all(v.value is None for v in verdicts if v.status != Status.ok)
        # Reused across batches: a second batch runs on the worker left by the first.
        pid = verdicts[-1].values["pid"]
        again = verifier.verify_batch(_candidates(["ok5"]))
        assert again[0].status == Status.ok and again[0].values["pid"] == pid


def test_execution_fields_do_not_change_the_cache_identity() -> None:
    one = FaultyVerifier({"threads": 1, "workers": 1})
    two = FaultyVerifier({"threads": 2, "workers": 2})
    slower = FaultyVerifier({"timeout_s": 5})
    assert one.params_hash == two.params_hash
    assert one.params_hash != slower.params_hash
    assert one.spec().params_hash == one.params_hash


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its reaper is not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def test_a_worker_dies_with_its_parent_mid_task(tmp_path) -> None:
    """A run killed with SIGKILL leaves no worker computing a task nobody will read (it used to run to its end)."""
    import subprocess
    import sys
    import textwrap
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent("""
        from tests.helpers.faulty_work import misbehave
        from verifiers.isolation import WorkerPool

        pool = WorkerPool(workers=1, threads=1)
        pool.run(misbehave, ["a"], timeout_s=300)  # the worker is up
        print(pool.worker_pids[0], flush=True)
        pool.run(misbehave, ["hang"], timeout_s=3600)  # an hour-long task, in flight when the parent dies
    """))
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen([sys.executable, str(script)], cwd=root, env=env, stdout=subprocess.PIPE, text=True)
    try:
        worker = int(parent.stdout.readline())
        time.sleep(1.0)
        assert _running(worker)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 60  # the worker polls every second; a loaded machine may take a while
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _running(worker), f"worker {worker} outlived its parent"
