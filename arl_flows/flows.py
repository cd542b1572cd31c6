"""Prefect 3 flows: thin wrappers over :mod:`arl_flows.step` and :mod:`arl_flows.training`.

A training run calls :func:`arl_flows.step.run_step` with :class:`FlowHooks`
(or :func:`arl_flows.pipeline.run_pipeline` with :class:`FlowPipelineHooks`):
each stage becomes a Prefect task, each tier batch a task of its own, and
progress goes to artifacts, the run's log and the CLI's listener. Work is
batched: one task per (verifier, batch) per scheduling round, and one task
per stage of a step (rollout, GRPO, hindsight, checkpoint); never a task per
candidate. A stage task is handed its stage as a closure and runs in this
process (no cache policy, so nothing is hashed or serialized); tier tasks
take and return JSON records, so they can run on a Dask worker. The policy
and the step's tensors stay in this process inside a
:class:`~arl_flows.training.RunSession`.

Expensive verifiers get a global concurrency limit each (``arl-tier-NAME``),
and native ones run in the worker processes of ``verifiers.isolation`` so
that a timeout really stops them. With ``task_runner = "dask"`` the tier
tasks run on a Dask cluster (prefect-dask); verdicts come back to the flow,
which writes them to the ledger.
"""

from __future__ import annotations

import atexit
import contextvars
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, create_table_artifact, update_progress_artifact
from prefect.cache_policies import NO_CACHE
from prefect.concurrency.sync import concurrency
from prefect.exceptions import TerminationSignal
from pydantic import BaseModel, Field

from arl_flows.config import ClusterConfig, RunConfig, load_config, stored_fields
from arl_flows.pipeline import PipelineHooks, run_pipeline
from arl_flows.step import StageHooks, StepHooks, TierInterrupted, TierRunner, run_step, sample, verify_inline
from arl_flows.step import verify as verify_stage
from arl_flows.training import RunSession, StepSummary
from storage.ledger import Ledger
from storage.records import RunStatus, Tier, Verdict, tier_rank
from verifiers import Candidate, Verifier, registry

__all__ = [
    "FlowHooks",
    "FlowPipelineHooks",
    "LabSubmission",
    "grpo_update",
    "hindsight_distill",
    "lab_results",
    "pretrain_prior",
    "rollout",
    "set_progress_listener",
    "training_run",
    "verify",
]

_SESSIONS: dict[str, RunSession] = {}
_DRAIN_S = 60.0  # how long an interrupted run waits for the tier batch in flight
_LEASE_S = 60.0  # a concurrency slot's lease (Prefect's shortest); its holder renews it while it runs
_WAIT_REPORT_S = 10.0  # a batch waiting for a slot says so this often
_LISTENERS: list[Callable[[str, Any], None]] = []
_VERIFIERS: dict[tuple[str, str], Verifier] = {}
_VERIFIERS_LOCK = threading.Lock()


def set_progress_listener(listener: Callable[[str, Any], None] | None) -> None:
    """Receive ``(event, payload)`` progress events of flows run in this process (the CLI's progress bars)."""
    _LISTENERS.clear()
    if listener is not None:
        _LISTENERS.append(listener)


def _emit(event: str, payload: Any = None) -> None:
    for listener in _LISTENERS:
        listener(event, payload)


def _limit_name(verifier: str) -> str:
    return f"arl-tier-{verifier}"


def _verifier(name: str, params: dict[str, Any]) -> Verifier:
    """One instance per (name, params) per process, so worker pools are reused across tasks."""
    import json

    key = (name, json.dumps(params, sort_keys=True, default=str))
    with _VERIFIERS_LOCK:
        if key not in _VERIFIERS:
            _VERIFIERS[key] = registry.create(name, params)
        return _VERIFIERS[key]


