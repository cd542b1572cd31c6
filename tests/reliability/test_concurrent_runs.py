"""Two training runs and a ``lab_results`` flow writing to one ledger at once (SQLite, then PostgreSQL).

Three processes share one ledger: two ``arl run`` processes (different names
and seeds, each with its own counting top tier log, see ``benchmarks/counting_tier.py``)
and a third that answers pre-created lab requests through the ``lab_results``
flow while the runs train. The test checks:

- **no failure**: all three exit 0 and no output mentions ``database is locked``;
- **no lost rows**: each run is ``completed`` with one training step, one
  checkpoint and prompts x group trajectories (each with a reward estimate)
  per step; every top-tier verdict a run computed (its count log's ``done``
  lines) is in the ledger; every lab request is answered with the submitted
  value and its verdict is ``ok`` with that value;
- **no duplicated rows**: one spend row per (run, step, verifier), one verdict
  per cache key, one training step and checkpoint per (run, step);
- **each run's spend adds up**, defined exactly as: the top-tier spend the
  ledger charged run R (sum of its ``spend`` rows for the counting tier, and
  their ``calls``) equals the declared price (5.0 CPU-s) times the number of
  top-tier computations R's own process made, counted by the verifier itself.
  A verdict another run already stored is a cache hit and is not charged; a
  candidate both runs computed at the same moment is charged to both, because
  both paid for it. (The fast tier charges measured CPU time, which has no
  independent count to compare with, so the exact check is on the top tier.)
- ``Ledger.integrity_problems()`` is empty.

Slow: a pretrained prior, a Prefect server and three Python processes that
each import torch and Prefect take well over a minute on two cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from benchmarks import crash
from benchmarks.counting_tier import read_count_log

ROOT = crash.ROOT

pytestmark = pytest.mark.slow

STEPS = 2
LAB_REQUESTS = 8

_LAB_SCRIPT = """
import json, sys, time
from arl_flows.flows import LabSubmission, lab_results
from storage.ledger import LedgerError
url, answers = sys.argv[1], json.loads(sys.argv[2])
done, refused = 0, 0
for request_id, value in answers:
    lab_results(LabSubmission(request_id=request_id, value=value, notes="concurrency test"), database_url=url)
    done += 1
    try:  # a duplicate submission must be refused, never overwrite
        lab_results(LabSubmission(request_id=request_id, value=value + 1.0), database_url=url)
    except LedgerError:
        refused += 1
    time.sleep(0.3)
