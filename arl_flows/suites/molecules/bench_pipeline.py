"""``arl bench pipeline``: the synchronous step against the asynchronous pipeline at equal verification budget.

The command checks the options and prints the report; the harness is
:mod:`benchmarks.pipeline` in ARL's source checkout (not in the wheel).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from arl_flows.cli._common import UserError, console, err_console, shown

__all__ = ["bench_pipeline", "pipeline_app"]


def bench_pipeline(
    budget: Annotated[float, typer.Option("--budget", help="CPU-seconds of verification each mode may spend.")] = 900.0,
    step_budget: Annotated[float, typer.Option("--step-budget", help="CPU-seconds one step (one sampled batch) may spend.")] = 240.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of both modes.")] = 0,
    max_steps: Annotated[int, typer.Option("--max-steps", help="Step cap of both modes (they normally stop on the budget).")] = 60,
    modes: Annotated[str, typer.Option("--modes", help="Comma list of sync, async.")] = "sync,async",
    real: Annotated[
        bool,
        typer.Option(
            "--real",
            help="Top tier: real PySCF B3LYP/6-31G DFT on a local Dask cluster of --dask-workers processes on this "
            "machine's cores, instead of the simulated cluster.",
        ),
    ] = False,
    latency: Annotated[float, typer.Option("--latency", help="Simulated cluster: wall seconds per call.")] = 10.0,
    slots: Annotated[int, typer.Option("--slots", help="Simulated cluster: calls it runs at once.")] = 16,
    cost_per_call: Annotated[float, typer.Option("--cost-per-call", help="Simulated cluster: CPU-seconds charged per call.")] = 15.0,
    dask_workers: Annotated[int, typer.Option("--dask-workers", help="With --real: Dask worker processes, one thread each.")] = 2,
    max_ahead: Annotated[int | None, typer.Option("--max-ahead", help="Async: streaming.max_ahead (default: the run config's).")] = None,
    settle_std: Annotated[float | None, typer.Option("--settle-std", help="Async: streaming.settle_std (eV).")] = None,
    max_group_wait: Annotated[float | None, typer.Option("--max-group-wait", help="Async: streaming.max_group_wait_s.")] = None,
    audit_points: Annotated[int, typer.Option("--audit-points", help="Audits at evenly spaced spend marks.")] = 12,
    history: Annotated[int, typer.Option("--history", help="Held-out QM9 molecules given to both surrogates (simulated setting).")] = 200,
    config: Annotated[Path | None, typer.Option("--config", help="TOML run config whose training settings both modes share.")] = None,
    workdir: Annotated[Path, typer.Option("--workdir", help="Where the per-mode ledgers go.")] = Path("artifacts/bench/pipeline"),
    cache: Annotated[
        Path | None, typer.Option("--cache", help="SQLite ledger keeping the audit verdicts (the truth) across reruns.")
    ] = Path("artifacts/bench/pipeline_audit.db"),
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report here.")] = None,
) -> None:
    """Streaming pipeline: sync steps against the async pipeline at equal budget, seed and prior.

    Reports per mode the wall-clock seconds, top-10 AUC (as `arl bench learning` defines it), GRPO steps, the
    utilisation of each tier's workers, the learner's idle share and the staleness of what it learned.

    By default the top tier is the simulated cluster (--latency 10 s per call, --slots 16): it MODELS A REMOTE
    DFT QUEUE OR LAB (answers from the QM9 table after the wait, uses no CPU here, charged --cost-per-call). With
    --real it is real DFT run on this machine's cores through a local Dask cluster.
    """
    from arl_flows.suites.molecules.bench import _count, _harness, _positive, _workdir_and_overrides

    harness = _harness("pipeline")
    names = [m.strip() for m in modes.split(",") if m.strip()]
    unknown = [m[:40] for m in names if m not in harness.MODES]
    if unknown or not names:
        raise UserError(f"--modes: unknown {', '.join(unknown[:5]) or '(none given)'}; use {', '.join(harness.MODES)}")
    for option, value in (("--budget", budget), ("--step-budget", step_budget), ("--latency", latency),
                          ("--cost-per-call", cost_per_call), ("--settle-std", settle_std), ("--max-group-wait", max_group_wait)):
        _positive(option, value)
    _count("--max-steps", max_steps, 1, 1_000_000)
    _count("--slots", slots, 1, 4096)
    _count("--dask-workers", dask_workers, 1, 256)
    _count("--audit-points", audit_points, 1, 10_000)
    _count("--history", history, 0, 10_000_000)
    overrides = _workdir_and_overrides(workdir, config)
    streaming = dict(overrides.pop("streaming", {}) or {})
    for key, value in (("max_ahead", max_ahead), ("settle_std", settle_std), ("max_group_wait_s", max_group_wait)):
        if value is not None:
            streaming[key] = value
    try:
        bench = harness.PipelineBenchConfig(
            budget=budget, budget_per_step=step_budget, seed=seed, max_steps=max_steps, modes=names, real=real,
            latency_s=latency, slots=slots, cost_per_call=cost_per_call, dask_workers=dask_workers,
            audit_points=audit_points, history=history, streaming=streaming, run_overrides=overrides,
        )
    except ValueError as exc:
        raise UserError(f"bad benchmark setting: {str(exc).splitlines()[-1]}") from None
    t0 = time.perf_counter()
    try:
        report = harness.pipeline_benchmark(
            bench, workdir=workdir, cache=cache, progress=lambda msg: err_console.print(f"  {msg} ({time.perf_counter() - t0:.0f}s)")
        )
    except ValueError as exc:
        raise UserError(str(exc)) from None
    _print(report, harness)
    if json_out:
        harness.write_json(report, json_out)


def _print(report: dict[str, Any], harness: Any) -> None:
    from rich.table import Table

    rows = harness.summary_table(report)
    s = report["settings"]
    top = "real DFT on Dask" if s["real"] else f"simulated cluster ({s['latency_s']:g} s, {s['slots']} slots)"
    t = Table(title=f"Sync vs async at {s['budget']:g} CPU-s, top tier {shown(top)}")
    for col in rows[0]:
        t.add_column(shown(col), justify="right")
    for row in rows[1:]:
        t.add_row(*(shown(cell) for cell in row))
    console.print(t)
    console.print("ratios: " + ", ".join(f"{shown(k)} {'-' if v is None else f'{v:.2f}'}" for k, v in report["ratios"].items()))


pipeline_app = typer.Typer(add_completion=False)
pipeline_app.command()(bench_pipeline)
