"""``arl runs``: list, inspect and evaluate training runs recorded in the ledger."""

from __future__ import annotations

import typer
from rich.table import Table

from arl_flows.cli._common import LEDGER_URL_HELP, UserError, app, console, missing_ledger_file, open_ledger, print_json, shown

# Command bodies import what they run (the ledger, the flows, Prefect, the suites' heavy parts) when they
# run, so that `arl --help` loads none of it.

runs_app = typer.Typer(help="Training runs recorded in the ledger.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")

URL_OPTION = typer.Option(None, "--url", help=LEDGER_URL_HELP)


@runs_app.command("list")
def list_runs(
    url: str | None = URL_OPTION,
    limit: int = typer.Option(50, min=0, help="Show at most this many runs (0: all)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Runs, newest first."""
    missing = missing_ledger_file(url)
    if missing is not None:  # a list creates nothing: a mistyped path is not a new, empty ledger
        if json_out:
            print_json([])
        else:
            console.print(f"no runs yet: no ledger at {shown(str(missing))}; start one with `arl run` (or `arl run "
                          "--profile quick`), or check the path if you expected one")
        return
    ledger = open_ledger(url)
    runs = ledger.list_runs(limit=limit)
    if json_out:
        print_json([r.model_dump(mode="json", exclude={"config"}) | {"steps_total": r.config.get("steps")} for r in runs])
        return
    if not runs:
        console.print(f"no runs yet in {shown(ledger.safe_url)}; start one with `arl run` (or `arl run --profile quick`)")
        return
    table = Table(title=f"runs in {shown(ledger.safe_url)}")
    for col in ("id", "name", "kind", "status", "steps", "created"):
        table.add_column(col)
    for r in runs:
        steps = f"{r.steps_done}/{r.config.get('steps') or '?'}" if _is_training(r.config) else "-"
        table.add_row(shown(r.id[:12]), shown(r.name, 200), _kind(r.name, r.config), r.status.value, shown(steps),
                      r.created_at.strftime("%Y-%m-%d %H:%M:%S UTC"))
    console.print(table)


def _is_training(config: dict) -> bool:
    """Whether a ledger run is a training run (``arl run``), not the scoring record of TieredReward, a rerank or an
    evaluation set, which has no steps or checkpoints."""
    return config.get("source") != "TieredReward"


def _kind(name: str, config: dict) -> str:
    if _is_training(config):
        return "train"
    return "eval" if name.startswith("eval-") else "scoring"


@runs_app.command("show")
def show_run(
    run_id: str = typer.Argument(..., help="Run id (a unique prefix is enough)."),
    url: str | None = URL_OPTION,
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    top_n: int = typer.Option(5, "--top", min=0, max=1000, help="List this many best candidates (0: none)."),
) -> None:
    """Status, steps, spend per tier, best reward, verdict counts and the top candidates of one run."""
    from arl_flows.report import best_candidates
    from storage.ledger import LedgerError

    ledger = open_ledger(url, existing=True)
    try:
        summary = ledger.run_summary(run_id)
    except LedgerError as exc:
        raise UserError(str(exc)) from None
    from arl_flows.eval_set import stored_result, summary_line

    top = best_candidates(ledger, summary["id"], n=top_n) if top_n else []
    evaluation = stored_result(summary["id"])
    if json_out:
        print_json(summary | {"eval": evaluation.model_dump(mode="json") if evaluation else None, "top_candidates": top})
        return
    table = Table(title=f"run {shown(summary['id'])} ({shown(summary['name'], 200)})", show_header=False)
    table.add_column("field")
    table.add_column("value")
    for key in ("status", "steps_done", "steps_total", "trajectories", "candidates", "best_reward", "mean_reward", "checkpoints", "lab_pending", "created_at", "updated_at"):
        value = summary[key]
        table.add_row(key, _number(value, 4) if isinstance(value, float) else shown(value))
    for row in summary["spend_by_verifier"]:  # ladder order, cheapest first
        table.add_row(f"spend/{shown(row['tier'])}", f"{row['cost_s']:.2f} CPU-s ({shown(row['verifier'])}, {row['calls']} calls)")
    for status, n in sorted(summary["verdicts_by_status"].items()):
        table.add_row(f"verdicts/{shown(status)}", str(n))
    if summary.get("learned_from"):
        table.add_row("learned_from", shown(summary["learned_from"], 300))
    stored = ledger.get_run(summary["id"])
    if not _is_training(stored.config):
        table.add_row("kind", f"{_kind(stored.name, stored.config)}: verdicts scored outside a training run (TieredReward, "
                              "`arl rerank` or an evaluation set); no steps or checkpoints")
    elif evaluation:
        table.add_row("eval", summary_line(evaluation))
    else:
        table.add_row("eval", f"not scored; `arl runs eval {shown(summary['id'][:12])}`")
    console.print(table)
    if summary["steps"]:
        console.print(_steps_table(summary["steps"]))
    if top:
        console.print(_top_table(top))


def _number(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals, or in exponent form where that would print hundreds of digits (a lab's
    1e308)."""
    return f"{value:.{digits}f}" if abs(value) < 1e6 else f"{value:.{digits}g}"


def _top_table(top: list[dict]) -> Table:
    """The best candidates: reward (marked when it is an estimate only) and each verifier's value."""
    names = list(dict.fromkeys(name for c in top for name in c["values"]))
    table = Table(title="top candidates (est.: no top-tier answer, the reward is the surrogate's estimate)")
    for col in ("answer", "reward", *names):
        table.add_column(shown(col))
    for c in top:
        reward = f"{c['reward']:.3f}" + ("" if c["verified"] else f" ± {c['std']:.3f} est.")
        cells = [_number(v, 3) if isinstance(v, float) else shown(v) for v in (c["values"].get(n, "") for n in names)]
        table.add_row(shown(c["answer"], 120), reward, *cells)
    return table


def _steps_table(steps: list[dict]) -> Table:
    """Reward, validity, spend and calls of each completed step."""
    table = Table(title="steps")
    for col in ("step", "reward mean", "reward max", "validity", "spend (CPU-s)", "calls", "seconds"):
        table.add_column(col)

    def num(value: float | None, fmt: str) -> str:
        return "" if value is None else format(value, fmt)

    for row in steps:
        table.add_row(
            str(row["step"]), num(row["reward_mean"], ".3f"), num(row["reward_max"], ".3f"), num(row["validity"], ".0%"),
            ", ".join(f"{shown(t)} {c:.1f}" for t, c in row["spend_by_tier"].items()),  # ladder order, from the ledger
            ", ".join(f"{shown(t)} {n}" for t, n in row["calls_by_tier"].items()), num(row["seconds"], ".1f"),
        )
    return table


@runs_app.command("eval")
def eval_run(
    run_id: str = typer.Argument(..., help="Run id (a unique prefix is enough)."),
    samples: int | None = typer.Option(
        None, "--samples", min=2, max=4096,
        help="Samples per side (default: the run's \\[eval] samples, or 64 when its config has the set off).",
    ),
    budget: float | None = typer.Option(
        None, "--budget", min=0.001, help="CPU-seconds of verification for both sides together (default: the run's \\[eval] budget, 60).",
    ),
    seed: int | None = typer.Option(None, "--seed", min=0, max=2**32 - 1, help="Sampling seed of both sides (default: the run's \\[eval] seed)."),
    url: str | None = URL_OPTION,
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Score a run's starting policy against its last checkpoint on the fixed evaluation set (same prompts, same seed)."""
    from arl_flows.eval_set import EvalError, evaluate, summary_line
    from storage.ledger import LedgerError

    ledger = open_ledger(url, existing=True)
    try:
        stored = ledger.get_run(run_id)
    except LedgerError as exc:
        raise UserError(str(exc)) from None
    if not _is_training(stored.config):
        kind = _kind(stored.name, stored.config)
        raise UserError(f"run {stored.id[:12]} is {'an' if kind == 'eval' else 'a'} {kind} run (verdicts scored outside "
                        "training); only a training run has a policy and checkpoints to evaluate")
    try:
        result = evaluate(ledger, run_id, samples=samples, budget=budget, seed=seed)
    except (LedgerError, EvalError) as exc:
        raise UserError(str(exc)) from None
    if json_out:
        print_json(result.model_dump(mode="json"))
        return
    console.print(summary_line(result), markup=False, highlight=False, soft_wrap=True)
    console.print(f"kept for `arl runs show {shown(result.run_id[:12])}`; the verification it paid for is ledger run "
                  f"{shown(result.eval_run_id[:12])}", highlight=False)