print(json.dumps({"submitted": done, "refused": refused}))
"""


@pytest.fixture(scope="module")
def harness_env(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """(ARL_HOME with the tiny prior, Prefect API URL) shared by the tests of this module."""
    home = tmp_path_factory.mktemp("concurrent_arl_home")
    crash.ensure_prior(home)
    with crash.PrefectServer(tmp_path_factory.mktemp("prefect")) as server:
        yield home, server.api_url


def _pending_lab_requests(url: str) -> list[tuple[str, float]]:
    """Store LAB_REQUESTS pending lab verdicts + requests of known QM9 molecules; return (request id, true gap)."""
    from arl_flows.suites.molecules.datasets import QM9_GAP_CSV
    from storage.ledger import Ledger
    from verifiers import registry
    from arl_flows.suites.molecules.lab import load_reference_table
    from arl_flows.suites.molecules.chemistry import make_candidate

    table = load_reference_table(QM9_GAP_CSV)
    smiles = sorted(table)[100 : 100 + LAB_REQUESTS]
    lab = registry.create("lab")
    candidates = [make_candidate(s) for s in smiles]
    verdicts = lab.verify_batch(candidates)
    with Ledger(url) as ledger:
        ledger.put_verdicts(verdicts)
        requests = lab.lab_requests(candidates, verdicts)
        ledger.create_lab_requests(requests)
    assert len(requests) == LAB_REQUESTS
    return [(r.id, table[s]) for r, s in zip(requests, smiles, strict=True)]


def _rows(url: str, sql: str) -> list[tuple]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


def _concurrent_runs(url: str, tmp_path: Path, home: Path, api_url: str) -> None:
    from storage.ledger import Ledger

    answers = _pending_lab_requests(url)
    runs = []
    for i in range(2):
        config = crash.write_config(tmp_path / f"run{i}.toml", name=f"concurrent-{i}", steps=STEPS, seed=10 + i)
        log = tmp_path / f"top_calls_{i}.log"
        env = crash.arl_env(home, api_url, log)
        runs.append((crash.RunProcess(["run", "--config", str(config), "--url", url, "--verbose"], env, tmp_path / f"run{i}.out"), log))
    lab = subprocess.Popen(
        [sys.executable, "-c", _LAB_SCRIPT, url, json.dumps(answers)], env=crash.arl_env(home, api_url, tmp_path / "unused.log"),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lab_out, _ = lab.communicate(timeout=900)
    codes = [proc.wait(timeout=900) for proc, _ in runs]
    for proc, _ in runs:
        proc.kill_group()
    outputs = [proc.text() for proc, _ in runs] + [lab_out]

    assert codes == [0, 0] and lab.returncode == 0, f"exit codes {codes}, lab {lab.returncode}:\n" + "\n----\n".join(o[-3000:] for o in outputs)
    for out in outputs:
        assert "database is locked" not in out.lower()
    assert json.loads(lab_out.strip().splitlines()[-1]) == {"submitted": LAB_REQUESTS, "refused": LAB_REQUESTS}

    run_ids = [crash._run_id(proc.text()) for proc, _ in runs]
    assert None not in run_ids and len(set(run_ids)) == 2
    with Ledger(url) as ledger:
        assert ledger.integrity_problems() == []
        for run_id, (_, log) in zip(run_ids, runs, strict=True):
            run = ledger.get_run(run_id)
            assert (run.status.value, run.steps_done) == ("completed", STEPS)
            assert [s.step for s in ledger.training_steps(run_id)] == list(range(STEPS))
            assert [c.step for c in ledger.checkpoints(run_id)] == list(range(STEPS))
            for step in range(STEPS):
                rows = ledger.step_trajectories(run_id, step)
                assert len(rows) == crash.PROMPTS_PER_STEP * crash.GROUP_SIZE
                assert all(est is not None for _, est in rows)
            # Every top-tier verdict this run computed is stored.
            calls = read_count_log(log)
            computed = [key for event, _, _, key in calls if event == "done"]
            stored = {v.candidate_key for v in ledger.verdicts_for(computed, verifiers=[crash.TOP_TIER])}
            assert set(computed) <= stored
            # Spend adds up: charged top-tier calls == calls the verifier counted itself.
            starts = sum(1 for event, *_ in calls if event == "start")
            billed = _rows(url, f"SELECT SUM(calls), SUM(cost_s) FROM spend WHERE run_id = '{run_id}' AND verifier = '{crash.TOP_TIER}'")[0]
            assert (int(billed[0] or 0), float(billed[1] or 0.0)) == (starts, pytest.approx(5.0 * starts))
        for request in ledger.lab_requests():
            assert request.status.value == "ok"
        by_id = {r.id: r for r in ledger.lab_requests()}
        for request_id, value in answers:
            request = by_id[request_id]
            (verdict,) = ledger.verdicts_for([request.candidate_key], verifiers=["lab"])
            assert (request.value, verdict.status.value, verdict.value) == (value, "ok", value)

    # No duplicated rows. (Spend is one row per tier batch, so its rows are checked by the sums above:
    # a duplicated spend row would bill more calls than the verifier counted.)
    assert _rows(url, "SELECT COUNT(*) FROM spend")[0][0] > 0
    verdict_keys = Counter(_rows(url, "SELECT candidate_key, verifier, version, params_hash FROM verdicts"))
    assert max(verdict_keys.values()) == 1


@pytest.mark.slow(seconds=110)  # 117 s measured with its fixture, 2026-12-06
def test_two_runs_and_lab_results_on_sqlite(harness_env, tmp_path: Path) -> None:  # noqa: ANN001
    home, api_url = harness_env
    _concurrent_runs(f"sqlite:///{tmp_path / 'shared.db'}", tmp_path, home, api_url)


@pytest.mark.postgres
@pytest.mark.slow(seconds=60)
def test_two_runs_and_lab_results_on_postgres(harness_env, postgres_url: str, tmp_path: Path) -> None:  # noqa: ANN001
    home, api_url = harness_env
    _concurrent_runs(postgres_url, tmp_path, home, api_url)
