"""What ``arl bench ...`` runs: check the options as given, run the harness, print and write the report.

The commands themselves (their names, options and help) are declared in
:mod:`benchmarks.cli`; each hands its options, by name, to the function of the
same name here. The harnesses: :mod:`benchmarks.molecule_pool` and
:mod:`benchmarks.replay` (``scheduler``, ``advantages``),
:mod:`benchmarks.learning` (``learning``), :mod:`benchmarks.pipeline`
(``pipeline``). Every tier's verdict on every pool molecule is computed live
once by the real verifiers and kept in a ledger (``--cache``, a SQLite file,
or any ``--ledger`` URL), so a rerun pays for nothing twice; each policy is
then charged as if it had computed what it asked for.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from arl_flows.cli._common import UserError, console, err_console, open_ledger, shown

from benchmarks import learning as learning_harness
from benchmarks import molecule_pool as pools
from benchmarks import pipeline as pipeline_harness
from benchmarks import replay
from benchmarks.provenance import format_provenance, with_provenance

__all__ = ["advantages", "learning", "pipeline", "scheduler"]

# Median CPU-seconds of one pyscf-b3lyp call on QM9 molecules, measured in docs/tiers.md.
DEFAULT_TOP_COST = 10.5
_MAX_POOL = 10_000_000  # far more molecules than any pool file holds; a larger number is a typo


def _pool(args: dict[str, Any]) -> Any:
    """The benchmark pool, its verdicts read from (and new ones kept in) the --ledger URL or the --cache SQLite file."""
    cache, ledger_url = args.pop("cache"), args.pop("ledger")
    if ledger_url is not None and cache is not None:
        raise UserError("give --cache FILE or --ledger URL, not both: the verdicts are kept in one ledger")
    from benchmarks.cli import DEFAULT_CACHE

    cache = DEFAULT_CACHE if cache is None else cache
    try:
        args["pool"] = pools.resolve_pool(args["pool"])
        pools.load_pool(args["pool"])  # a bad pool file fails before a ledger file is created
    except pools.PoolError as exc:
        raise UserError(str(exc)) from None
    if ledger_url is None:
        if cache.exists() and not cache.is_file():
            raise UserError(f"--cache {str(cache)[:300]!r} is not a file; pass a SQLite file path")
        cache.parent.mkdir(parents=True, exist_ok=True)
        ledger_url = f"sqlite:///{cache}"
    ledger = open_ledger(ledger_url)
    try:
        return pools.molecule_pool(**args, ledger=ledger, progress=err_console.print)
    except pools.PoolError as exc:
        raise UserError(str(exc)) from None
    finally:
        ledger.close()


def _write_png(report: dict[str, Any], path: Path, n_hits: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    best_cascades = set(report["policies"].get("cascade", {}).get("variant", {}).values()) - {None}
    for label, curve in report["curves"].items():
        xs = [max(c, 1.0) for c in curve["cost"]]
        if label.startswith("cascade@") and label not in best_cascades:
            ax.plot(xs, curve["recall"], color="0.8", lw=0.6, drawstyle="steps-post", zorder=1)
            continue
        ax.plot(xs, curve["recall"], label=label, lw=1.6, drawstyle="steps-post", zorder=2)
    ax.plot([], [], color="0.8", lw=0.6, label="other cascade tunings")
    ax.set_xscale("log")
    ax.set_xlabel("CPU-seconds charged (log)")
    ax.set_ylabel(f"recall of {n_hits} hits")
    ax.set_title(f"Retrieval ({_target_text(report)}) from {report['pool']} molecules")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def _positive(option: str, value: float | None, *, allow_inf: bool = False) -> None:
    """A CPU-second or width option: a positive number (click's own range checks let NaN through)."""
    if value is None:
        return
    if math.isnan(value) or value <= 0 or (math.isinf(value) and not allow_inf):
        raise UserError(f"{option} must be a positive {'number' if allow_inf else 'finite number'}, got {value}")


def _count(option: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise UserError(f"{option} must be from {low:,} to {high:,}, got {value}")


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"  # a space's example run: its window and ladder


def _space(space: str | None) -> str:
    """The chemistry space ``--space`` names (none: qm9); an unknown one is one line listing the known ones."""
    from arl_flows.suites.molecules.spaces import DEFAULT_SPACE, get_space

    try:
        return get_space(DEFAULT_SPACE if space is None else space).name
    except ValueError as exc:
        raise UserError(f"--space: {exc}") from None


def _space_window(space: str) -> tuple[float, float]:
    """The target window of ``space``'s runs: the suite's own (3-4 eV) for qm9, else its example run's."""
    from arl_flows.config import load_config

    scheduler = load_config(None if space == "qm9" else EXAMPLES / f"{space}.toml").scheduler
    return float(scheduler.target_low), float(scheduler.target_high)


def _space_defaults(space: str, pool: Path | None, top_cost: float | None) -> tuple[Path | None, float]:
    """The pool and top-tier cost of ``space`` where the options leave them out.

    qm9: the shipped QM9 subset at 10.5 CPU-s a call (the median measured in docs/tiers.md); druglike: the
    reference pool of MOSES test molecules with DFT computed here, at the DFT cost model's call at the space's
    typical size.
    """
    if space == "qm9":
        return pool, DEFAULT_TOP_COST if top_cost is None else top_cost
    from arl_flows.suites.molecules.dft import DFT_COST_MODEL
    from arl_flows.suites.molecules.spaces import get_space

    chem = get_space(space)
    typical = DFT_COST_MODEL.expected(float(chem.typical_heavy_atoms or chem.max_heavy_atoms))
    if pool is None:
        try:
            pool = pools.space_reference_pool(space)
        except pools.PoolError as exc:
            raise UserError(str(exc)) from None
    return pool, round(typical, 1) if top_cost is None else top_cost


def _pool_inputs(window: tuple[float, float] | None, space: str | None, pool: Path | None,
                 top_cost: float | None) -> tuple[float, float, str, Path | None, float]:
    """The checked window and space, and the window, pool and top-tier cost the space implies where the options leave
    them out."""
    space = _space(space)
    low, high = _window(window if window is not None else _space_window(space))
    pool, top_cost = _space_defaults(space, pool, top_cost)
    return low, high, space, pool, top_cost


def _with_space(overrides: dict[str, Any], space: str | None) -> dict[str, Any]:
    """``overrides`` with ``[options] space``: a given --space wins over the config's; none leaves the config's."""
    if space is None:
        return overrides  # the config's own space, if it names one; else the suite's default
    return overrides | {"options": dict(overrides.get("options") or {}) | {"space": _space(space)}}


def _workdir_and_overrides(workdir: Path, config: Path | None) -> dict[str, Any]:
    """Check ``--workdir`` is (or can be) a folder; return the TOML overrides of ``--config`` (empty without one)."""
    if workdir.exists() and not workdir.is_dir():
        raise UserError(f"--workdir {str(workdir)[:300]!r} is not a folder")
    if config is None:
        return {}
    from arl_flows.config import ConfigError, build_config, read_toml

    try:
        data = read_toml(config)
        build_config(data, str(config))  # a field the file gets wrong is named with the file, before any work
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    return data


def _timed_progress() -> Callable[[str], None]:
    """A progress printer that follows each message with the seconds since it was made."""
    t0 = time.perf_counter()
    return lambda msg: err_console.print(f"  {msg} ({time.perf_counter() - t0:.0f}s)")


def _run_harness(
    make_config: Callable[[], Any], run: Callable[..., dict[str, Any]], *, workdir: Path, cache: Path | None
) -> dict[str, Any]:
    """Build a harness's settings and run it with timed progress; a setting or run the harness rejects is a UserError."""
    from pydantic import ValidationError

    try:
        bench = make_config()
    except ValidationError as exc:
        raise UserError(f"bad benchmark setting: {_first_error(exc)}") from None
    except ValueError as exc:
        raise UserError(f"bad benchmark setting: {str(exc).splitlines()[-1]}") from None
    try:
        return run(bench, workdir=workdir, cache=cache, progress=_timed_progress())
    except ValidationError as exc:  # a tier's parameters the run's config gives (e.g. a basis without an element)
        raise UserError(f"bad run setting: {exc.title}: {_first_error(exc)}") from None
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _first_error(exc: Any) -> str:
    """A pydantic ValidationError's first error on one line, named by its field (without pydantic's help link)."""
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err["loc"])
    message = " ".join(str(err["msg"]).removeprefix("Value error, ").split())
    return f"{loc + ': ' if loc else ''}{message}"[:500]


def _write_json(report: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(with_provenance(report), indent=2))


def _window(window: tuple[float, float]) -> tuple[float, float]:
    low, high = window
    if not (math.isfinite(low) and math.isfinite(high)):
        raise UserError(f"--window {low} {high}: give two finite numbers LO HI (eV)")
    if not low < high:
        raise UserError(f"--window {low} {high}: LO must be below HI; swap them")
    return low, high


MAX_HISTORY = 200  # the retrieval targets are stated for at most 200 answers of history


def _choices(option: str, text: str, allowed: Sequence[str]) -> list[str]:
    """``text`` as a comma list of names from ``allowed`` (at least one); else a UserError naming the option."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n[:40] for n in names if n not in allowed]
    if unknown or not names:
        raise UserError(f"{option}: unknown {', '.join(unknown[:5]) or '(none given)'}; use a comma list of {', '.join(allowed)}")
    return names


def scheduler(
    *,
    pool: Path | None,
    window: tuple[float, float] | None,
    policies: str,
    top_cost: float | None,
    space: str | None,
    step_budget: float | None,
    seed: int,
    limit: int,
    held_out: int | None,
    history: int | None,
    cache: Path | None,
    ledger: str | None,
    json_out: Path | None,
    png: Path | None,
    learned: bool,
    shipped: bool,
    maximize: bool,
    minimize: bool,
    top_fraction: float,
) -> None:
    """``arl bench scheduler``: retrieval from a pool, the cost for each policy to confirm 50/80/95% of the hits."""
    from arl_flows.suites.molecules.features import molecule_features
    from arl_flows.suites.molecules.learner import learner_for
    from verifiers.scheduler.config import LearnedSurrogateConfig

    low, high, space, pool, top_cost = _pool_inputs(window, space, pool, top_cost)
    learned_config = LearnedSurrogateConfig(enabled=learned, shipped=learned and shipped)
    if maximize and minimize:
        raise UserError("give --maximize or --minimize, not both")
    if window is not None and (maximize or minimize):
        raise UserError("--window and --maximize/--minimize exclude each other: the hits are either the window's or the "
                        "pool's top (bottom) --top-fraction")
    if (maximize or minimize) and not 0 < top_fraction <= 0.5:  # NaN fails the comparison too
        raise UserError(f"--top-fraction must be in (0, 0.5], got {top_fraction}")
    _positive("--top-cost", top_cost)
    _positive("--step-budget", step_budget)
    _count("--limit", limit, 10, _MAX_POOL)
    if history is not None and held_out is not None:
        raise UserError("give --history or --held-out, not both (--history is a held-out split of at most 200 answers)")
    if history is not None:
        _count("--history", history, 0, MAX_HISTORY)
        held_out = history
    held_out = 1000 if held_out is None else held_out
    _count("--held-out", held_out, 0, _MAX_POOL)
    names = _choices("--policies", policies, ("voi", "all", "cascade", "random", "oracle", "fast-only"))
    pool_args = {"pool": pool, "limit": limit, "held_out": held_out, "seed": seed, "top_cost": top_cost, "low": low,
                 "high": high, "space": space}
    data = _pool(pool_args | {"cache": cache, "ledger": ledger})
    objective, target = None, None
    if maximize or minimize:
        low, high, objective, target = _top_fraction(data.truth, "maximize" if maximize else "minimize", top_fraction)
    progress = _timed_progress()
    try:
        report = replay.retrieval_benchmark(
            data.ladder,
            data.pool,
            data.truth,
            data.held_out,
            low=low,
            high=high,
            policies=names,
            featurize=molecule_features,
            step_budget=step_budget or 10 * top_cost,
            seed=seed,
            learned=learned_config,
            objective=objective,
            progress=progress,
            learner=learner_for(),
        )
    except ValueError as exc:  # no hits in the pool or the held-out split: the user must widen or enlarge
        raise UserError(str(exc)) from None
    report["target"] = target or {"window": [low, high]}
    report["top_cost"] = top_cost
    report["space"] = space
    report["novel_hits"] = pools.novel_hits([k for k, y in data.truth.items() if low <= y <= high], space)
    report["tiers"] = [v.name for v in data.ladder]
    report["surrogate_calibration"], report["learned_surrogate_pairs"] = pools.calibration(data, seed, learned_config)
    _print_retrieval(report)
    for pattern, cal in report["surrogate_calibration"].items():
        console.print(
            f"surrogate given {pattern}: 50% interval covers {cal['coverage_50']:.3f}, "
            f"90% covers {cal['coverage_90']:.3f}, MAE {cal['mean_abs_error']:.3f} eV (n={cal['n']:.0f})"
        )
    console.print(f"provenance: {shown(format_provenance())}")
    if png:
        _write_png(report, png, report["hits"])
    if json_out:
        _write_json(report, json_out)



def _top_fraction(truth: dict[str, float], direction: str, fraction: float) -> tuple[float, float, Any, dict[str, Any]]:
    """Hit range, objective and report entry for the pool's top (maximize) or bottom (minimize) ``fraction``."""
    from verifiers.objectives import VALUE, Objective, Term

    values = sorted(truth.values(), reverse=direction == "maximize")
    k = max(math.ceil(fraction * len(values)), 1)
    cut = values[k - 1]
    low, high = (cut, math.inf) if direction == "maximize" else (-math.inf, cut)
    # The sigmoid's midpoint is the cut (where the objective counts a value as a hit); 10 per eV sets only
    # how fast the reward rises around it, which discovery does not use.
    term = Term(kind=direction, property=VALUE, transform="sigmoid", midpoint=cut, steepness=10.0)
    return low, high, Objective(terms=[term]), {direction: VALUE, "top_fraction": fraction, "cut": cut}


def _target_text(report: dict[str, Any]) -> str:
    target = report.get("target") or {}
    if "window" in target:
        return f"window {target['window']} eV"
    direction = "maximize" if "maximize" in target else "minimize"
    return f"{direction}: {'top' if direction == 'maximize' else 'bottom'} {target['top_fraction']:g} (cut {target['cut']:.3f} eV)"


def _fmt(x: float | None, digits: int = 0) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _print_retrieval(report: dict[str, Any]) -> None:
    from rich.table import Table

    novel = f" ({report['novel_hits']} novel)" if report.get("novel_hits") is not None else ""
    t = Table(title=f"{report['hits']} hits{novel} in {report['pool']} molecules, {_target_text(report)}")
    t.add_column("policy", no_wrap=True, min_width=18)
    for col in ("cost@50%", "cost@80%", "cost@95%", "x oracle @50", "x oracle @80", "x oracle @95"):
        t.add_column(col, justify="right")
    for label, row in report["policies"].items():
        c, r = row["cost_to_recall"], row["ratio_to_oracle"]
        t.add_row(label, *(_fmt(c[k]) for k in ("0.5", "0.8", "0.95")), *(_fmt(r[k], 2) for k in ("0.5", "0.8", "0.95")))
    _print_table(t)


def advantages(
    *,
    pool: Path | None,
    window: tuple[float, float] | None,
    softness: float,
    group_size: int,
    groups: int,
    policies: str,
    fractions: str,
    top_cost: float | None,
    space: str | None,
    seed: int,
    limit: int,
    held_out: int,
    cache: Path | None,
    ledger: str | None,
    json_out: Path | None,
    learned: bool,
    shipped: bool,
) -> None:
    """``arl bench advantages``: groups of G molecules, estimated against true GRPO advantages per cost."""
    from arl_flows.suites.molecules.features import molecule_features
    from arl_flows.suites.molecules.learner import learner_for
    from verifiers.scheduler.config import LearnedSurrogateConfig

    low, high, space, pool, top_cost = _pool_inputs(window, space, pool, top_cost)
    if math.isnan(softness) or not 0 <= softness < math.inf:
        raise UserError(f"--softness must be a finite number >= 0 (eV), got {softness}")
    _positive("--top-cost", top_cost)
    _count("--group-size", group_size, 2, 1024)
    _count("--groups", groups, 1, _MAX_POOL)
    _count("--limit", limit, 10, _MAX_POOL)
    _count("--held-out", held_out, 0, _MAX_POOL)
    names = _choices("--policies", policies, ("voi", "voi-discovery", "all", "random", "fast-only"))
    try:
        fracs = [float(f) for f in fractions.split(",") if f.strip()]
    except ValueError:
        raise UserError(f"--fractions {fractions[:100]!r} must be a comma list of numbers") from None
    if not fracs or not all(0 < f <= 1 for f in fracs):  # NaN fails the comparison too
        raise UserError(f"--fractions {fractions[:100]!r}: give fractions of the cost of 'all' in (0, 1], e.g. 0.05,0.1")
    pool_args = {"pool": pool, "limit": limit, "held_out": held_out, "seed": seed, "top_cost": top_cost, "low": low,
                 "high": high, "space": space}
    data = _pool(pool_args | {"cache": cache, "ledger": ledger})
    members = list(data.pool)
    if len(members) < group_size * groups:
        raise UserError(f"the pool has {len(members)} molecules; {groups} groups of {group_size} need more (raise --limit)")
    random.Random(seed + 1).shuffle(members)
    grouped = [members[g * group_size : (g + 1) * group_size] for g in range(groups)]
    progress = _timed_progress()
    report = replay.advantage_benchmark(
        data.ladder,
        grouped,
        data.truth,
        data.held_out,
        low=low,
        high=high,
        softness=softness,
        policies=names,
        budget_fractions=fracs,
        featurize=molecule_features,  # what MoleculeSuite.featurize returns
        seed=seed,
        learned=LearnedSurrogateConfig(enabled=learned, shipped=learned and shipped),
        progress=progress,
        learner=learner_for(),
    )
    report["top_cost"] = top_cost
    report["space"] = space
    from rich.table import Table

    t = Table(title=f"{groups} groups of {group_size} ({report['informative_groups']} informative), cost of all {report['cost_of_all']:.0f}s")
    for col in ("policy", "budget", "spend", "spend/all", "spearman", "sign agree", "rmse"):
        t.add_column(col, justify="right")
    for name, rows in report["policies"].items():
        for r in rows:
            t.add_row(name, f"{r['budget_fraction']:g}", _fmt(r["spend"]), _fmt(r["spend_fraction"], 3),
                      _fmt(r["spearman"], 3), _fmt(r["sign_agreement"], 3), _fmt(r["rmse"], 3))
    _print_table(t)
    console.print(f"spend fraction to match 'all' (spearman and sign within 0.02): {report['spend_fraction_to_match_all']}")
    console.print(f"surrogate: {', '.join(report['surrogate'])}")
    console.print(f"provenance: {shown(format_provenance())}")
    if json_out:
        _write_json(report, json_out)



def learning(
    *,
    budget: float,
    seeds: int,
    first_seed: int,
    merge: list[Path] | None,
    regimes: str,
    step_budget: float,
    max_steps: int,
    proxy_max_steps: int,
    audit_points: int,
    novel_k: int,
    history: int,
    config: Path | None,
    space: str | None,
    workdir: Path,
    cache: Path | None,
    json_out: Path | None,
    png_out: Path | None,
) -> None:
    """``arl bench learning``: GRPO per verification regime under one budget, audited top-10 against spend."""
    if merge:
        missing = [str(p) for p in merge if not p.is_file()]
        if missing:
            raise UserError(f"--merge: no such report(s): {', '.join(missing)}")
        reports = []
        for path in merge:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                data = None
            if not (isinstance(data, dict) and isinstance(data.get("settings"), dict) and isinstance(data.get("regimes"), dict)):
                raise UserError(f"--merge {path}: not a learning-benchmark report (a JSON object with 'settings' and "
                                "'regimes', as --json writes)")
            reports.append(data)
        try:
            report = learning_harness.merge_reports(reports)
        except ValueError as exc:  # the reports do not belong together
            raise UserError(f"--merge: {exc}") from None
        except (KeyError, TypeError, AttributeError) as exc:  # a report of this shape that another version wrote
            raise UserError(f"--merge: a report lacks what this version reads ({exc!s:.100}); rerun it with this version") from None
        _print_learning(report, json_out, png_out)
        return

    names = _choices("--regimes", regimes, learning_harness.REGIMES)
    _positive("--budget", budget)
    _positive("--step-budget", step_budget)
    _count("--seeds", seeds, 1, 1000)
    _count("--first-seed", first_seed, 0, 2**31 - seeds)
    _count("--max-steps", max_steps, 1, 1_000_000)
    _count("--proxy-max-steps", proxy_max_steps, 1, 1_000_000)
    _count("--audit-points", audit_points, 1, 10_000)
    _count("--novel-k", novel_k, 1, 10_000)
    _count("--history", history, 0, _MAX_POOL)
    space = _space(space) if space is not None else None
    if config is None and space not in (None, "qm9"):  # the space's own run settings: its window, token limit, ladder
        config = EXAMPLES / f"{space}.toml"
        err_console.print(f"  settings of the {space} space: {config} (give --config to change them)")
    overrides = _with_space(_workdir_and_overrides(workdir, config), space)
    report = _run_harness(
        lambda: learning_harness.LearningBenchConfig(
            budget=budget, seeds=list(range(first_seed, first_seed + seeds)), regimes=names, budget_per_step=step_budget, max_steps=max_steps,
            proxy_max_steps=proxy_max_steps,
            audit_points=audit_points, novel_k=novel_k, history=history, run_overrides=overrides,
        ),
        learning_harness.learning_benchmark, workdir=workdir, cache=cache,
    )
    _print_learning(report, json_out, png_out)



def _print_summary(title: str, rows: Sequence[Sequence[Any]]) -> None:
    """A harness's summary table: its first row the column names, the rest right-aligned cells."""
    from rich.table import Table

    t = Table(title=title)
    for col in rows[0]:
        t.add_column(shown(col), justify="right")
    for row in rows[1:]:
        t.add_row(*(shown(cell) for cell in row))
    _print_table(t)


def _print_table(table: Any) -> None:
    """A results table whole: piped or logged, a console is 80 columns wide and rich cut the cells to '0.7…'."""
    if console.is_terminal:
        console.print(table)
        return
    from rich.console import Console

    Console(width=max(console.width, _PIPED_WIDTH), emoji=False, file=console.file).print(table)  # as wide as it needs


_PIPED_WIDTH = 240


def _print_learning(report: dict[str, Any], json_out: Path | None, png_out: Path | None) -> None:
    _print_summary(
        f"Learning under a {report['budget']:g} CPU-s verification budget, {len(report['seeds'])} seed(s), "
        f"top tier {shown(report['top_tier'])}",
        learning_harness.summary_table(report),
    )
    ratios = [f"{shown(k)} {_fmt(v, 2)}" for k, v in report["ratios"].items() if v is not None]  # of the regimes run
    if ratios:
        console.print("top-10 AUC ratios: " + ", ".join(ratios))
    novel = report.get("novel_ratios") or {}  # a report merged from before the novel metrics has none
    if novel:
        console.print(
            "ratios of novel hits/CPU-h (with audits charged) and novel top-k AUC: "
            + ", ".join(
                f"{shown(k)} {_fmt(v.get('novel_hits_per_cpu_hour'), 2)} ({_fmt(v.get('novel_hits_per_cpu_hour_with_audits'), 2)}) "
                f"/ {_fmt(v.get('novel_topk_auc'), 2)}"
                for k, v in novel.items()
            )
        )
    saturated = report["novel_topk_saturated"]  # the run's, or recomputed by the merge
    if saturated:
        k = report["settings"].get("novel_k")
        console.print(f"[yellow]the novel top-{k} saturates for {', '.join(shown(n) for n in saturated)} (best {k} at "
                      f"{learning_harness.SATURATED:g} or more): its AUC no longer tells them apart; rerun with a larger "
                      "--novel-k[/yellow]")
    console.print(f"provenance: {shown(format_provenance(report.get('provenance')))}")
    if json_out:
        learning_harness.write_json(report, json_out)
    if png_out:
        learning_harness.plot_curves(report, png_out)


def pipeline(
    *,
    budget: float,
    step_budget: float,
    seed: int,
    max_steps: int,
    modes: str,
    real: bool,
    latency: float,
    slots: int,
    cost_per_call: float,
    dask_workers: int,
    cluster: str | None,
    max_ahead: int | None,
    settle_std: float | None,
    max_group_wait: float | None,
    audit_points: int,
    top_k: int,
    history: int,
    config: Path | None,
    space: str | None,
    workdir: Path,
    cache: Path | None,
    json_out: Path | None,
) -> None:
    """``arl bench pipeline``: sync steps against the async pipeline at equal budget, seed and prior."""
    names = _choices("--modes", modes, pipeline_harness.MODES)
    for option, value in (("--budget", budget), ("--step-budget", step_budget), ("--latency", latency),
                          ("--cost-per-call", cost_per_call), ("--settle-std", settle_std), ("--max-group-wait", max_group_wait)):
        _positive(option, value)
    _count("--max-steps", max_steps, 1, 1_000_000)
    _count("--slots", slots, 1, 4096)
    _count("--dask-workers", dask_workers, 1, 256)
    _count("--audit-points", audit_points, 1, 10_000)
    _count("--top-k", top_k, 1, 10_000)
    _count("--history", history, 0, 10_000_000)
    if max_ahead is not None:
        _count("--max-ahead", max_ahead, 1, 64)  # streaming.max_ahead's own bounds, named by the flag given
    overrides = _with_space(_workdir_and_overrides(workdir, config), space)
    kinds = ("local", "dask", "slurm", "pbs")
    if cluster is not None and cluster not in kinds:
        raise UserError(f"--cluster {shown(cluster)}: use one of {', '.join(kinds)}")
    # The top tier's cluster: the config's [cluster] job settings, of the kind --cluster names (else the config's).
    cluster_settings = dict(overrides.pop("cluster", {}) or {}) | ({"kind": cluster} if cluster else {})
    streaming = dict(overrides.pop("streaming", {}) or {})
    for key, value in (("max_ahead", max_ahead), ("settle_std", settle_std), ("max_group_wait_s", max_group_wait)):
        if value is not None:
            streaming[key] = value
    report = _run_harness(
        lambda: pipeline_harness.PipelineBenchConfig(
            budget=budget, budget_per_step=step_budget, seed=seed, max_steps=max_steps, modes=names, real=real,
            latency_s=latency, slots=slots, cost_per_call=cost_per_call, dask_workers=dask_workers,
            audit_points=audit_points, top_k=top_k, history=history, streaming=streaming, run_overrides=overrides,
            cluster=cluster_settings,
        ),
        pipeline_harness.pipeline_benchmark, workdir=workdir, cache=cache,
    )
    _print_pipeline(report)
    if json_out:
        pipeline_harness.write_json(report, json_out)



def _print_pipeline(report: dict[str, Any]) -> None:
    s = report["settings"]
    top = f"real DFT on Dask ({s['cluster']['kind']})" if s["real"] else f"simulated cluster ({s['latency_s']:g} s, {s['slots']} slots)"
    _print_summary(f"Sync vs async at {s['budget']:g} CPU-s, top tier {shown(top)}", pipeline_harness.summary_table(report))
    console.print("ratios: " + ", ".join(f"{shown(k)} {'-' if v is None else f'{v:.2f}'}" for k, v in report["ratios"].items()))
    console.print(f"provenance: {shown(format_provenance())}")