# ---------------------------------------------------------------------- tasks
@task(name="run-tier", cache_policy=NO_CACHE, task_run_name="{verifier} x{count}")
def run_tier(verifier: str, params: dict[str, Any], candidates: list[dict[str, Any]], count: int, limit: str | None) -> list[dict[str, Any]]:
    """Run one verifier on one batch (in a thread, or on a Dask worker), holding a slot of ``limit`` if given."""
    batch = [Candidate.model_validate(c) for c in candidates]
    with ExitStack() as stack:
        if limit is not None:
            stack.enter_context(_slot(limit))
        verdicts = verify_inline(_verifier(verifier, params), batch)
    job = _job_id()
    return [v.model_dump(mode="json") | ({"job_id": job} if job and not v.job_id else {}) for v in verdicts]


def _job_id() -> str | None:
    """The batch job this process runs in (SLURM, PBS), else the Dask worker's name, else None (the run's own)."""
    for variable in ("SLURM_JOB_ID", "PBS_JOBID"):
        if os.environ.get(variable):
            return os.environ[variable]
    if "distributed" not in sys.modules:  # not imported: no Dask worker runs in this process (importing it: ~0.5 CPU-s)
        return None
    from distributed import get_worker

    try:
        return str(get_worker().name)
    except ValueError:  # not on a Dask worker
        return None


@contextmanager
def _slot(limit: str) -> Iterator[None]:
    """Hold a slot of the global concurrency limit ``limit``; while it waits, it says so every ``_WAIT_REPORT_S``.

    The slot is a lease that the holder renews: on a Prefect server of one's
    own, a holder that dies frees it after ``_LEASE_S``; the temporary server
    has no lease service, so :func:`_recover_stale_slots` frees what dead runs left.
    """
    from prefect.concurrency._asyncio import AcquireConcurrencySlotTimeoutError

    waited, acquired = 0.0, False
    while not acquired:
        try:
            with concurrency(limit, occupy=1, strict=False, lease_duration=_LEASE_S, timeout_seconds=_WAIT_REPORT_S):
                acquired = True
                if waited:
                    _emit("waiting", "")
                yield
        except AcquireConcurrencySlotTimeoutError:
            if acquired:
                raise
            waited += _WAIT_REPORT_S
            message = (
                f"waiting {waited:.0f} s for a slot of {limit} (all taken: another run holds it, or one that "
                f"ended without releasing it; `prefect gcl inspect {limit}` shows it)"
            )
            _emit("waiting", message)
            _logger().warning(message)


# One task per stage of a step, named for the stage; each runs the stage it is handed (in this process: the policy
# lives here). Task run names ("grpo-update-<id>") are what the crash benchmark waits for in the log.
@task(cache_policy=NO_CACHE)
def _stage_task(work: Callable[[], Any], step: int) -> Any:
    return work()


@task(name="pipeline-part", cache_policy=NO_CACHE, task_run_name="{name}")
def pipeline_part(work: Callable[[], None], name: str) -> None:
    """A long-lived part of the asynchronous pipeline (sampler, verification service), running as long as the run."""
    work()


_STAGE_TASKS = {
    stage: _stage_task.with_options(name=task_name)
    for stage, task_name in (("rollout", "rollout"), ("grpo", "grpo-update"), ("hindsight", "hindsight-distill"), ("checkpoint", "checkpoint"))
}
_EVAL_TASK = _stage_task.with_options(name="eval-set")  # the fixed evaluation set after the last step (arl_flows.eval_set)
_PIPELINE_ARTIFACT_EVERY_S = 10.0  # the live table is a new artifact version each time: not more often


