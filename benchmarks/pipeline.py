"""Streaming pipeline: the synchronous step against the asynchronous pipeline at equal budget (``arl bench pipeline``).

Both modes train the suite's shipped SMILES prior from the same seed with the
same trainer, ladder and scheduler settings, and stop once the same
CPU-second verification budget is committed (or at the same step cap):

- ``sync``: :func:`arl_flows.step.run_step` in a loop: sample, verify in
  rounds, learn; the policy waits while the top tier works;
- ``async``: :class:`arl_flows.pipeline.Pipeline`: sampler, verification
  service and learner side by side (``pipeline = "async"``).

The top tier is, by default, the ``simulated-cluster`` verifier: it models a
*remote* DFT queue or lab (each call answers from the QM9 table after
``latency_s`` wall seconds on one of ``slots`` parallel slots, uses no CPU
here, and is charged ``cost_per_call``). With ``real = True`` it is a real
PySCF B3LYP calculation (``pyscf-b3lyp``, in the space's basis: 6-31G in qm9, 6-31G* in druglike) sent to a local Dask cluster
(``distributed.LocalCluster``) through the pipeline's ``call_tier`` hook and
the step's ``run_tier`` hook alike. With ``cluster.kind = "slurm"`` (or ``"pbs"``, or
``"dask"`` and an address) those calls go instead to Dask workers started as batch jobs by the
product's own builder (:func:`arl_flows.flows._batch_job_runner`, the ``[cluster]`` path of
``arl run``); the report's ``cluster`` key says which cluster ran them and, for batch jobs, which
job ran how many calls.

The metric is ``arl bench learning``'s top-10 AUC, computed by its code
(:class:`benchmarks.learning.RegimeRun` ranks, :func:`benchmarks.learning.top_k_auc`
integrates): whenever a mode's spend crosses one of ``audit_points`` marks
(and after its first step, and at the end) the ``top_k`` molecules it ranks
best by its own estimates are recorded, and scored by the top tier's truth
*after* the run (the QM9 table; in the real setting ``reference-or-dft`` in QM9
and the top tier itself in another space, whose verdicts from the runs are
reused), so that auditing costs no wall time in either mode. Also per mode: wall-clock
seconds, GRPO steps, utilisation of each tier's workers (busy slot-seconds
over slots x wall time), the learner's idle share (sync: the share of wall
time spent in the verify stage; async: waiting for settled groups) and the
staleness histogram of the trajectories learned.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from arl_flows.config import ClusterConfig, RunConfig, load_config
from arl_flows.pipeline import Pipeline, PipelineHooks
from arl_flows.step import StepHooks, run_step
from arl_flows.training import RunSession, StepState, StepSummary
from benchmarks.learning import (
    LearningBenchConfig,
    RegimeRun,
    VerdictMemo,
    _held_out,
    _prune_checkpoints,
    _regime_metrics,
    _thread_setup,
    _top_value,
    top_k_auc,
    write_json,
)
from benchmarks.molecule_pool import is_novel_key, space_of
from storage.records import RewardEstimate, Status, Trajectory, Verdict
from storage.settings import settings
from verifiers import Candidate, Closable, Verifier, registry
from verifiers.scheduler import window_score

__all__ = ["MODES", "PipelineBenchConfig", "pipeline_benchmark", "summary_table", "write_json"]

MODES = ("sync", "async")


class PipelineBenchConfig(BaseModel):
    """Settings of ``arl bench pipeline``; the training settings come from ``run_overrides``."""

    model_config = ConfigDict(extra="forbid")

    budget: float = Field(default=900.0, gt=0, description="CPU-seconds of verification each mode may spend.")
    budget_per_step: float = Field(default=240.0, gt=0, description="CPU-seconds one step (one sampled batch) may spend.")
    seed: int = Field(default=0, description="Seed of both modes (prompts, sampling, scheduler).")
    max_steps: int = Field(default=60, ge=1, description="Step cap of both modes (they normally stop on the budget).")
    modes: list[str] = Field(default_factory=lambda: list(MODES), min_length=1, description="Modes to run, in order.")
    real: bool = Field(
        default=False,
        description="Top tier: real PySCF B3LYP (the space's basis) on a local Dask cluster instead of the simulated remote cluster.",
    )
    latency_s: float = Field(default=10.0, gt=0, description="Simulated cluster: wall seconds per call.")
    slots: int = Field(default=16, ge=1, description="Simulated cluster: calls it runs at once.")
    cost_per_call: float = Field(default=15.0, gt=0, description="Simulated cluster: CPU-seconds charged per call.")
    dask_workers: int = Field(
        default=2, ge=1,
        description="Real setting: Dask worker processes (one thread each); with a batch-job cluster, the jobs "
        "(min_jobs = max_jobs) unless its [cluster] section sets min_jobs or max_jobs.",
    )
    cluster: ClusterConfig = Field(
        default_factory=ClusterConfig,
        description="Real setting: where the DFT calls run. kind 'local': a LocalCluster on this machine; 'slurm' / "
        "'pbs': Dask workers started as batch jobs, built as `arl run`'s [cluster] builds them; 'dask': the "
        "scheduler at `address`.",
    )
    top_k: int = Field(default=10, ge=1, description="Molecules audited at each audit point.")
    audit_points: int = Field(default=12, ge=1, description="Audits at evenly spaced spend marks over the budget (+ the end).")
    history: int = Field(
        default=200, ge=0,
        description="Held-out QM9 molecules with the fast and top tiers' values given to both modes' surrogates "
        "(simulated setting only: the real top tier's scale is raw B3LYP/6-31G, not the table's).",
    )
    history_seed: int = Field(default=12345, description="Seed of the held-out draw.")
    streaming: dict[str, Any] = Field(default_factory=dict, description="[streaming] settings of the async mode.")
    run_overrides: dict[str, Any] = Field(
        default_factory=dict, description="RunConfig overrides shared by both modes (trainer, rollout, scheduler, ...)."
    )

    @model_validator(mode="after")
    def _cluster_needs_the_real_tier(self) -> PipelineBenchConfig:
        if self.cluster.kind != "local" and not self.real:
            raise ValueError(f"cluster: kind {self.cluster.kind!r} runs the real DFT tier; add --real (or use kind 'local')")
        return self


def base_run_overrides(bench: PipelineBenchConfig) -> dict[str, Any]:
    """The run config both modes share: the shipped prior, the fast tier under the chosen top tier, the budget."""
    if bench.real:
        top = {"verifier": "pyscf-b3lyp", "params": {"threads": 1, "workers": 1}}  # basis: the space's (the suite's)
    else:
        top = {"verifier": "simulated-cluster",
               "params": {"latency_s": bench.latency_s, "slots": bench.slots, "cost_per_call": bench.cost_per_call}}
    return {
        "name": "bench-pipeline",
        "seed": bench.seed,
        "steps": bench.max_steps,
        "tiers": [{"verifier": "rdkit-eht"}, top],
        "tier_concurrency": {},
        "scheduler": {"budget_per_run": bench.budget, "budget_per_step": bench.budget_per_step, "seed": bench.seed},
    }


def mode_config(base: RunConfig, mode: str, bench: PipelineBenchConfig) -> RunConfig:
    """The run config of one mode: only ``pipeline`` (and the async mode's top-tier slots) differ."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    streaming = base.streaming
    if bench.real and base.tiers[-1].verifier not in streaming.slots:
        streaming = streaming.model_copy(update={"slots": streaming.slots | {base.tiers[-1].verifier: bench.dask_workers}})
    return base.model_copy(update={"name": f"{base.name}-{mode}-s{bench.seed}", "pipeline": mode, "streaming": streaming})


# ---------------------------------------------------------------------------------------------- the real top tier


def _dask_verify(name: str, params: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """One verifier call on a Dask worker; the verifier (and its worker process) is kept per worker.

    The verdict names the batch job (or Dask worker) that computed it, as ``arl run``'s tier tasks do.
    """
    from arl_flows.flows import _job_id

    key = (name, repr(sorted(params.items())))
    cache = _dask_verify.__dict__.setdefault("verifiers", {})
    if key not in cache:
        cache[key] = registry.create(name, params)
    (verdict,) = cache[key].verify_batch([Candidate.model_validate(candidate)])
    job = _job_id()
    return verdict.model_dump(mode="json") | ({"job_id": job} if job and not verdict.job_id else {})


def batch_job_cluster(cluster: ClusterConfig) -> Any:
    """Dask workers as batch jobs, started exactly as ``arl run`` starts them for ``[cluster] kind``.

    The cluster class, its job settings and the adaptive bounds come from the product's
    :func:`arl_flows.flows._batch_job_runner`; this only starts what it describes, outside Prefect.
    """
    from arl_flows.flows import _batch_job_runner

    runner = _batch_job_runner(cluster)
    jobs = runner.resolved_cluster_class(**runner.cluster_kwargs)
    jobs.adapt(**runner.adapt_kwargs)
    return jobs


def bench_cluster(bench: PipelineBenchConfig) -> ClusterConfig:
    """The cluster settings of the real top tier: ``--dask-workers`` jobs unless ``[cluster]`` bounds them itself."""
    cluster = bench.cluster
    if cluster.kind in ("slurm", "pbs") and not {"min_jobs", "max_jobs"} & cluster.model_fields_set:
        cluster = ClusterConfig.model_validate(
            cluster.model_dump(exclude_unset=True) | {"min_jobs": bench.dask_workers, "max_jobs": bench.dask_workers}
        )
    return cluster


class _DaskTier:
    """Top-tier calls sent one candidate each to a Dask cluster; slot-seconds measured per call.

    ``cluster.kind`` 'local': a LocalCluster of ``workers`` processes here; 'slurm' / 'pbs': ``workers`` Dask
    workers started as batch jobs (:func:`batch_job_cluster`); 'dask': the scheduler at ``cluster.address``.
    """

    def __init__(self, workers: int, name: str, params: dict[str, Any], cluster: ClusterConfig | None = None) -> None:
        from distributed import Client, LocalCluster

        self.kind = cluster.kind if cluster is not None else "local"
        running = workers  # workers to wait for before the first mode starts
        if self.kind in ("slurm", "pbs"):
            self.cluster = batch_job_cluster(cluster)
            self.client = Client(self.cluster)
            workers, running = cluster.max_jobs, cluster.min_jobs  # the busy share's slots: the most jobs at once
        elif self.kind == "dask":
            self.cluster, self.client = None, Client(cluster.address)
            workers = sum(w.get("nthreads", 1) for w in self.client.scheduler_info()["workers"].values()) or workers
            running = 0
        else:
            self.cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
            self.client = Client(self.cluster)
        if running:
            self.client.wait_for_workers(running, timeout=600)  # a batch job may queue: time the modes from running workers
        root = str(Path(__file__).resolve().parents[1])
        self.client.run(lambda: sys.path.insert(0, root) if root not in sys.path else None)  # benchmarks importable
        self.workers, self.name, self.params = workers, name, params
        self.busy_s = 0.0
        self.calls_by_job: Counter[str] = Counter()  # this mode's calls per batch job (else Dask worker); reset per mode
        self.job_ids: set[str] = set()  # every batch job that ran a call
        self._lock = threading.Lock()

    def verify(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        futures = [self.client.submit(_dask_verify, self.name, self.params, c.model_dump(mode="json"), pure=False)
                   for c in candidates]
        verdicts = [Verdict.model_validate(f.result()) for f in futures]
        with self._lock:
            self.busy_s += sum(v.wall_s or 0.0 for v in verdicts)
            self.calls_by_job.update(v.job_id for v in verdicts if v.job_id)
            if self.kind in ("slurm", "pbs"):
                self.job_ids.update(v.job_id for v in verdicts if v.job_id)
        return verdicts

    def describe(self) -> dict[str, Any]:
        """Which cluster ran the calls: its kind, its workers (one per batch job) and the jobs that ran calls."""
        started = sorted(str(j.job_id) for j in getattr(self.cluster, "workers", {}).values() if getattr(j, "job_id", None))
        return {"kind": self.kind, "workers": self.workers, "job_ids": sorted(self.job_ids | set(started))}

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


# ---------------------------------------------------------------------------------------------- recording


class _Recorder:
    """What one mode sampled and how it ranks it; its own top-k at each spend mark (audited after the run)."""

    def __init__(self, mode: str, session: RunSession, bench: PipelineBenchConfig) -> None:
        self.session, self.bench = session, bench
        self.out = RegimeRun(mode, bench.seed)
        self.top = session.ladder[-1]
        cfg = session.config.scheduler
        self.low, self.high, self.softness = cfg.target_low, cfg.target_high, cfg.window_softness
        self.marks = [bench.budget * (i + 1) / bench.audit_points for i in range(bench.audit_points)]
        self.snapshots: list[tuple[float, float, list[str]]] = []  # (spend, wall seconds since start, own top-k)
        self.t0 = time.monotonic()
        self.candidates: dict[str, Candidate] = {}
        self.top_verdicts: list[Verdict] = []  # the mode's own top-tier verdicts, read once it has stopped
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watch = threading.Thread(target=self._watch_spend, name="bench-audit-marks", daemon=True)

    def spent(self) -> float:
        return float(sum(self.session.ledger.spend_by_tier(self.session.run.id).values()))

    def sampled(self, candidates: Sequence[Candidate]) -> None:
        with self._lock:
            for c in candidates:
                self.candidates.setdefault(c.key, c)
                self.out.samples += 1
                if c.valid:
                    self.out.valid += 1
                    self.out.valid_keys.add(c.key)

    def estimated(self, trajectories: Sequence[Trajectory], estimates: Sequence[RewardEstimate]) -> None:
        by_traj = {e.trajectory_id: e for e in estimates}
        with self._lock:
            for t in trajectories:
                e = by_traj.get(t.id)
                if e is not None and t.candidate_key in self.out.valid_keys and t.candidate_key not in self.out.truth:
                    self.out.estimates[t.candidate_key] = (float(e.mean), float(e.std))

    def snapshot(self, force: bool = False) -> None:
        """Record the mode's own top-k if the spend crossed a mark (or ``force``)."""
        spent = self.spent()
        with self._lock:
            due = force
            while self.marks and spent >= self.marks[0] - 1e-9:
                self.marks.pop(0)
                due = True
            if not due:
                return
            self._learn_truth()
            self.snapshots.append((spent, time.monotonic() - self.t0, self.out.ranked(self.bench.top_k)))

    def _learn_truth(self) -> None:
        """A top-tier answer is exact knowledge of the mode: its reward is known at once (as in ``arl bench learning``)."""
        keys = [k for k in self.out.valid_keys if k not in self.out.truth]
        for v in self.session.ledger.verdicts_for(keys, verifiers=[self.top.name]):
            value = _top_value(v)
            if v.status == Status.pending:
                continue
            self.out.truth[v.candidate_key] = value
            score = float(window_score(value, self.low, self.high, self.softness)) if value is not None else 0.0
            self.out.estimates[v.candidate_key] = (score, 0.0)

    def start(self) -> None:
        self.t0 = time.monotonic()
        self._watch.start()

    def stop(self) -> None:
        self._stop.set()
        self._watch.join(timeout=10)
        self.snapshot(force=True)

    def _watch_spend(self) -> None:
        while not self._stop.wait(0.5):
            self.snapshot()

    def cheapest_top(self, candidates: Sequence[Candidate]) -> float:
        valid = [c for c in candidates if c.valid]
        return min((self.top.expected_cost(c) for c in valid), default=0.0)


class _SyncDriver(StepHooks):
    """The synchronous step in a loop until the budget is spent; times the verify stage and the tiers."""

    def __init__(self, rec: _Recorder, session: RunSession, dask: _DaskTier | None) -> None:
        self.rec, self.session, self.dask = rec, session, dask
        self.verify_s = 0.0
        self.tier_s: Counter[str] = Counter()
        self.steps = 0
        self.learned = 0  # trajectories GRPO took (all on-policy: staleness 0)

    def run_tier(self, verifier: Verifier, batch: list[Candidate]) -> list[Verdict]:
        t0 = time.monotonic()
        if self.dask is not None and verifier.name == self.dask.name:
            verdicts = self.dask.verify(batch)
        else:
            verdicts = super().run_tier(verifier, batch)
        self.tier_s[verifier.name] += time.monotonic() - t0
        return verdicts

    def stage(self, step: int, name: str, work: Callable[[], Any]) -> Any:
        t0 = time.monotonic()
        try:
            return work()
        finally:
            if name == "verify":
                self.verify_s += time.monotonic() - t0

    def sampled(self, session: RunSession, step: int, state: StepState) -> None:
        self.rec.sampled(state.candidates)

    def verified(self, session: RunSession, step: int, state: StepState) -> None:
        self.rec.estimated(state.trajectories, state.estimates)

    def finished(self, session: RunSession, summary: StepSummary) -> None:
        _prune_checkpoints(session, summary.step)
        self.steps = summary.step + 1
        self.learned += len(session.steps[summary.step].trajectories)
        if summary.step == 0:
            self.rec.snapshot(force=True)

    def run(self) -> None:
        s, budget = self.session, self.rec.bench.budget
        for step in range(s.config.steps):
            if s.scheduler.run_spent >= budget - 1e-6:
                break
            run_step(s, step, self)
            if budget - s.scheduler.run_spent < self.rec.cheapest_top(s.steps[step].candidates):
                break  # the rest cannot pay for one more top-tier call


class _AsyncDriver(PipelineHooks):
    """The pipeline until the budget is committed: then the sampler stops and what is out is learned."""

    def __init__(self, rec: _Recorder, session: RunSession, dask: _DaskTier | None) -> None:
        self.rec, self.session, self.dask = rec, session, dask
        self.pipeline = Pipeline(session, self)
        self.last_candidates: list[Candidate] = []

    def call_tier(self, session: RunSession, verifier: Verifier, candidate: Candidate) -> Verdict:
        if self.dask is not None and verifier.name == self.dask.name:
            (verdict,) = self.dask.verify([candidate])
            return verdict
        return super().call_tier(session, verifier, candidate)

    def stage(self, step: int, name: str, work: Callable[[], Any]) -> Any:
        out = work()
        if name == "rollout":
            self.rec.sampled(out.candidates)
            self.last_candidates = list(out.candidates)
        return out

    def finished(self, session: RunSession, summary: StepSummary) -> None:
        _prune_checkpoints(session, summary.step)
        state = session.steps[summary.step]
        self.rec.estimated(state.trajectories, state.estimates)
        if summary.step == self.session.start_step:
            self.rec.snapshot(force=True)
        # Committed: paid, plus the top-tier calls in flight at their expected price.
        cheapest = self.rec.cheapest_top(self.last_candidates) or self.rec.cheapest_top(state.candidates)
        in_flight = self.pipeline.service.stats()["in_flight"].get(self.rec.top.name, 0)
        if self.rec.bench.budget - self.rec.spent() - in_flight * cheapest < max(cheapest, 1e-9):
            self.pipeline.stop_sampling()  # the budget is committed: the pipeline would otherwise sample to its step cap

    def run(self) -> Any:
        return self.pipeline.run()


# ---------------------------------------------------------------------------------------------- the benchmark


def _audit_verifier(bench: PipelineBenchConfig, base: RunConfig, space: str) -> Verifier:
    """The truth the snapshots are scored with: the top tier's own values at no latency, or real DFT.

    Real DFT in QM9 is ``reference-or-dft`` (the table's value where it has one). In another space the table
    holds none of the molecules and that tier's correction was fitted on QM9 ones, so the truth is the top tier
    itself, whose verdicts from the runs are then reused instead of paid again. Either way with the suite's
    params for the run's space (its validity rules and DFT limits), as the ladder builds its tiers.
    """
    from arl_flows.suites import suite_for

    if not bench.real:
        return registry.create("simulated-cluster", dict(base.tiers[-1].params) | {"latency_s": 0.0})
    name, params = ("reference-or-dft", {"threads": 1}) if space == "qm9" else (base.tiers[-1].verifier, dict(base.tiers[-1].params))
    params |= {"workers": bench.dask_workers}  # the cluster is closed by then; workers do not change a verdict
    return registry.create(name, suite_for(base).verifier_params(registry.get(name), params))


def _score(keys: list[str], values: dict[str, float | None], k: int, low: float, high: float, softness: float) -> float:
    scores = [float(window_score(values[x], low, high, softness)) if values.get(x) is not None else 0.0 for x in keys]
    return float(sum(scores)) / k  # empty slots (fewer than k valid molecules so far) score 0


def _run_mode(
    mode: str, base: RunConfig, bench: PipelineBenchConfig, workdir: Path, held_out: list, dask: _DaskTier | None,
) -> tuple[_Recorder, dict[str, Any]]:
    from storage.ledger import Ledger

    config = mode_config(base, mode, bench)
    db = workdir / f"{mode}-s{bench.seed}.db"
    db.unlink(missing_ok=True)
    ledger = Ledger(f"sqlite:///{db}")
    session = RunSession.open(config, ledger)
    top = session.ladder[-1]
    try:
        if held_out:
            session.scheduler.add_history(session.scheduler.observation(c, vals) for c, vals in held_out)
        rec = _Recorder(mode, session, bench)
        rec.start()
        t0 = time.monotonic()
        if mode == "sync":
            sync = _SyncDriver(rec, session, dask)
            sync.run()
            wall = time.monotonic() - t0
            steps = sync.steps
            idle = sync.verify_s
            staleness = {"0": sync.learned}
            utilisation = {v.name: sync.tier_s[v.name] / wall for v in session.ladder[:-1]}
            pipeline_report: dict[str, Any] | None = None
        else:
            driver = _AsyncDriver(rec, session, dask)
            report = driver.run()
            wall = time.monotonic() - t0
            steps, idle = report.steps, report.learner_idle_s
            staleness = {str(k): v for k, v in sorted(report.staleness.items())}
            utilisation = dict(report.utilisation)
            pipeline_report = report.as_dict()
        rec.stop()
        rec.top_verdicts = [v for v in ledger.verdicts_for(list(rec.candidates), verifiers=[top.name]) if v.status != Status.pending]
        # The top tier's busy slot-seconds as the top tier itself measured them (both modes alike).
        if dask is not None:
            top_busy, top_slots = dask.busy_s, dask.workers
        else:
            top_busy, top_slots = float(getattr(top, "busy_slot_s", 0.0)), int(getattr(top.params, "slots", 1))
        top_util = top_busy / (top_slots * wall) if wall > 0 else 0.0
        if mode == "sync":
            utilisation[top.name] = top_util
        row = {
            "wall_s": round(wall, 1),
            "steps": steps,
            "learner_idle_s": round(idle, 1),
            "learner_idle_share": idle / wall if wall > 0 else 0.0,
            "utilisation": utilisation,
            "top_tier_utilisation": top_util,
            "top_tier_busy_slot_s": round(top_busy, 1),
            "top_tier_slots": top_slots,
            "staleness": staleness,
            "spend_by_tier": ledger.spend_by_tier(session.run.id),
            "top_tier_calls_by_job": dict(sorted(dask.calls_by_job.items())) if dask is not None else {},
            "pipeline": pipeline_report,
        }
    finally:
        session.finish()
        ledger.close()
        if dask is not None:
            dask.busy_s = 0.0
            dask.calls_by_job.clear()
        if isinstance(top, Closable):
            top.close()
    shutil.rmtree(settings().run_dir(session.run.id), ignore_errors=True)
    return rec, row


def pipeline_benchmark(
    bench: PipelineBenchConfig, *, workdir: Path, cache: Path | None = None, progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run each mode once at the same budget, seed and prior; return the JSON report (``sync``, ``async``, ``ratios``)."""
    from arl_flows.ladder import build_ladder

    _thread_setup()
    for m in bench.modes:
        if m not in MODES:
            raise ValueError(f"unknown mode {m!r}; use one of {', '.join(MODES)}")
    overrides = base_run_overrides(bench)
    for key, value in bench.run_overrides.items():
        overrides[key] = overrides[key] | value if isinstance(value, dict) and isinstance(overrides.get(key), dict) else value
    overrides["streaming"] = bench.streaming
    base = load_config(overrides=overrides)
    workdir.mkdir(parents=True, exist_ok=True)
    memo = VerdictMemo(cache)
    space = space_of(overrides)
    audit_top = _audit_verifier(bench, base, space)
    sched = base.scheduler
    low, high, softness = sched.target_low, sched.target_high, sched.window_softness
    held_out: list = []
    if bench.history and not bench.real:
        fast = build_ladder(base)[0]
        progress(f"held-out split: {bench.history} QM9 molecules through {fast.name} and the table")
        held_out = _held_out(audit_top, [fast, audit_top], memo, bench.history, bench.history_seed)
    dask = None
    if bench.real:
        # The ladder's params (the suite's verifier_params applied: the run's chemistry space), not the config's raw
        # ones, as arl run's tier tasks get them: the workers' verdicts must match what the step asked for.
        ladder = build_ladder(base)
        top_tier, top_params = base.tiers[-1], ladder[-1].params.model_dump(mode="json")
        for verifier in ladder:
            if isinstance(verifier, Closable):
                verifier.close()
        cluster = bench_cluster(bench)
        if cluster.kind == "local":
            progress(f"starting a local Dask cluster: {bench.dask_workers} worker processes, one thread each")
        else:
            progress(f"starting the top tier's Dask workers on {cluster.kind} ({cluster.min_jobs}-{cluster.max_jobs} jobs)")
        dask = _DaskTier(bench.dask_workers, top_tier.verifier, top_params, cluster)
    t0 = time.perf_counter()
    recorders: dict[str, _Recorder] = {}
    rows: dict[str, dict[str, Any]] = {}
    try:
        for mode in bench.modes:
            progress(f"{mode}: budget {bench.budget:g} CPU-s")
            recorders[mode], rows[mode] = _run_mode(mode, base, bench, workdir, held_out, dask)
            progress(f"{mode}: {rows[mode]['steps']} steps in {rows[mode]['wall_s']:.0f} s")
    finally:
        if dask is not None:
            cluster_report = dask.describe()
            dask.close()
    # What the runs measured, before the audit: an audit stopped part way (B3LYP at drug size is minutes a molecule)
    # leaves the wall times, utilisation, spend and staleness here, and what it paid in the verdict cache.
    unaudited = workdir / f"pipeline-modes-s{bench.seed}.json"
    write_json({"settings": bench.model_dump(mode="json"), "audited": False} | rows, unaudited)
    progress(f"the modes' measurements before the audit: {unaudited}")
    # Audit every recorded top-k with the truth, after the runs (no wall time of either mode).
    learning = LearningBenchConfig(budget=bench.budget, top_k=bench.top_k, audit_points=bench.audit_points)
    report: dict[str, Any] = {}
    for mode, rec in recorders.items():
        keys = sorted({k for _, _, ks in rec.snapshots for k in ks})
        for v in rec.top_verdicts:  # what the mode paid the audit tier for already (same identity) is not paid again
            memo.verdicts.setdefault(v.cache_key, v.model_copy(update={"id": None}))
        progress(f"{mode}: auditing {len(keys)} molecules with {audit_top.name}")
        values = {v.candidate_key: _top_value(v) for v in memo.get(audit_top, [rec.candidates[k] for k in keys])}
        for k in keys:
            rec.out.truth.setdefault(k, values.get(k))
        scores = [_score(ks, values, bench.top_k, low, high, softness) for _, _, ks in rec.snapshots]
        rec.out.curve = [(0.0, 0.0)] + [(s, y) for (s, _, _), y in zip(rec.snapshots, scores, strict=True)]
        rec.out.steps = rows[mode]["steps"]
        rec.out.spend = rows[mode]["spend_by_tier"]
        rec.out.seconds = rows[mode]["wall_s"]
        # The pipeline audits only its snapshots' top-k (no novel-k audits): novelty is marked on what was audited,
        # and the learning benchmark's novel curve, which it does not draw, is left out of its report.
        rec.out.novel_keys = {k for k in rec.out.truth if is_novel_key(k, space)}
        metrics = _regime_metrics(rec.out, learning, low, high, softness)
        for key in ("hit_keys", "novel_topk_auc", "final_novel_topk", "novel_curve", "audit_spend",
                    "novel_hits_per_cpu_hour_with_audits"):
            metrics.pop(key, None)
        report[mode] = rows[mode] | metrics | {
            "top10_auc": top_k_auc(rec.out.curve, bench.budget),
            "curve_wall": [[round(t, 1), round(y, 4)] for (_, t, _), y in zip(rec.snapshots, scores, strict=True)],
        }
    memo.close()
    report["settings"] = bench.model_dump(mode="json") | {"run_overrides": overrides}
    report["top_tier"] = base.tiers[-1].model_dump(mode="json")
    report["audit_tier"] = audit_top.name
    report["cluster"] = cluster_report if dask is not None else None
    report["held_out"] = len(held_out)
    report["wall_s"] = round(time.perf_counter() - t0, 1)
    report["ratios"] = _ratios(report)
    return report


def _ratios(report: dict[str, Any]) -> dict[str, float | None]:
    if "sync" not in report or "async" not in report:
        return {"async/sync wall": None, "async/sync top10_auc": None}
    s, a = report["sync"], report["async"]
    # Time to quality: wall seconds until the audited top-10 first reaches 90% of sync's final one.
    target = 0.9 * s["final_top10"]
    reach = {m: next((t for t, y in report[m]["curve_wall"] if y >= target - 1e-9), None) for m in ("sync", "async")}
    return {
        "async/sync time to 90% of sync's final top10": reach["async"] / reach["sync"] if reach["sync"] and reach["async"] is not None else None,
        "sync time to 90% of its final top10 (s)": reach["sync"],
        "async time to 90% of sync's final top10 (s)": reach["async"],
        "async/sync wall": a["wall_s"] / s["wall_s"] if s["wall_s"] else None,
        "async/sync top10_auc": a["top10_auc"] / s["top10_auc"] if s["top10_auc"] else None,
        "async/sync steps": a["steps"] / s["steps"] if s["steps"] else None,
        "async/sync spend": a["total_spend"] / s["total_spend"] if s["total_spend"] else None,
    }


def summary_table(report: dict[str, Any]) -> list[list[str]]:
    """Rows of the printed table: header first."""
    rows = [["mode", "wall (s)", "top10 AUC", "final top10", "hits", "novel hits", "steps", "spend (CPU-s)", "top-tier busy",
             "learner idle", "staleness"]]
    for mode in MODES:
        r = report.get(mode)
        if r is None:
            continue
        rows.append([
            mode, f"{r['wall_s']:.0f}", f"{r['top10_auc']:.3f}", f"{r['final_top10']:.3f}", str(r["hits"]), str(r.get("novel_hits", "-")), str(r["steps"]),
            f"{r['total_spend']:.0f}", f"{r['top_tier_utilisation']:.0%}", f"{r['learner_idle_share']:.0%}",
            ", ".join(f"{k}:{v}" for k, v in r["staleness"].items()),
        ])
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m benchmarks.pipeline``: the same command as ``arl bench pipeline``."""
    import typer

    import arl_flows.cli.entry  # noqa: F401 - the whole CLI first: it registers the suites' commands
    from benchmarks.cli import bench_pipeline

    app = typer.Typer(add_completion=False)
    app.command()(bench_pipeline)
    app(args=list(argv) if argv is not None else None, prog_name="python -m benchmarks.pipeline")


if __name__ == "__main__":
    main()
