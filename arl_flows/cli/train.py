"""``arl run`` and ``arl report``: the training loop, its progress display and its report (``arl lab``: ``lab.py``;
``arl ui`` and ``arl deploy``: ``ui.py``)."""

from __future__ import annotations

import math
import signal
import time
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from arl_flows.cli._common import LEDGER_URL_HELP, UserError, app, console, cost_text, err_console, open_ledger, persistent_ledger, shown
from arl_flows.cli._prefect import quiet_prefect
from storage.settings import settings

# Command bodies import what they run (the ledger, the flows, Prefect, the suites' heavy parts) when they
# run, so that `arl --help` loads none of it.

URL_OPTION = typer.Option(None, "--url", help=LEDGER_URL_HELP)


def _sigterm_as_interrupt() -> None:
    def handler(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


class _ProgressView:
    """Rich progress: step bar, last reward, spend per tier, budget left."""

    def __init__(self, total_budget: float) -> None:
        self.progress = Progress(
            # Descriptions and infos carry names from the ledger and plugins (run ids, verifier names): no markup.
            TextColumn("{task.description}", style="bold", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[info]}", markup=False), console=console,
        )
        self.task = self.progress.add_task("starting", total=1, info="")
        self.total_budget = total_budget
        self.rows: list[Any] = []
        self.run_id = ""
        self.stage = ""

    def __call__(self, event: str, payload: Any) -> None:
        if event == "pretrain":
            self.progress.update(self.task, description="pretraining the suite's prior (cached afterwards)", info=str(payload))
        elif event == "run":
            from arl_flows import prefect_env
            self.run_id = payload["run_id"]
            prefect_env.log_to_run(settings().run_dir(self.run_id))
            self.progress.update(self.task, description=f"run {payload['run_id'][:12]}", total=payload["steps"], completed=payload["start"], info="")
        elif event == "stage":
            self.stage = f"step {payload['step']}: {payload['stage']}"
            self.progress.update(self.task, info=self.stage)
        elif event == "waiting":
            self.progress.update(self.task, info=f"{self.stage}: {payload}" if payload else self.stage)
        elif event == "pipeline":
            flight = ", ".join(f"{name} {n}" for name, n in payload["in_flight"].items() if n)
            self.progress.update(
                self.task,
                info=f"policy v{payload['policy_version']} | in flight: {flight or 'none'} | settled waiting "
                f"{payload['settled_waiting']} | learner idle {payload['learner_idle_s']:.0f}s",
            )
        elif event == "eval":
            self.progress.update(self.task, info=f"scoring the fixed evaluation set ({payload['samples']} samples a side, "
                                 "first policy and last checkpoint)")
            if not self.progress.console.is_terminal:
                self.progress.console.print("scoring the fixed evaluation set ([eval])", markup=False)
        elif event == "step":
            self.rows.append(payload)
            spend = ", ".join(f"{t} {c:.1f}s" for t, c in payload.spend.items()) or "none (all cached)"  # ladder order
            left = "∞" if math.isinf(payload.budget_left) else f"{payload.budget_left:.0f}s"
            info = f"reward {payload.reward_mean:.3f} (max {payload.reward_max:.3f}) | valid {payload.validity:.0%} | spend {spend} | budget left {left}"
            self.progress.update(self.task, advance=1, info=info)
            if not self.progress.console.is_terminal:
                # A bar redraws in place only on a terminal: to a file or pipe, each step is a line of its own.
                total = self.progress.tasks[0].total if self.progress.tasks else None
                of = f" ({payload.step + 1} of {int(total)})" if total else ""  # numbered from 0, as every table
                self.progress.console.print(f"step {payload.step}{of} done in {payload.seconds:.0f} s: {info}", markup=False)


def _summary_table(summary: dict[str, Any], rows: list[Any]) -> Table:
    table = Table(title=f"run {summary['id']} ({shown(summary['name'], 200)}): {summary['status']}")
    for col in ("step", "reward mean", "reward max", "validity", "calls", "seconds"):
        table.add_column(col)
    for r in rows:
        calls = ", ".join(f"{k} {v}" for k, v in r.calls.items() if v)
        seconds = f"{r.seconds:.1f}" if math.isfinite(r.seconds) else "(before the resume)"
        table.add_row(str(r.step), f"{r.reward_mean:.3f}", f"{r.reward_max:.3f}", f"{r.validity:.0%}", calls, seconds)
    return table


def _earlier_steps(ledger: Any, run_id: str, rows: list[Any]) -> list[Any]:
    """The steps a run completed before this process resumed it, from the ledger (calls and seconds not kept there)."""
    from arl_flows.training import StepSummary

    def metric(metrics: dict[str, Any], name: str) -> float:
        value = metrics.get(name)
        return float(value) if isinstance(value, (int, float)) else math.nan

    first = min((r.step for r in rows), default=None)
    return [StepSummary(step=r.step, reward_mean=metric(r.metrics, "reward/mean"), reward_max=metric(r.metrics, "reward/max"),
                        validity=metric(r.metrics, "reward/validity"), metrics=dict(r.metrics), seconds=math.nan)
            for r in ledger.training_steps(run_id) if first is None or r.step < first]


def _reward_trend(rows: list[Any], per_step: int) -> str:
    """How the reward moved, and whether the move is larger than sampling noise.

    The first step's mean is set against the mean of the last third of the
    steps. Each step mean is over ``per_step`` samples; the noise is two
    standard errors of the difference, from the steps' own reward spread. A
    move inside it is reported as such: a few steps of a few dozen samples
    check that the loop runs and cannot show learning.
    """
    finite = [r for r in rows if math.isfinite(r.reward_mean)]
    if len(finite) < 2:
        return ""
    first, tail = finite[0], finite[-max(1, len(finite) // 3):]
    last = sum(r.reward_mean for r in tail) / len(tail)
    n = max(per_step, 1)

    def var(r: Any) -> float:
        std = r.metrics.get("reward/std") if isinstance(r.metrics, dict) else None
        return float(std) ** 2 / n if isinstance(std, (int, float)) and math.isfinite(std) else math.nan

    noise = 2.0 * math.sqrt(var(first) + sum(var(r) for r in tail) / len(tail) ** 2)
    span = f"step {tail[0].step}" if len(tail) == 1 else f"steps {tail[0].step}-{tail[-1].step}"
    diff = last - first.reward_mean
    line = f"reward mean {first.reward_mean:.3f} at step {first.step} -> {last:.3f} over {span} ({diff:+.3f})"
    if not math.isfinite(noise):
        return line
    if abs(diff) <= noise:
        return (f"{line}: within sampling noise (±{noise:.3f}, two standard errors of {n} samples a step). "
                f"{len(rows)} steps show that the loop runs end to end; they are too few to show learning "
                "(docs/benchmarks.md, \"First run\").")
    return f"{line}: the mean {'rose' if diff > 0 else 'fell'} by more than sampling noise (±{noise:.3f}, two standard errors)."


def _verified_lines(ledger: Any, run_id: str) -> list[str]:
    """What the top tier verified, before (step 0) and after, and which steps ran on estimates only."""
    from arl_flows.report import hits_line, run_hits, top_verifier, verified_by_step

    per_step = verified_by_step(ledger, run_id)
    if not per_step:
        return []
    top = shown(top_verifier(ledger.get_run(run_id).config) or "the top tier")

    def best(rows: list[dict[str, Any]]) -> str:
        found = [r["best"] for r in rows if r["best"]]
        if not found:
            return "none verified"
        b = max(found, key=lambda x: x["reward"])
        return f"{shown(b['answer'], 80)} (value {b['value']:.3g}, reward {b['reward']:.3f})"

    total = sum(r["verified"] for r in per_step)
    lines = [f"{top} verified {total} candidates; best at step {per_step[0]['step']}: {best(per_step[:1])}"]
    if len(per_step) > 1:
        lines[0] += f"; best after it: {best(per_step[1:])}"
    lines.append(hits_line(run_hits(ledger, run_id)))
    for row in per_step:
        if row["verified"] == 0 and row["failed"]:  # the calls were made and failed: not the budget's doing
            lines.append(f"step {row['step']}: {row['failed']} {top} call(s) failed ({shown(row['failure'] or 'no reason given', 120)}); "
                         "its rewards are the surrogate's estimates")
    unverified = [r["step"] for r in per_step if r["verified"] == 0 and not r["failed"]]
    if unverified:
        steps = ", ".join(str(s) for s in unverified)
        lines.append(f"step(s) {steps}: no {top} answer; their rewards are the surrogate's estimates (the budget was spent or "
                     "the scheduler judged no answer worth its cost)")
    return lines


def _spend_line(summary: dict[str, Any]) -> str:
    """Spend per verifier that ran, with its tier, in ladder order (a tier alone does not say what answered)."""
    rows = summary.get("spend_by_verifier") or []
    return ", ".join(f"{shown(r['verifier'])} ({shown(r['tier'])}) {r['cost_s']:.1f} CPU-s" for r in rows)


def _flat_reward_note(rows: list[Any]) -> str:
    """One line naming the steps whose rewards were all equal (max = mean): GRPO has no advantage to learn from."""
    flat = [r for r in rows if math.isfinite(r.reward_mean) and math.isclose(r.reward_max, r.reward_mean, abs_tol=1e-9)]
    if not flat:
        return ""
    steps = ", ".join(str(r.step) for r in flat)
    values = sorted({f"{r.reward_mean:.3f}" for r in flat})
    return (f"warning: every reward was equal within step{'s' if len(flat) > 1 else ''} {steps} (reward "
            f"{' / '.join(values)}), so those steps taught the policy nothing; check the objective with "
            "`arl config show --config FILE`")


def _check_ladder_and_policy(cfg: Any, source: str, new: bool = True) -> list[tuple[str, str, Any]]:
    """Fail before Prefect starts when a tier or the policy path cannot work (one line naming ``source``, exit 2).

    Returns each tier's verifier name, tier and cost model, cheapest first; the verifiers are built and closed,
    never called.
    """
    from arl_flows.ladder import build_ladder, check_new_config
    from verifiers import Closable, VerifierNotFound

    if cfg.policy_path and not (Path(cfg.policy_path) / "config.json").is_file():
        hint = ""
        beside = Path(source).parent / cfg.policy_path  # newcomer pass: a relative path is read from where arl runs
        if not Path(cfg.policy_path).is_absolute() and Path(source).is_file() and (beside / "config.json").is_file():
            hint = (f"; a relative path is read from the current directory ({Path.cwd()}), and the config's own folder "
                    f"has one: write policy_path = {str(beside.resolve())!r}, or run from {str(Path(source).parent)!r}")
        raise UserError(f"{source}: policy_path {cfg.policy_path!r} is not a local transformers model directory "
                        f"(no config.json){hint}")
    try:
        if new:  # a stored config resumes as it ran
            check_new_config(cfg)
        ladder = build_ladder(cfg)
    except (VerifierNotFound, ImportError, TypeError, ValueError) as exc:
        message = " ".join(str(exc).split())
        raise UserError(f"{source}: {message if message.startswith(('tiers', 'tier_concurrency', 'objective')) else 'tiers: ' + message}") from None
    tiers = [(verifier.name, verifier.tier.value, verifier.costs) for verifier in ladder]
    for verifier in ladder:
        if isinstance(verifier, Closable):
            verifier.close()
    return tiers



def _check_home(home: Path) -> None:
    """A dry run promises checkpoints and logs under ``home``: it must be, or be able to become, a folder."""
    existing = next((p for p in (home, *home.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        what = "is a file" if existing == home else f"is under {existing}, a file"
        raise UserError(f"ARL_HOME {home} {what}, not a folder; point ARL_HOME at a folder (it holds the ledger, priors and runs)")


def _budget_text(seconds: float) -> str:
    return "no cap" if math.isinf(seconds) else f"{seconds:g} CPU-s"


def _objective_text(cfg: Any) -> str:
    """The reward a run optimises, in words: the [objective]'s terms, or the window on the top tier's value."""
    objective = cfg.objective or cfg.scheduler.reward  # one and the same when both are given (RunConfig checks it)
    if objective is not None:
        return f"[objective], {objective.mean} mean of " + ", ".join(f"{t.kind} {t.property}" for t in objective.terms)
    sched = cfg.scheduler
    return (f"the top tier's value in the window {sched.target_low:g} to {sched.target_high:g}"
            + (f" (softness {sched.window_softness:g})" if sched.window_softness else ""))


def _prompts_text(cfg: Any, source: str) -> str:
    """Where the run's prompts come from, as the suite says (having checked what its options point at), and the
    [options] the config sets."""
    from arl_flows.suites import get_suite

    suite = get_suite(cfg.suite)
    try:
        checked = suite(cfg).check()
    except ValueError as exc:
        raise UserError(f"{source}: {' '.join(str(exc).split())[:400]}") from None
    text = suite.prompts_source(cfg.suite_options) + (f" ({checked})" if checked else "")
    given = ", ".join(f"{k} = {v!r}" for k, v in sorted((cfg.options or {}).items()))
    return text + (f"; [options] {given}" if given else "")


# What a resumed run may change from its stored config: how long it runs and where its work runs, not what it learns.
_RESUME_MAY_CHANGE = frozenset({"name", "steps", "task_runner", "pipeline", "dask_address", "cluster", "device"})


# (the field a config error names, the override that set it, its flag)
_FLAGS = (("name", "name", "--name"), ("steps", "steps", "--steps"), ("task_runner", "task_runner", "--task-runner"),
          ("pipeline", "pipeline", "--pipeline"), ("cluster.address", "dask_address", "--dask-address"),
          ("dask_address", "dask_address", "--dask-address"))


def _named_by_flag(message: str, flags: dict[str, Any]) -> str:
    """A config error about a value a flag gave (``flags``: the flags given, by field) names the flag
    (``--task-runner``), not the config it came into."""
    for field, key, flag in _FLAGS:
        if key in flags and f": {field}: " in message:
            return f"{flag} {str(flags[key])[:60]!r}: " + message.split(f": {field}: ", 1)[1]
    return message


def _refuse_a_changed_config(cfg: Any, stored: dict[str, Any], source: str, run_id: str) -> None:
    """A resumed run continues as it ran: a --config that changes its ladder, budget or policy is one line.

    The stored config is read by this ARL first, so that a field added since the run started (its default filled
    in) is not taken for a change."""
    from arl_flows.config import ConfigError, load_config, stored_fields

    try:
        old_cfg = load_config(None, "default", overrides=stored_fields(stored))
    except ConfigError:
        return  # a stored config this ARL no longer reads: the run itself says so when it resumes

    def effective(config: Any) -> dict[str, Any]:  # [options] as the suite reads them: written out or left to defaults
        return config.model_dump(mode="json") | {"options": config.suite_options.model_dump(mode="json")}

    old, new = effective(old_cfg), effective(cfg)
    changed = sorted(k for k in new if k not in _RESUME_MAY_CHANGE and k in old and new[k] != old[k])
    if "options" in changed:  # name the option, not the whole section
        changed.remove("options")
        changed += sorted(f"options.{k}" for k in new["options"] if new["options"][k] != old["options"].get(k))
    if changed:
        raise UserError(f"--resume {run_id[:12]} with --config {source}: it changes {', '.join(changed[:6])} from the run's "
                        "stored config, which would mix two runs' rewards in one; resume without --config (the run "
                        "continues as it ran) or start a new run with this config")


def _device_problem(device: str) -> str | None:
    """Why this machine's torch cannot put the policy on ``device`` (the config checked its form); None: it can."""
    kind = device.split(":")[0]
    if kind == "cpu":
        return None
    import torch

    backend = {"cuda": torch.cuda, "mps": getattr(torch.backends, "mps", None), "xpu": getattr(torch, "xpu", None)}[kind]
    if backend is None or not backend.is_available():
        return f"device {device!r}: this machine's torch has no {kind} device; set device = 'cpu'"
    index = int(device.split(":")[1]) if ":" in device else 0
    if kind == "cuda" and index >= torch.cuda.device_count():
        return f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s) (cuda:0 ...)"
    return None


def _dask_scheduler_problem(cfg: Any, timeout_s: float = 10.0) -> str | None:
    """Why the Dask scheduler of a [cluster] kind = 'dask' (--dask-address) cannot be reached, or None.

    Checked before the run is created: otherwise the first step samples, then waits Dask's 30 s and the run is
    marked failed, with a timeout that does not say where to look.
    """
    import socket
    from urllib.parse import urlsplit

    if cfg.cluster.kind != "dask" or not cfg.cluster.address:
        return None
    address = cfg.cluster.address
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme not in ("tcp", "tls") or not parts.hostname or parts.port is None:
        return None  # other transports (ucx, inproc, ws): Dask's own client reports them
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout_s):
            return None
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__).lower()
        return (f"no Dask scheduler answers at {shown(address, 200)} ({why}); start one there (`dask scheduler --port "
                f"{parts.port}`) or run without --dask-address / [cluster] kind = 'dask'; nothing was started")


def _cluster_tools_problem(cfg: Any) -> str | None:
    """What keeps a batch-job [cluster] from starting here: dask-jobqueue, or the scheduler's submit command.

    A run stops on it in one line before anything starts; a dry run notes it (a config may be checked on a laptop
    and run on the login node).
    """
    import importlib.util
    import shutil

    if cfg.task_runner == "ray" and importlib.util.find_spec("prefect_ray") is None:
        return "task_runner 'ray' needs prefect-ray: pip install 'arl[ray]'"
    device = _device_problem(cfg.device)
    if device:
        return device
    kind = cfg.cluster.kind
    if kind not in ("slurm", "pbs"):
        return None
    if importlib.util.find_spec("dask_jobqueue") is None:
        return f"[cluster] kind = {kind!r} needs dask-jobqueue: pip install 'arl[dask]'"
    submit = "sbatch" if kind == "slurm" else "qsub"
    if shutil.which(submit) is None:
        return (f"[cluster] kind = {kind!r} submits jobs with {submit}, which is not on this machine's PATH; run "
                "`arl run` where you submit jobs (a login node)")
    return None


def _cluster_lines(cfg: Any, tiers: list[tuple[str, str, Any]], problem: str | None) -> list[str]:
    """The [cluster]'s jobs in one line, and what would keep them from being used (warnings, not errors)."""
    c = cfg.cluster
    if c.kind == "local":
        return []
    if c.kind == "dask":
        lines = [f"cluster: the Dask scheduler at {c.address}"]
        capacity = None
    else:
        lines = [f"cluster: {c.kind} jobs of {c.cores} core(s), {c.memory}, walltime {c.walltime}, "
                 f"{c.min_jobs} to {c.max_jobs} at once" + (f", queue {c.queue!r}" if c.queue else ", the default queue")
                 + (f"; extra directives {' '.join(c.job_extra)}" if c.job_extra else "")]
        capacity = c.max_jobs * c.cores
    for name, _, _ in tiers:
        limit = cfg.tier_concurrency.get(name)
        if limit is not None and capacity is not None and limit < capacity:
            lines.append(f"  note: tier_concurrency {name} = {limit} lets {limit} call(s) run at once, of the "
                         f"{capacity} the jobs can take; raise it to {capacity} to use them all")
    from prefect.settings import get_current_settings

    api = str(get_current_settings().api.url or "")
    if not api or "127.0.0.1" in api or "localhost" in api:
        lines.append(f"  note: {'the Prefect API is ' + api if api else 'no PREFECT_API_URL: the run starts a temporary Prefect server'} "
                     "on this machine's loopback address, which workers on other nodes cannot reach; give them a "
                     "server they can (README, 'Run on a cluster')")
    if problem:  # what _cluster_tools_problem found
        lines.append(f"  note: {problem}")
    return lines


def _print_dry_run(cfg: Any, tiers: list[tuple[str, str, Any]], ledger_url: str, source: str, profile: str,
                   resume: str | None, cluster_problem: str | None) -> None:
    """What `arl run` would do with this config, in lines; nothing is started, downloaded, trained or verified."""
    from sqlalchemy.engine import make_url

    from arl_flows.config import pipeline_reason
    from arl_flows.ladder import unchecked_objective_properties
    from storage.ledger import check_database_url

    home = settings().home
    _check_home(home)
    persistent_ledger(ledger_url)
    check_database_url(ledger_url)
    policy = cfg.policy_path or f"the suite's own (`arl suites show {cfg.suite}`)"
    lines = [
        f"dry run: the config is valid; nothing was started ({source}, profile {profile!r})",
        f"run: {cfg.name!r}" + (f", resuming {resume} from its last completed step" if resume else "")
        + f"; suite {cfg.suite!r}; policy {policy}",
        f"steps: {cfg.steps}; batch: {cfg.rollout.prompts_per_step} prompts x {cfg.trainer.group_size} samples = "
        f"{cfg.rollout.prompts_per_step * cfg.trainer.group_size} candidates a step; seed {cfg.seed}",
        f"pipeline: {cfg.pipeline} ({pipeline_reason(cfg)}); task runner: {cfg.task_runner}"
        + (f" ([cluster] {cfg.cluster.kind})" if cfg.cluster.kind != "local" else "") + f"; device: {cfg.device}",
        *_cluster_lines(cfg, tiers, cluster_problem),
        *([f"  note: {cluster_problem} (a run on this machine stops on it)"]
          if cluster_problem and cfg.cluster.kind == "local" else []),
        f"objective: {_objective_text(cfg)}",
        *([f"  note: {note}"] if (note := unchecked_objective_properties(cfg)) else []),
        f"prompts: {_prompts_text(cfg, source)}",
        f"ladder (cheapest first; scheduler policy {cfg.scheduler.policy!r}):",
    ]
    for name, tier, costs in tiers:
        limit = cfg.tier_concurrency.get(name)
        lines.append(f"  {name} ({tier}): {cost_text(costs)}" + (f"; at most {limit} at once" if limit else ""))
    lines += [
        f"budget: {_budget_text(cfg.scheduler.budget_per_run)} a run, "
        f"{_budget_text(cfg.scheduler.budget_per_step)} a step"
        + (", unspent carried to later steps" if cfg.scheduler.budget_carry else ""),
        "eval set: off (`arl runs eval RUN_ID` scores a finished run)" if not cfg.eval.samples else
        f"eval set: {cfg.eval.samples} samples a side after the last step, {cfg.eval.budget:g} CPU-s, seed {cfg.eval.seed}",
        f"ledger: {make_url(ledger_url).render_as_string(hide_password=True)} (checked, not connected: a dry run "
        "opens no database)",
        f"ARL_HOME: {home} (checkpoints and logs under {home / 'runs'})",
        "the resolved config: `arl config show"
        + (f" --config {source}" if source != "the built-in config" else "")
        + (f" --profile {profile}" if profile != "default" else "") + "`",
    ]
    for line in lines:
        console.print(shown(line, 1000), highlight=False, soft_wrap=True)  # markup-escaped by shown()


@app.command("run")
def run(
    config: Path | None = typer.Option(None, "--config", "-c", help="Run config (TOML); default: the built-in gap-window design run."),
    name: str | None = typer.Option(None, "--name", help="Run name (overrides the config)."),
    profile: str = typer.Option("default", "--profile", help="'default', or 'quick' (a 3-step smoke test, no DFT; about a minute on an idle machine)."),
    resume: str | None = typer.Option(None, "--resume", help="Continue run RUN_ID from its last completed step."),
    steps: int | None = typer.Option(None, "--steps", min=1, help="Number of training steps (overrides the config)."),
    task_runner: str | None = typer.Option(None, "--task-runner", help="'threads' (default), 'dask' or 'ray'."),
    dask_address: str | None = typer.Option(None, "--dask-address", help="tcp://HOST:PORT of a Dask scheduler."),
    pipeline: str | None = typer.Option(
        None, "--pipeline", help="'sync' (each step in turn) or 'async' (sampler, verification and learner at once)."
    ),
    url: str | None = URL_OPTION,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's logs in the terminal."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Check the config (suite, tiers, policy path, budget) and print what the run would "
        "do; start nothing (no Prefect, no prior training, no verifier call)."
    ),
) -> None:
    """Train a policy: rollout -> verify (scheduled tiers) -> GRPO -> hindsight -> checkpoint, as Prefect flows."""
    from arl_flows.config import ConfigError, load_config

    overrides: dict[str, Any] = {}
    # A dry run reads the ledger only to resume a run; otherwise it names the ledger without creating it.
    ledger = open_ledger(url) if resume or not dry_run else None
    if resume:
        assert ledger is not None
        from storage.ledger import LedgerError

        try:
            stored = ledger.get_run(resume)
        except LedgerError as exc:
            raise UserError(str(exc)) from None
        if stored.status.value == "completed":
            raise UserError(f"run {stored.id} already completed all {stored.steps_done} steps; nothing to resume")
        if config is None:
            from arl_flows.config import stored_fields

            overrides = stored_fields(stored.config)
        resume = stored.id
    # The fields the flags set (over the config, or the stored config of a resumed run).
    flags: dict[str, Any] = {k: v for k, v in (("steps", steps), ("task_runner", task_runner), ("pipeline", pipeline),
                                               ("dask_address", dask_address)) if v}
    if name is not None:
        if not name.strip():
            raise UserError("--name is empty; give the run a name, or leave --name out for the config's")
        flags["name"] = name
    if resume and config is None and flags.get("task_runner", "dask") != "dask":
        # A run that ran on a cluster continues on this machine: its stored [cluster] is where it ran, not what it learns.
        overrides.pop("dask_address", None)
        overrides.pop("cluster", None)
    overrides |= flags
    if dask_address:
        overrides.setdefault("task_runner", "dask")
    try:
        cfg = load_config(config, profile, overrides=overrides)
    except ConfigError as exc:
        message = _named_by_flag(str(exc), flags)
        if resume and config is None and message.startswith("default config: "):  # the run's own config said it
            message = f"run {resume[:12]}'s stored config: " + message.removeprefix("default config: ")
        raise UserError(message) from None
    source = str(config) if config else (f"run {resume[:12]}'s stored config" if resume else "the built-in config")
    if resume and config is not None:
        _refuse_a_changed_config(cfg, stored.config, source, resume)
    tiers = _check_ladder_and_policy(cfg, source, new=resume is None)
    cluster_problem = _cluster_tools_problem(cfg)
    if cluster_problem and not dry_run:
        raise UserError(f"{source}: {cluster_problem}")
    if not dry_run and (unreachable := _dask_scheduler_problem(cfg)):  # before a run is created (the dry run stays offline)
        if resume and not flags.get("dask_address"):  # the address is the run's own: say how to continue it here
            unreachable = unreachable.split("; start one there")[0] + (
                f"; run {resume[:12]} ran on it: start the scheduler there again, or continue the run on this machine "
                f"with `arl run --resume {resume[:12]} --task-runner threads`; nothing was started")
        raise UserError(unreachable)
    if dry_run:
        ledger_url = ledger.url if ledger is not None else (url or settings().ledger_url)
        _print_dry_run(cfg, tiers, ledger_url, source, profile, resume, cluster_problem)
        return
    assert ledger is not None
    quiet_prefect(verbose)
    _sigterm_as_interrupt()
    from arl_flows import prefect_env

    prefect_env.start_shielded_server()  # a Ctrl-C of the terminal stops the run, which then stops the server
    from arl_flows.flows import run_training, set_progress_listener

    view = _ProgressView(cfg.scheduler.budget_per_run)
    set_progress_listener(view)
    t0 = time.perf_counter()
    try:
        with view.progress:
            summary = run_training(
                overrides or None, config_path=str(config) if config else None, profile=profile, resume=resume,
                database_url=ledger.url,
            )
    except KeyboardInterrupt:
        if view.run_id:
            # The flow marks it on its way out; this covers a signal that landed inside Prefect's own code.
            from storage.records import RunStatus

            status = ledger.get_run(view.run_id).status
            if status == RunStatus.completed:  # the signal landed in the evaluation set, after the last step
                console.print(f"[yellow]interrupted[/] while scoring the evaluation set: run {view.run_id} completed; "
                              f"score it with `arl runs eval {view.run_id[:12]}`")
                raise typer.Exit(130) from None
            if status == RunStatus.running:
                ledger.set_run_status(view.run_id, RunStatus.interrupted)
        if not view.run_id:  # before the flow created (or reopened) the run: the Prefect server was still starting
            console.print(f"[yellow]interrupted[/] before run {resume} continued; it is as it was: `arl run --resume "
                          f"{resume}`" if resume else "[yellow]interrupted[/] before the run started; nothing was recorded")
            raise typer.Exit(130) from None
        console.print(f"[yellow]interrupted[/]: run {view.run_id} is marked interrupted; continue with `arl run --resume {view.run_id}`")
        raise typer.Exit(130) from None
    finally:
        set_progress_listener(None)
    rows = _earlier_steps(ledger, summary["id"], view.rows) + view.rows  # a resumed run is summed up whole
    console.print(_summary_table(summary, rows))
    if trend := _reward_trend(rows, cfg.rollout.prompts_per_step * cfg.trainer.group_size):
        console.print(trend, markup=False)
    if flat := _flat_reward_note(view.rows):
        console.print(flat, markup=False, style="yellow")
    for line in _verified_lines(ledger, summary["id"]):
        console.print(line)  # markup-escaped by shown()
    spend = _spend_line(summary)
    console.print(f"spend: {spend or 'none'}; {summary['trajectories']} trajectories; {time.perf_counter() - t0:.0f} s")
    short = summary["id"][:12]
    if summary.get("eval"):
        from arl_flows.eval_set import EvalResult, summary_line

        console.print(summary_line(EvalResult.model_validate(summary["eval"])), markup=False, highlight=False)
        console.print(f"run id: [bold]{summary['id']}[/]  (arl runs show {short}; arl report {short})")
    else:
        console.print(f"run id: [bold]{summary['id']}[/]  (arl runs show {short}; arl report {short}; "
                      f"`arl runs eval {short}` scores the first policy against the last checkpoint on a fixed set)")


@app.command("report")
def report(
    run_id: str = typer.Argument(..., help="Run id (a unique prefix is enough)."),
    out: Path = typer.Option(Path("arl-report"), "--out", "-o", help="Folder to write report.md and the PNG plots to."),
    url: str | None = URL_OPTION,
) -> None:
    """Write a run's markdown report with PNG plots (reward, spend, tier mix, surrogate calibration)."""
    from arl_flows.report import build_report
    from storage.ledger import LedgerError

    ledger = open_ledger(url, existing=True)
    try:
        path = build_report(ledger, run_id).write(out)
    except LedgerError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:  # --out is a file, under a file, or not writable
        raise UserError(f"--out {shown(str(out))}: cannot write the report there ({exc.strerror or exc}); give a folder "
                        "(created if missing) you can write to") from None
    except (ValueError, TypeError):
        # A row that cannot be left out (the run's own, a trajectory's) stops the report; anything else is a bug.
        unreadable = ledger.unreadable_rows(shown=1)
        if not unreadable:
            raise
        raise UserError(f"the ledger holds rows that do not read back ({unreadable[0]}); `arl db check` names them all") from None
    if ledger.unreadable_verdicts:
        err_console.print(f"warning: {ledger.unreadable_verdicts} verdict rows could not be read back and are left out of the "
                          "report; `arl db check` names them", markup=False, highlight=False, soft_wrap=True)
    console.print(f"report written to {shown(path)}")