class _FlowStages(StageHooks):
    """What both kinds of flow hooks share: each stage a Prefect task, each finished step logged and reported."""

    progress_artifact: Any = None

    def stage(self, step: int, name: str, work: Callable[[], Any]) -> Any:
        _emit("stage", {"step": step, "stage": name})
        task_ = _STAGE_TASKS.get(name)
        return work() if task_ is None else task_(work, step)

    def finished(self, session: RunSession, summary: StepSummary) -> None:
        logger = get_run_logger()
        run, step, metrics = session.run, summary.step, summary.metrics
        if metrics.get("tiers/unavailable"):
            down = ", ".join(metrics["tiers/unavailable"])
            logger.warning("step %d: verifier(s) %s failed every recent call; rewards fell back to the other tiers", step, down)
            create_markdown_artifact(
                f"**Step {step}**: `{down}` failed every recent call; the scheduler stepped over it and "
                "estimated rewards from the tiers that work. See the verdicts' feedback for the reason.",
                key=f"tier-health-{run.id[:12]}", description="Verifier tiers that were down",
            )
        if self.progress_artifact is not None:
            update_progress_artifact(self.progress_artifact, 100.0 * (step + 1) / session.config.steps)
        logger.info(
            "step %d: reward %.3f (max %.3f), validity %.2f, spend %s",
            step, summary.reward_mean, summary.reward_max, summary.validity,
            {k: round(v, 2) for k, v in summary.spend.items()},
        )
        _emit("step", summary)


class FlowHooks(_FlowStages, StepHooks):
    """A synchronous step inside a flow: stages and tier batches as Prefect tasks, progress to artifacts, logs and listeners.

    The verify stage itself stays in the flow: its tier batches are the tasks
    (one per verifier and batch, under each tier's global concurrency limit).
    """

    def __init__(self, session: RunSession, limits: set[str], progress: Any = None) -> None:
        self._run_tier = _tier_runner(session.config, session.ladder, limits)
        self.max_batch = _max_batch(session.config)
        self.progress_artifact = progress

    def run_tier(self, verifier: Verifier, batch: list[Candidate]) -> list[Verdict]:
        return self._run_tier(verifier, batch)


class FlowPipelineHooks(_FlowStages, PipelineHooks):
    """The asynchronous pipeline inside a flow.

    The sampler and the verification service are task runs of their own
    (``pipeline-part``, named for the part) that last as long as the run;
    expensive calls, and every call when tasks run on a Dask or Ray cluster,
    are ``run-tier`` tasks; a table artifact shows queue depths, calls in
    flight per tier and the policy version as they change.
    """

    def __init__(self, session: RunSession, limits: set[str], progress: Any = None) -> None:
        self._run_tier = _tier_runner(session.config, session.ladder, limits)
        self.progress_artifact = progress
        self._remote = session.config.task_runner != "threads"
        self._context = contextvars.copy_context()  # the flow's: a slot thread submits its task under a copy
        self._last_table = 0.0

    def part(self, name: str, work: Callable[[], None]) -> None:
        pipeline_part(work, name)

    def call_tier(self, session: RunSession, verifier: Verifier, candidate: Candidate) -> Verdict:
        if not self._remote and tier_rank(verifier.tier) < tier_rank(Tier.high_fidelity):
            return super().call_tier(session, verifier, candidate)  # milliseconds: a task run would cost more than the call
        (verdict,) = self._context.copy().run(self._run_tier, verifier, [candidate])
        return verdict

    def progress(self, session: RunSession, stats: dict[str, Any]) -> None:
        _emit("pipeline", stats)
        now = time.monotonic()
        if now - self._last_table < _PIPELINE_ARTIFACT_EVERY_S and not stats.get("final"):
            return
        self._last_table = now
        rows = [
            {"verifier": name, "in flight": stats["in_flight"][name], "calls": stats["calls"][name],
             "utilisation": round(stats["utilisation"][name], 3)}
            for name in stats["in_flight"]
        ]
        rows.append({"verifier": "(pipeline)", "in flight": stats["groups_out"], "calls": stats["steps_done"],
                     "utilisation": None})
        create_table_artifact(
            rows, key=f"pipeline-{session.run.id[:12]}",
            description=(
                f"Pipeline of run {session.run.id}: policy version {stats['policy_version']}, "
                f"{stats['steps_done']} steps learned, {stats['sampled_waiting']} batches waiting for the service, "
                f"{stats['settled_waiting']} settled groups waiting for the learner, {stats['open_batches']} batches "
                f"in verification, {stats['late_queue']} late verdicts queued, learner idle {stats['learner_idle_s']} s"
            ),
        )


