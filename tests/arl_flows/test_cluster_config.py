"""``[cluster]``: where tier tasks run, and the batch job scripts it asks dask-jobqueue for (no scheduler needed)."""

from __future__ import annotations

import importlib

import pytest

from arl_flows.config import ClusterConfig, build_config


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"kind": "dask"}, "kind = 'dask' needs the scheduler's address"),
        ({"kind": "slurm", "address": "tcp://h:8786"}, "only kind = 'dask' connects to an address"),
        ({"kind": "slurm", "memory": "4"}, "write a number and a unit"),
        ({"kind": "slurm", "walltime": "2h"}, "write 'HH:MM:SS'"),
        ({"kind": "slurm", "walltime": "00:00:30"}, "under a minute"),
        ({"kind": "slurm", "min_jobs": 5, "max_jobs": 2}, "min_jobs (5) is above max_jobs (2)"),
        ({"kind": "slurm", "job_extra": ["#SBATCH --qos=short"]}, "without its '#SBATCH' / '#PBS' prefix"),
        ({"kind": "slurm", "max_jobs": 0}, "greater than or equal to 1"),
        ({"kind": "lsf"}, "'local', 'dask', 'slurm' or 'pbs'"),
        ({"kind": "slurm", "memory": "0GB"}, "a job needs some memory; give more than 0"),
        ({"kind": "pbs", "walltime": "1-00:00:00"}, "PBS takes 'HH:MM:SS' (hours may pass 24), not SLURM's days"),
        ({"kind": "dask", "address": "http://10.0.0.5:8787"}, "http:// is the dashboard's; the scheduler listens on tcp://HOST:8786"),
        ({"kind": "dask", "address": "foo"}, "'foo' names no scheduler port; give HOST:PORT"),  # passed the dry run
        ({"kind": "dask", "address": "tcp://10.0.0.5"}, "names no scheduler port"),
        ({"kind": "slurm", "partition": "debug"}, "cluster.partition: unknown field; ARL calls it 'queue'"),
        ({"kind": "slurm", "account": "chem"}, "ARL calls it 'job_extra'"),
        # newcomer pass: these passed as time limits
        ({"kind": "slurm", "walltime": "25:99:00"}, "minutes and seconds go up to 59"),
        ({"kind": "slurm", "walltime": "00:99:99"}, "minutes and seconds go up to 59"),
        ({"kind": "slurm", "walltime": "10:75"}, "minutes and seconds go up to 59"),
        ({"kind": "slurm", "walltime": "1-25:00:00"}, "with days, hours go up to 23"),
    ],
)
def test_a_bad_cluster_section_says_what_to_fix(section: dict[str, object], expected: str) -> None:
    with pytest.raises(ValueError, match="cluster") as exc:
        build_config({"cluster": section})
    assert expected in str(exc.value)


@pytest.mark.parametrize(
    ("walltime", "seconds"), [("01:00:00", 3600), ("45:00", 2700), ("1-02:03:04", 93784), ("00:01:00", 60)]
)
def test_walltime_formats(walltime: str, seconds: int) -> None:
    assert ClusterConfig(kind="slurm", walltime=walltime).walltime_s == seconds


@pytest.mark.parametrize("memory", ["2G", "2GB", "500MiB", "2 GB", "1.5T"])
def test_memory_as_sbatch_and_dask_write_it(memory: str) -> None:
    """`sbatch --mem=2G` and Dask's parse_bytes take a unit without its B; so does the config (newcomer pass)."""
    from dask.utils import parse_bytes

    assert parse_bytes(ClusterConfig(kind="slurm", memory=memory).memory) > 0


