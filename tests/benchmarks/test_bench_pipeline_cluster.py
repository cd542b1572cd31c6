"""``arl bench pipeline --cluster``: the real top tier on Dask workers started as batch jobs by the product's builder.

The cheap tests need no scheduler: the settings parse, become the job settings ``arl run`` would use, and a bad one is
one line. The last one starts a SLURM job and runs one DFT call in it (marked ``slurm``: ``.ci/slurm-up``).
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from arl_flows.cli import app
from benchmarks.pipeline import PipelineBenchConfig, bench_cluster
from tests.arl_flows.test_slurm import slurm_partition  # noqa: F401 - the fixture (skips without SLURM, fails in CI)

TOML = """
[cluster]
kind = "slurm"
queue = "debug"
memory = "3GB"
walltime = "02:00:00"
"""


def test_the_cluster_defaults_to_local_and_batch_jobs_default_to_dask_workers_jobs() -> None:
    assert PipelineBenchConfig(real=True).cluster.kind == "local"  # --real stays on a LocalCluster
    cluster = bench_cluster(PipelineBenchConfig(real=True, dask_workers=3, cluster={"kind": "slurm", "queue": "debug"}))
    assert (cluster.kind, cluster.queue, cluster.min_jobs, cluster.max_jobs) == ("slurm", "debug", 3, 3)
    own = bench_cluster(PipelineBenchConfig(real=True, cluster={"kind": "slurm", "max_jobs": 5}))
    assert (own.min_jobs, own.max_jobs) == (0, 5)  # bounds the [cluster] section sets are kept


def test_the_job_settings_are_the_ones_arl_run_builds() -> None:
    pytest.importorskip("dask_jobqueue", reason="dask-jobqueue is not installed (pip install 'arl[dask]')")
    from arl_flows.flows import _batch_job_runner

    cluster = bench_cluster(PipelineBenchConfig(real=True, cluster={"kind": "slurm", "queue": "debug", "memory": "3GB"}))
    runner = _batch_job_runner(cluster)
    assert runner.resolved_cluster_class.__name__ == "SLURMCluster"
    assert {k: runner.cluster_kwargs[k] for k in ("queue", "memory", "cores", "processes")} == {
        "queue": "debug", "memory": "3GB", "cores": 1, "processes": 1}
    assert runner.adapt_kwargs == {"minimum": 2, "maximum": 2}


@pytest.mark.parametrize(
    ("args", "toml", "expected"),
    [
        (["--cluster", "lsf"], None, "--cluster lsf: use one of local, dask, slurm, pbs"),
        (["--cluster", "slurm"], None, "bad benchmark setting: cluster: kind 'slurm' runs the real DFT tier; add --real"),
        (["--real"], TOML.replace('"3GB"', '"lots"'), "bench.toml: cluster.memory: 'lots' is not an amount of memory"),
        (["--real", "--cluster", "dask"], TOML, "bad benchmark setting: cluster: address: kind = 'dask' needs the scheduler's address"),
    ],
)
def test_a_bad_cluster_setting_is_one_line(tmp_path, args, toml, expected) -> None:
    if toml is not None:
        (tmp_path / "bench.toml").write_text(toml)
        args = [*args, "--config", str(tmp_path / "bench.toml")]
    result = CliRunner().invoke(app, ["bench", "pipeline", *args, "--workdir", str(tmp_path / "work")])
    assert result.exit_code != 0
    message = result.output + str(result.exception)  # the CLI entry point prints a UserError as one line
    assert expected in message and "\n" not in str(result.exception) and "Traceback" not in message, message


@pytest.mark.slow
@pytest.mark.slurm
def test_a_top_tier_call_runs_in_a_slurm_job_and_names_it(slurm_partition, monkeypatch) -> None:  # noqa: F811 - the fixture
    from pathlib import Path

    from benchmarks.pipeline import _DaskTier
    from verifiers import Candidate

    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))  # the job's worker imports this checkout
    cluster = bench_cluster(PipelineBenchConfig(
        real=True, dask_workers=1, cluster={"kind": "slurm", "queue": slurm_partition, "memory": "1GB", "walltime": "00:10:00"}))
    tier = _DaskTier(1, "pyscf-b3lyp", {"basis": "sto-3g", "threads": 1, "workers": 1}, cluster)
    try:
        (verdict,) = tier.verify([Candidate(key="molecules:C", suite="molecules", payload="C")])
        report = tier.describe()
    finally:
        tier.close()
    assert verdict.status.value == "ok" and verdict.job_id is not None and verdict.job_id.isdigit()
    assert report["kind"] == "slurm" and report["job_ids"] == [verdict.job_id]
    assert dict(tier.calls_by_job) == {verdict.job_id: 1}


def _real_base(space: str):
    from arl_flows.config import load_config
    from benchmarks.pipeline import base_run_overrides

    bench = PipelineBenchConfig(real=True, dask_workers=2)
    overrides = base_run_overrides(bench)
    if space != "qm9":
        overrides["options"] = dict(overrides.get("options") or {}) | {"space": space}
    return bench, load_config(overrides=overrides)


def test_outside_qm9_the_audit_is_the_top_tier_itself_and_reuses_the_runs_verdicts(monkeypatch) -> None:
    from arl_flows.ladder import build_ladder
    from benchmarks.learning import VerdictMemo
    from benchmarks.pipeline import _audit_verifier
    from storage.records import Status
    from verifiers import Candidate, Closable

    bench, base = _real_base("qm9")
    assert _audit_verifier(bench, base, "qm9").name == "reference-or-dft"  # QM9: the table's value where it has one
    bench, base = _real_base("druglike")
    audit, top = _audit_verifier(bench, base, "druglike"), build_ladder(base)[-1]
    try:
        # Same identity as the run's top tier (the space's rules; workers are not part of it), so a run's verdict
        # is a memo hit: the audit pays no DFT call for a molecule either mode already had the top tier score.
        assert (audit.name, audit.version, audit.params_hash) == (top.name, top.version, top.params_hash)
        assert audit.params.constraints.space == "druglike"
        candidate = Candidate(key="molecules:CCO", suite="molecules", payload="CCO")
        paid = top.verdict(candidate, Status.ok, value=5.5, cost_s=90.0)
        memo = VerdictMemo()
        memo.verdicts.setdefault(paid.cache_key, paid)
        monkeypatch.setattr(audit, "verify_batch", lambda _: pytest.fail("the audit paid again for a run's verdict"))
        (again,) = memo.get(audit, [candidate])
        assert again.value == 5.5
    finally:
        for verifier in (audit, top):
            if isinstance(verifier, Closable):
                verifier.close()