def _tier_runner(config: RunConfig, ladder: list[Verifier], limits: set[str]) -> TierRunner:
    """A tier runner that sends each batch to a ``run-tier`` task (under its tier's global limit, if in ``limits``)."""
    # The ladder's own params (the suite's verifier_params applied: the run's chemistry space), not the config's raw
    # ones: a task builds its verifier from them, and its verdicts must carry the ladder's params hash.
    params = {t.verifier: v.params.model_dump(mode="json") for v, t in zip(ladder, config.tiers)}
    names = {v.name: t.verifier for v, t in zip(ladder, config.tiers)}
    # One submission at a time: the pipeline's slot threads submit at once, and a Dask task runner starts its
    # cluster on the first submission without a lock (each racing thread would start a LocalCluster of its own).
    submitting = threading.Lock()

    def run(verifier: Verifier, batch: list[Candidate]) -> list[Verdict]:
        name = verifier.name
        with submitting:
            future = run_tier.submit(
                names[name], params[names[name]], [c.model_dump(mode="json") for c in batch], len(batch),
                _limit_name(name) if name in limits else None,
            )
        try:
            return [Verdict.model_validate(v) for v in future.result()]
        except (KeyboardInterrupt, TerminationSignal) as stop:
            # Let the batch in flight finish (its CPU is spent either way) so its verdicts are kept.
            try:
                finished = future.result(timeout=_DRAIN_S)
            except BaseException:  # noqa: BLE001 - nothing to keep; stop as asked
                raise stop from None
            raise TierInterrupted([Verdict.model_validate(v) for v in finished], stop) from None

    return run


def _setup_limits(config: RunConfig) -> set[str]:
    """Create (or update) the global concurrency limit of each expensive verifier."""
    from prefect import get_client

    limited = set()
    with get_client(sync_client=True) as client:
        _recover_stale_slots(client)
        for name, limit in config.tier_concurrency.items():
            client.upsert_global_concurrency_limit_by_name(_limit_name(name), limit)
            limited.add(name)
    return limited


def _recover_stale_slots(client: Any) -> None:
    """On the temporary Prefect server, free the ``arl-tier-*`` slots of runs that are no longer alive.

    The temporary server keeps its database under ``PREFECT_HOME`` but its
    leases in memory and runs no lease service, so a slot whose holder died
    (SIGKILL, a power cut, a server that died first) stays taken for good.
    Each ``arl`` process on it registers its pid under
    ``PREFECT_HOME/arl-runs``; when no other registered process is alive,
    every slot still taken is stale and is reset to 0. A server of one's own
    (``PREFECT_API_URL``) expires dead holders' leases by itself.
    """
    from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate
    from prefect.settings import get_current_settings

    current = get_current_settings()
    if current.api.url:
        return
    folder = Path(current.home) / "arl-runs"
    folder.mkdir(parents=True, exist_ok=True)
    mine = folder / str(os.getpid())
    if not mine.exists():
        mine.write_text(socket.gethostname())
        atexit.register(mine.unlink, missing_ok=True)
    others = [p for p in folder.iterdir() if p.name.isdigit() and p != mine and _alive(int(p.name))]
    for entry in folder.iterdir():
        if entry.name.isdigit() and entry != mine and entry not in others:
            entry.unlink(missing_ok=True)
    if others:
        return
    offset = 0
    while page := client.read_global_concurrency_limits(limit=100, offset=offset):
        for limit in page:
            if limit.name.startswith("arl-tier-") and limit.active_slots:
                client.update_global_concurrency_limit(limit.name, GlobalConcurrencyLimitUpdate(active_slots=0))
                _logger().warning(
                    "freed %d slot(s) of %s left taken by a run that is no longer alive", limit.active_slots, limit.name
                )
        offset += len(page)