def test_a_cluster_beyond_this_machine_runs_on_dask_and_the_old_address_field_still_works() -> None:
    assert build_config({}).task_runner == "threads"
    assert build_config({"cluster": {"kind": "slurm"}}).task_runner == "dask"
    old = build_config({"task_runner": "dask", "dask_address": "tcp://h:8786"})
    assert (old.cluster.kind, old.cluster.address) == ("dask", "tcp://h:8786")
    assert build_config(old.model_dump(mode="json")).cluster == old.cluster  # a stored config reloads
    with pytest.raises(ValueError, match="give the scheduler.s address once"):
        build_config({"dask_address": "tcp://a:1", "cluster": {"kind": "dask", "address": "tcp://b:2"}})
    with pytest.raises(ValueError, match=r"dask_address \(--dask-address\): the config's \[cluster\] is kind 'slurm'"):
        build_config({"dask_address": "tcp://a:1", "cluster": {"kind": "slurm"}})
    assert build_config({"cluster": {"kind": "dask", "address": "10.0.0.5:8786"}}).cluster.address == "10.0.0.5:8786"  # tcp assumed
    with pytest.raises(ValueError, match="runs on Dask"):
        build_config({"task_runner": "ray", "cluster": {"kind": "pbs"}})
    with pytest.raises(ValueError, match="runs on Dask"):
        build_config({"task_runner": "threads", "cluster": {"kind": "slurm"}})


@pytest.mark.parametrize(("kind", "prefix"), [("slurm", "#SBATCH"), ("pbs", "#PBS")])
def test_batch_jobs_carry_the_sections_settings(kind: str, prefix: str) -> None:
    pytest.importorskip("dask_jobqueue", reason="dask-jobqueue is not installed (pip install 'arl[dask]')")
    from arl_flows.flows import _task_runner

    extra = ["--qos=short"] if kind == "slurm" else ["-l nodes=1:ppn=2"]
    config = build_config({"cluster": {
        "kind": kind, "queue": "chem", "cores": 2, "memory": "3GB", "walltime": "00:30:00",
        "min_jobs": 1, "max_jobs": 5, "job_extra": extra, "python": "/shared/arl/bin/python",
    }})
    runner = _task_runner(config)
    assert runner.adapt_kwargs == {"minimum": 1, "maximum": 5}
    module, _, name = runner.cluster_class.rpartition(".")
    cluster = getattr(importlib.import_module(module), name)(**runner.cluster_kwargs)
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    assert f"{prefix} {extra[0]}" in script and "00:30:00" in script and "chem" in script
    assert "/shared/arl/bin/python -m distributed.cli.dask_worker" in script
    assert "--nthreads 2" in script  # one task per core, one worker per job
    assert "--lifetime 1620s" in script  # retires 3 minutes (a tenth) before the walltime


def test_the_models_checks_only_check_and_loading_fills_in_what_one_field_implies() -> None:
    from arl_flows.config import RunConfig

    objective = {"terms": [{"property": "gap", "kind": "window", "low": 1.0, "high": 2.0}]}
    base = {"suite": "molecules", "tiers": [{"verifier": "rdkit-eht"}, {"verifier": "reference-table"}]}
    # The model's own validation leaves the data as given: it names a conflict, it never fills a field in.
    bare = RunConfig.model_validate(base | {"objective": objective, "task_runner": "dask", "cluster": {"kind": "slurm"}})
    assert bare.scheduler.reward is None and bare.task_runner == "dask"
    with pytest.raises(ValueError, match="runs on Dask"):
        RunConfig.model_validate(base | {"cluster": {"kind": "slurm"}})
    with pytest.raises(ValueError, match="give the scheduler.s address once"):
        RunConfig.model_validate(base | {"dask_address": "tcp://h:8786"})
    # Loading (build_config) resolves: [objective] is the scheduler's reward, the old address is the [cluster].
    loaded = build_config({"objective": objective, "dask_address": "tcp://h:8786"})
    assert loaded.scheduler.reward == loaded.objective
    assert (loaded.cluster.kind, loaded.cluster.address, loaded.task_runner) == ("dask", "tcp://h:8786", "dask")
