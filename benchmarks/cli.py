"""``arl bench``: the scheduler, advantage, learning and pipeline benchmarks' commands, their options and help.

The molecules suite mounts this app as ``arl bench`` where ARL's source
checkout can be imported (:mod:`arl_flows.suites.molecules.bench`); the wheel
does not ship it. Each command hands its options, as given, to the function of
the same name in :mod:`benchmarks.commands`, which checks them, runs the
harness and prints the report. That module is imported when a command runs,
not here, so that ``arl --help`` and ``arl bench ... --help`` load no harness.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Annotated

import typer

__all__ = ["bench_app", "bench_pipeline"]

bench_app = typer.Typer(
    help="Benchmarks on the molecule ladder (scheduler retrieval, advantage accuracy per cost, learning, sync vs "
    "async pipeline); "
    "they need ARL's source checkout.",
    no_args_is_help=True,
)

DEFAULT_CACHE = Path("artifacts/bench/tier_verdicts.db")


def _commands() -> ModuleType:
    """:mod:`benchmarks.commands`, imported when a command runs: it loads the harnesses and all they import."""
    from benchmarks import commands

    return commands


PoolOpt = Annotated[Path | None, typer.Option("--pool", help="CSV with 'smiles' and 'gap_ev', or a reference pool's name (qm9_novel, druglike_moses; benchmarks/data/pools/); default: the space's (see --space).")]
WindowOpt = Annotated[
    tuple[float, float] | None,
    typer.Option("--window", help="Target window LO HI of the top-tier value (eV; default: the space's, 3 4 for qm9 and "
                 "examples/druglike.toml's 4.5 5.5 for druglike)."),
]
TopCostOpt = Annotated[
    float | None,
    typer.Option("--top-cost", help="CPU-seconds charged per top-tier call (default: the space's DFT call: 10.5 for qm9, "
                 "the DFT cost model at the typical size for druglike; docs/tiers.md)."),
]
SpaceOpt = Annotated[
    str | None,
    typer.Option("--space", help="Chemistry space (qm9, druglike; default: the --config's, else qm9): the runs' \\[options] space, the tiers' validity rules "
                 "and, for scheduler/advantages, the default pool and window (druglike: benchmarks/data/pools/druglike_moses.csv, "
                 "DFT computed here); for learning, the space's example settings (examples/druglike.toml) unless --config "
                 "is given, and its history from that pool."),
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the pool sample and the random baseline.")]
LimitOpt = Annotated[int, typer.Option("--limit", help="Pool size (molecules drawn from the CSV).")]
HeldOutOpt = Annotated[int, typer.Option("--held-out", help="Disjoint molecules with every tier known: tunes the cascade, seeds the surrogate.")]
CacheOpt = Annotated[Path | None, typer.Option("--cache", help="SQLite ledger file that keeps the live tiers' verdicts (created if missing; default artifacts/bench/tier_verdicts.db).")]
LedgerOpt = Annotated[str | None, typer.Option("--ledger", help="Keep the verdicts in this ledger URL instead of --cache.")]
JsonOpt = Annotated[Path | None, typer.Option("--json", help="Write the report here.")]


@bench_app.command("scheduler")
def bench_scheduler(
    pool: Annotated[
        str | None,
        typer.Option("--pool", help="CSV with 'smiles' and 'gap_ev', or a reference pool's name (qm9_novel, druglike_moses: "
                     "novel molecules with real DFT, benchmarks/data/pools/); default: the space's (qm9: the shipped QM9 subset; druglike: druglike_moses)."),
    ] = None,
    window: WindowOpt = None,
    policies: Annotated[str, typer.Option("--policies", help="Comma list: voi,all,cascade,random,oracle,fast-only.")] = "voi,all,cascade,random,oracle",
    top_cost: TopCostOpt = None,
    space: SpaceOpt = None,
    step_budget: Annotated[float | None, typer.Option("--step-budget", help="CPU-seconds per scheduler step for voi/random (default: 10 top-tier calls).")] = None,
    seed: SeedOpt = 0,
    limit: LimitOpt = 5000,
    held_out: Annotated[int | None, typer.Option("--held-out", help="Disjoint molecules with every tier known: tunes the cascade, seeds the surrogate (default 1,000; a small pool gives a fifth).")] = None,
    history: Annotated[int | None, typer.Option("--history", help="The same held-out split, capped at 200 answers: the history a run starts with (instead of --held-out).")] = None,
    cache: CacheOpt = None,
    ledger: LedgerOpt = None,
    json_out: JsonOpt = None,
    png: Annotated[Path | None, typer.Option("--png", help="Write the recall-versus-cost plot here.")] = None,
    learned: Annotated[bool, typer.Option("--learned/--no-learned", help="Stack the graph network under voi's surrogate when the held-out split has at least 2,000 molecules (trained once, a few CPU-minutes).")] = True,
    shipped: Annotated[bool, typer.Option("--shipped/--no-shipped", help="Start voi's surrogate from the network the suite ships (trained on QM9 but its test split: a pool from all of QM9 flatters it). --no-shipped: a cold start.")] = True,
    maximize: Annotated[bool, typer.Option("--maximize", help="Hits are the pool's top --top-fraction of the top-tier value (replaces --window).")] = False,
    minimize: Annotated[bool, typer.Option("--minimize", help="Hits are the pool's bottom --top-fraction of the top-tier value (replaces --window).")] = False,
    top_fraction: Annotated[float, typer.Option("--top-fraction", help="With --maximize/--minimize: the share of the pool that counts as a hit.")] = 0.01,
) -> None:
    """Retrieval from a pool: cost for each policy to confirm 50/80/95% of the hits at the top tier.

    Hits are the pool's values in --window, or with --maximize (--minimize) its top (bottom) --top-fraction:
    the scheduler then maximizes (minimizes) the value with a sigmoid whose midpoint is that cut, as it is
    given the window otherwise; the oracle knows every value.
    """
    _commands().scheduler(**locals())


@bench_app.command("advantages")
def bench_advantages(
    pool: PoolOpt = None,
    window: WindowOpt = None,
    softness: Annotated[float, typer.Option("--softness", help="Width of the reward's fall-off outside the window (eV).")] = 0.5,
    group_size: Annotated[int, typer.Option("--group-size", help="G: candidates per group.")] = 8,
    groups: Annotated[int, typer.Option("--groups", help="Number of groups drawn from the pool.")] = 250,
    policies: Annotated[str, typer.Option("--policies", help="Comma list: voi (advantage objective), voi-discovery, all, random, fast-only.")] = "voi,voi-discovery,random,all,fast-only",
    fractions: Annotated[str, typer.Option("--fractions", help="Budgets as fractions of the cost of 'all'.")] = "0.02,0.05,0.1,0.2,0.33,0.5",
    top_cost: TopCostOpt = None,
    space: SpaceOpt = None,
    seed: SeedOpt = 0,
    limit: LimitOpt = 5000,
    held_out: HeldOutOpt = 1000,
    cache: CacheOpt = None,
    ledger: LedgerOpt = None,
    json_out: JsonOpt = None,
    learned: Annotated[bool, typer.Option("--learned/--no-learned", help="Stack a graph network under the surrogate: the shipped one (see --shipped), else one trained once on a held-out split of at least 2,000 molecules (a few CPU-minutes).")] = True,
    shipped: Annotated[bool, typer.Option("--shipped/--no-shipped", help="Start the surrogate from the network the suite ships, as a run does (trained on QM9 but its test split: a pool from all of QM9 flatters it). --no-shipped: a cold start.")] = True,
) -> None:
    """Advantage accuracy per cost: groups of G molecules, estimated vs true GRPO advantages.

    Every policy's scheduler is built as a run's is (the suite's features and learner), so with
    --shipped its surrogate starts from the suite's network.
    """
    _commands().advantages(**locals())


@bench_app.command("learning")
def learning(
    budget: Annotated[float, typer.Option("--budget", help="CPU-seconds of verification each regime may spend.")] = 240.0,
    seeds: Annotated[int, typer.Option("--seeds", help="Number of seeds (0, 1, ...); each runs every regime.")] = 3,
    first_seed: Annotated[
        int, typer.Option("--first-seed", help="First seed (run seeds in separate processes; merge with --merge).")
    ] = 0,
    merge: Annotated[
        list[Path] | None, typer.Option("--merge", help="Only merge these JSON reports (same settings; other seeds or regimes) into one.")
    ] = None,
    regimes: Annotated[
        str,
        typer.Option(
            "--regimes",
            help="Comma list of scheduled, top-only, fast-only, cascade, scheduled-no-hindsight, fast-only-calibrated, "
            "xtb-only-calibrated, scheduled-paced.",
        ),
    ] = "scheduled,top-only,fast-only,cascade,scheduled-no-hindsight",
    step_budget: Annotated[float, typer.Option("--step-budget", help="CPU-seconds per step (all regimes but top-only).")] = 30.0,
    max_steps: Annotated[int, typer.Option("--max-steps", help="Step cap of every regime but the fast-only ones.")] = 40,
    proxy_max_steps: Annotated[
        int,
        typer.Option(
            "--proxy-max-steps",
            help="Step cap of fast-only, fast-only-calibrated and xtb-only-calibrated (they stop on the budget), and "
            "scheduled-paced's step count (its per-step budget is the budget over it).",
        ),
    ] = 5000,
    audit_points: Annotated[int, typer.Option("--audit-points", help="Audits at evenly spaced spend marks.")] = 12,
    novel_k: Annotated[
        int,
        typer.Option(
            "--novel-k",
            help="Novel molecules audited with real DFT at each audit point, and the k of the novel top-k AUC.",
        ),
    ] = 25,
    history: Annotated[int, typer.Option("--history", help="Held-out molecules (surrogate history, cascade tuning): QM9's, or the space's reference pool's.")] = 400,
    config: Annotated[
        Path | None, typer.Option("--config", help="TOML run config whose training settings every regime shares.")
    ] = None,
    space: SpaceOpt = None,
    workdir: Annotated[Path, typer.Option("--workdir", help="Where the per-regime ledgers go.")] = Path("artifacts/bench/learning"),
    cache: Annotated[
        Path | None,
        typer.Option("--cache", help="SQLite ledger file keeping the verdicts shared by regimes, seeds and reruns."),
    ] = Path("artifacts/bench/learning_verdicts.db"),
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report here.")] = None,
    png_out: Annotated[Path | None, typer.Option("--png", help="Save the curves (audited top-10 vs spend) here.")] = None,
) -> None:
    """Learning under a verification budget: GRPO per verification regime, audited top-10 and novel verified hits vs spend."""
    _commands().learning(**locals())


@bench_app.command("pipeline")
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
            help="Top tier: real PySCF B3LYP DFT (the space's basis) on a local Dask cluster of --dask-workers processes on this "
            "machine's cores, instead of the simulated cluster.",
        ),
    ] = False,
    latency: Annotated[float, typer.Option("--latency", help="Simulated cluster: wall seconds per call.")] = 10.0,
    slots: Annotated[int, typer.Option("--slots", help="Simulated cluster: calls it runs at once.")] = 16,
    cost_per_call: Annotated[float, typer.Option("--cost-per-call", help="Simulated cluster: CPU-seconds charged per call.")] = 15.0,
    dask_workers: Annotated[
        int, typer.Option("--dask-workers", help="With --real: Dask worker processes, one thread each (with --cluster slurm/pbs: the jobs).")
    ] = 2,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            help="With --real, where the DFT calls run: local (a LocalCluster here), slurm or pbs (Dask workers started "
            "as batch jobs, as `arl run` starts them) or dask (the address in \\[cluster]). The job settings (queue, "
            "cores, memory, walltime, job bounds) come from the --config TOML's \\[cluster] section (default: its kind, else local).",
        ),
    ] = None,
    max_ahead: Annotated[int | None, typer.Option("--max-ahead", help="Async: streaming.max_ahead (default: the run config's).")] = None,
    settle_std: Annotated[float | None, typer.Option("--settle-std", help="Async: streaming.settle_std (eV).")] = None,
    max_group_wait: Annotated[float | None, typer.Option("--max-group-wait", help="Async: streaming.max_group_wait_s.")] = None,
    audit_points: Annotated[int, typer.Option("--audit-points", help="Audits at evenly spaced spend marks.")] = 12,
    top_k: Annotated[int, typer.Option("--top-k", help="Molecules audited at each audit point (the k of the top-k AUC).")] = 10,
    history: Annotated[int, typer.Option("--history", help="Held-out QM9 molecules given to both surrogates (simulated setting).")] = 200,
    config: Annotated[Path | None, typer.Option("--config", help="TOML run config whose training settings both modes share.")] = None,
    space: SpaceOpt = None,
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
    _commands().pipeline(**locals())