def _logger() -> Any:
    """The run's logger inside a flow or task, else this module's."""
    try:
        return get_run_logger()
    except Exception:  # noqa: BLE001 - no run context (a Dask worker, a direct call)
        import logging

        return logging.getLogger(__name__)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _task_runner(config: RunConfig):  # noqa: ANN202 - Prefect task runner instance
    if config.task_runner == "dask":
        from prefect_dask import DaskTaskRunner

        cluster = config.cluster
        if cluster.kind == "dask":
            return DaskTaskRunner(address=cluster.address)
        if cluster.kind in ("slurm", "pbs"):
            return _batch_job_runner(cluster)
        return DaskTaskRunner(cluster_kwargs={"n_workers": 2, "threads_per_worker": 1, "processes": True})
    if config.task_runner == "ray":
        try:
            from prefect_ray import RayTaskRunner
        except ImportError:
            raise RuntimeError("task_runner 'ray' needs prefect-ray: pip install 'arl[ray]'") from None
        return RayTaskRunner()
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=4)


def _batch_job_runner(cluster: ClusterConfig):  # noqa: ANN202 - a DaskTaskRunner
    """Dask workers started as SLURM or PBS jobs by dask-jobqueue, one worker per job, scaled with the work.

    A worker retires a little before its job's walltime (``--lifetime``), so Dask moves its tasks to a
    fresh job instead of losing them; a worker that dies anyway (a job killed, a node lost) has its task
    run again on another worker (Dask's rule: a task is retried until 3 workers died running it). The
    verdicts come back to the flow, which stores them with their spend in one transaction, so a call
    whose worker died is never charged and one that finished is never run again.
    """
    try:
        import dask_jobqueue  # noqa: F401 - only to say how to install it
    except ImportError:
        raise RuntimeError(f"[cluster] kind = {cluster.kind!r} needs dask-jobqueue: pip install 'arl[dask]'") from None
    from prefect_dask import DaskTaskRunner

    from storage.settings import settings

    margin = min(300, cluster.walltime_s // 10)
    kwargs: dict[str, Any] = {
        "cores": cluster.cores, "processes": 1, "memory": cluster.memory, "walltime": cluster.walltime,
        "queue": cluster.queue, "job_extra_directives": list(cluster.job_extra), "python": cluster.node_python,
        "worker_extra_args": ["--lifetime", f"{cluster.walltime_s - margin}s", "--lifetime-stagger", f"{margin // 2}s"],
        "name": "arl-tier", "job_name": "arl-tier",
        "log_directory": str(settings().home / "cluster-logs"),  # the jobs' output, not the working directory
    }
    return DaskTaskRunner(
        cluster_class=f"dask_jobqueue.{'SLURMCluster' if cluster.kind == 'slurm' else 'PBSCluster'}",
        cluster_kwargs=kwargs, adapt_kwargs={"minimum": cluster.min_jobs, "maximum": cluster.max_jobs},
    )


# ---------------------------------------------------------------------- training_run
def _training_loop(
    config_dict: dict[str, Any] | None,
    config_path: str | None,
    profile: str,
    resume: str | None,
    database_url: str | None,
    run_id: str | None,
) -> dict[str, Any]:
    logger = get_run_logger()
    config = load_config(config_path, profile, overrides=config_dict)
    ledger = Ledger(database_url)
    session = RunSession.open(config, ledger, resume=resume, run_id=run_id, on_pretrain=lambda d: _emit("pretrain", d))
    run = session.run
    status = RunStatus.failed
    try:  # from here on, any stop marks the run (interrupted or failed)
        _SESSIONS[run.id] = session
        _emit("run", {"run_id": run.id, "name": run.name, "steps": config.steps, "start": session.start_step})
        logger.info("run %s (%s): steps %d..%d", run.id, run.name, session.start_step, config.steps - 1)
        progress = create_progress_artifact(
            100.0 * session.start_step / config.steps, key=f"progress-{run.id[:12]}", description=f"ARL run {run.name} ({run.id})"
        )
        limits = _setup_limits(config)
        if config.pipeline == "async":
            report = run_pipeline(session, FlowPipelineHooks(session, limits, progress))
            logger.info("pipeline: %s", report.as_dict())
        else:
            hooks = FlowHooks(session, limits, progress)
            for step in range(session.start_step, config.steps):
                run_step(session, step, hooks)
        status = RunStatus.completed
    except (KeyboardInterrupt, TerminationSignal):
        # Inside a flow Prefect turns SIGTERM into TerminationSignal (and re-sends the signal
        # to the CLI's handler afterwards); both mean a clean stop, not a failure.
        status = RunStatus.interrupted
        raise
    except Exception as exc:
        # A Ctrl-C that lands while Prefect is still creating a task run surfaces as Prefect's
        # own error ("Task run is not set") raised while handling it: still a clean stop.
        if not _raised_by_a_stop(exc):
            raise
        status = RunStatus.interrupted
        raise KeyboardInterrupt(f"interrupted while Prefect was starting a task ({type(exc).__name__})") from exc
    finally:
        session.finish(status)
        _SESSIONS.pop(run.id, None)
        _emit("finished", {"run_id": run.id, "status": status.value})
    evaluation: dict[str, Any] = {}
    if config.eval.samples:
        from arl_flows.eval_set import evaluate, summary_line

        _emit("eval", {"run_id": run.id, "samples": config.eval.samples})
        result = _EVAL_TASK(lambda: evaluate(ledger, run.id), config.steps - 1)
        logger.info("%s", summary_line(result))
        create_markdown_artifact(summary_line(result), key=f"eval-{run.id[:12]}",
                                 description=f"Fixed evaluation set of run {run.id}: first policy against the last checkpoint")
        evaluation = {"eval": result.model_dump(mode="json")}
    _publish_artifacts(ledger, run.id)
    return ledger.run_summary(run.id) | evaluation


def _raised_by_a_stop(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while a KeyboardInterrupt or TerminationSignal was being handled."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, (KeyboardInterrupt, TerminationSignal)):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _max_batch(config: RunConfig) -> int:
    """Batch size per tier task: enough candidates to amortise the task, few enough to persist often."""
    return max(4, 2 * config.trainer.group_size)


def _publish_artifacts(ledger: Ledger, run_id: str) -> None:
    from arl_flows.report import build_report, tier_disagreements

    key = run_id[:12]
    top = ledger.top_candidates(run_id, n=10)
    rows = []
    for c in top:
        row = {"answer": c["answer"], "reward": round(c["reward"], 4), "std": round(c["std"], 4)}
        row |= {k: (round(v, 3) if isinstance(v, float) else v) for k, v in c["values"].items()}
        rows.append(row)
    create_table_artifact(rows, key=f"best-candidates-{key}", description=f"Best candidates of run {run_id}, value per tier")
    _per_step, flagged = tier_disagreements(ledger, run_id, [s.step for s in ledger.training_steps(run_id)])
    if flagged:
        create_table_artifact(
            flagged, key=f"tier-disagreements-{key}", description=f"Candidates of run {run_id} whose tiers disagree"
        )
    report = build_report(ledger, run_id, embed_images=True)
    create_markdown_artifact(report.markdown, key=f"report-{key}", description=f"ARL report of run {run_id}")


@flow(name="training_run", log_prints=True)
def training_run(
    config: dict[str, Any] | None = None,
    config_path: str | None = None,
    profile: str = "default",
    resume: str | None = None,
    database_url: str | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """rollout -> verify -> persist -> GRPO -> hindsight -> checkpoint, for N steps; resumable.

    ``config`` holds TOML-shaped overrides (e.g. ``{"steps": 3}``); ``config_path``
    a TOML file; ``resume`` a run id to continue from its last completed step.
    """
    return _training_loop(config, config_path, profile, resume, database_url, run_id)


def run_training(config_dict: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    """Run ``training_run`` with the task runner the config asks for."""
    config = load_config(kwargs.get("config_path"), kwargs.get("profile", "default"), overrides=config_dict)
    flow_ = training_run.with_options(task_runner=_task_runner(config), flow_run_name=config.name)
    return flow_(config=config_dict, **kwargs)


# ---------------------------------------------------------------------- the single-stage flows
def _session(run_id: str, config_path: str | None, profile: str, database_url: str | None) -> RunSession:
    """The in-process session of a run, or the run re-opened at its last checkpoint."""
    if run_id in _SESSIONS:
        return _SESSIONS[run_id]
    ledger = Ledger(database_url)
    run = ledger.get_run(run_id)
    stored = stored_fields(run.config)
    config = load_config(config_path, profile, overrides=None if config_path else stored)
    session = RunSession.open(config, ledger, resume=run.id)
    _SESSIONS[run.id] = session
    return session


@flow(name="pretrain_prior")
def pretrain_prior(config_path: str | None = None, profile: str = "default") -> dict[str, Any]:
    """Load the suite's starting policy, training it first if the suite ships none for this config; report it."""
    from arl_flows.suites import suite_for

    config = load_config(config_path, profile)
    report = suite_for(config).prepare_policy()
    create_table_artifact([report], key="prior-report", description=f"starting policy of the {config.suite} suite")
    return report


@flow(name="rollout")
def rollout(run_id: str, step: int, config_path: str | None = None, profile: str = "default", database_url: str | None = None) -> list[str]:
    """Sample G trajectories per prompt for one step of a run; returns trajectory ids."""
    session = _session(run_id, config_path, profile, database_url)
    session.prepare_step(step)
    sample(session, step, FlowHooks(session, set()))
    return [t.id for t in session.steps[step].trajectories]


@flow(name="verify")
def verify(run_id: str, step: int, config_path: str | None = None, profile: str = "default", database_url: str | None = None) -> dict[str, Any]:
    """Route one step's candidates through the tiers under the budget (the scheduler); returns spend and calls."""
    session = _session(run_id, config_path, profile, database_url)
    session.restore_step(step)
    result = verify_stage(session, step, FlowHooks(session, _setup_limits(session.config)))
    return {"spend": result.spend, "calls": result.calls, "rounds": result.rounds, "lab_requests": len(result.lab_requests)}


@flow(name="grpo_update")
def grpo_update(run_id: str, step: int, config_path: str | None = None, profile: str = "default", database_url: str | None = None) -> dict[str, float]:
    """One GRPO update from a verified step's reward estimates."""
    session = _session(run_id, config_path, profile, database_url)
    session.restore_step(step)
    return FlowHooks(session, set()).stage(step, "grpo", lambda: session.grpo(step))


@flow(name="hindsight_distill")
def hindsight_distill(run_id: str, step: int, config_path: str | None = None, profile: str = "default", database_url: str | None = None) -> dict[str, float]:
    """Relabel a step's failed trajectories with what they achieved and distill them into the policy."""
    session = _session(run_id, config_path, profile, database_url)
    session.restore_step(step)
    return FlowHooks(session, set()).stage(step, "hindsight", lambda: session.hindsight(step))


# ---------------------------------------------------------------------- lab results
class LabSubmission(BaseModel):
    """One external measurement for a pending lab request (the Prefect UI renders this as a form)."""

    request_id: str = Field(description="Id of the pending request (see `arl lab list`).")
    value: float = Field(description="The measured value, e.g. the HOMO-LUMO gap in eV.")
    notes: str = Field(default="", description="Free text: instrument, conditions, who measured.")


@flow(name="lab_results")
def lab_results(submission: LabSubmission, database_url: str | None = None) -> dict[str, Any]:
    """Record an external lab result: the pending verdict becomes ``ok`` and later steps use it."""
    if not math.isfinite(submission.value):
        raise ValueError(f"value must be a finite number, got {submission.value}")
    ledger = Ledger(database_url)
    verdict = ledger.submit_lab_result(submission.request_id, submission.value, submission.notes)
    get_run_logger().info("lab request %s: %s = %s", submission.request_id, verdict.candidate_key, verdict.value)
    return verdict.model_dump(mode="json")
