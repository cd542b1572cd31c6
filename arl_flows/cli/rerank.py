"""``arl rerank``: Best-of-N at inference, through the scheduler, under a budget.

Each line of ``--input`` (JSON Lines) is one prompt: its candidates and its
goal, as ``"goal": {...}`` or as the line's other keys, which the suite reads
(``Suite.goal``)::

    {"prompt": "gap 3-4 eV", "window": [3.0, 4.0], "candidates": ["CCO", "c1ccncc1", ...]}
    {"task_id": "sum-to-n", "candidates": ["<think>..</think><code>..</code>", ...]}

The first ``--n`` candidates of each line are verified under ``--budget``
CPU-seconds (per prompt) and the top ``--k`` come back with their posterior,
the tier each reached and the spend. A line without candidates is sampled
from the suite's own policy (``capabilities.Rerank``; or ``--policy-path``). The
work is :func:`arl_flows.best_of_n.rerank`; this module only reads,
checks and prints.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.table import Table

from arl_flows.cli._common import (
    LEDGER_URL_HELP,
    UserError,
    app,
    console,
    cut,
    goal_of_items,
    load_suite,
    persistent_ledger,
    print_json,
    read_text_file,
    shown,
    space_options,
)
from arl_flows.suites import Rerank

# Command bodies import what they run (the ledger, the flows, Prefect, the suites' heavy parts) when they
# run, so that `arl --help` loads none of it.

_MAX_ITEMS = 100_000


def _read_items(path: Path) -> list[dict[str, Any]]:
    from arl_flows.best_of_n import RerankItem

    lines = read_text_file("--input", path).splitlines()
    items = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            data = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise UserError(f"--input line {number}: not JSON ({msg}); write one object per line") from None
        if not isinstance(data, dict):
            raise UserError(f"--input line {number}: expected an object like {{\"candidates\": [...]}}")
        try:
            items.append(RerankItem.model_validate(data))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "line"
            raise UserError(f"--input line {number}: {where}: {cut(err['msg'], 200)}") from None
        if len(items) > _MAX_ITEMS:
            raise UserError(f"--input has more than {_MAX_ITEMS:,} prompts; split it")
    if not items:
        raise UserError(f"--input {cut(str(path), 300)} holds no prompts (one JSON object per line)")
    return items


def _tier_list(tiers: str | None, params: list[str], the_suite: Any) -> list[dict[str, Any]] | None:
    """The ladder --tiers names (verifier names, references, or tier names as `arl verify` takes them), with
    --tier-param set; None: the suite's own. An unknown name is one line before anything runs."""
    from storage.records import Tier
    from verifiers import VerifierNotFound, registry

    if not tiers:
        if params:
            raise UserError("--tier-param needs --tiers (the ladder whose params it sets)")
        return None
    ladder = []
    for item in (t.strip() for t in tiers.split(",")):
        if not item:
            continue
        if item in Tier.__members__:  # the suite's rung at that tier, with its params
            rung = next((r for r in the_suite.config.tiers if registry.get(r.verifier).tier == Tier(item)), None)
            if rung is None:
                raise UserError(f"--tiers {cut(item, 60)}: the {shown(the_suite.name)} suite's ladder has no {item} tier; "
                                f"name a verifier (`arl tiers list --suite {shown(the_suite.name)}`)")
            ladder.append({"verifier": rung.verifier, "params": dict(rung.params)})
            continue
        try:
            registry.get(item)
        except VerifierNotFound as exc:
            raise UserError(f"--tiers: {cut(' '.join(str(exc).split()), 300)}; or use a tier name ({', '.join(Tier.__members__)})") from None
        except (ImportError, TypeError, ValueError) as exc:
            raise UserError(f"--tiers: {cut(' '.join(str(exc).split()), 300)}") from None
        ladder.append({"verifier": item, "params": {}})
    by_name = {t["verifier"]: t for t in ladder}
    for item in params:
        name, _, rest = item.partition(".")
        key, eq, raw = rest.partition("=")
        if not (name and key and eq):
            raise UserError(f"--tier-param {cut(item, 100)}: write it as VERIFIER.FIELD=VALUE, e.g. reference-table.cost_per_call=12")
        if name not in by_name:
            raise UserError(f"--tier-param {cut(item, 100)}: {cut(name, 100)} is not in --tiers")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        by_name[name]["params"][key] = value
    return ladder


def _reason(exc: Exception) -> str:
    """One line saying why: a validation error's first message (its headline names only the model), else the text."""
    if isinstance(exc, ValidationError) and exc.errors():
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        return f"{where}: {msg}" if where else msg
    text = str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)
    return " ".join(text.split()) or type(exc).__name__


@app.command("rerank")
def rerank_command(
    suite: str | None = typer.Option(None, "--suite", help="The suite (`arl suites list`; default: a run config's default)."),
    input_file: Path = typer.Option(..., "--input", help="JSON Lines: one prompt per line with its candidates and goal."),
    n: int = typer.Option(8, "--n", min=1, max=100_000, help="Candidates per prompt (the first N given, or N sampled)."),
    budget: float = typer.Option(60.0, "--budget", help="CPU-seconds of verification per prompt."),
    k: int = typer.Option(1, "--k", min=1, max=100_000, help="How many of the best to return per prompt."),
    goal_items: list[str] = typer.Option([], "--goal", help="KEY=VALUE of the goal of lines that do not give it (repeatable)."),
    tiers: str | None = typer.Option(None, "--tiers", help="Comma-separated verifier names, cheapest first (default: the suite's ladder)."),
    tier_param: list[str] = typer.Option([], "--tier-param", help="VERIFIER.FIELD=VALUE for a verifier in --tiers (repeatable)."),
    policy_path: str | None = typer.Option(None, "--policy-path", help="Local model to sample missing candidates (default: the suite's own policy)."),
    space: str | None = typer.Option(None, "--space", help="Chemistry space of the molecules suite (qm9, druglike; default: qm9)."),
    seed: int = typer.Option(0, "--seed", min=0, max=2**32 - 1, help="Seed of sampling and the scheduler."),
    ledger_url: str | None = typer.Option(None, "--url", "--ledger", help=LEDGER_URL_HELP),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    window: tuple[float, float] | None = typer.Option(None, "--window", hidden=True, help="Same as --goal window=[LOW,HIGH]."),
) -> None:
    """Verify N candidates per prompt under a budget with the scheduler; print the top k."""
    if not (math.isfinite(budget) and budget > 0):
        raise UserError(f"--budget {budget}: give a positive, finite number of CPU-seconds")
    default_goal = goal_of_items(goal_items, "--goal")
    if window is not None:
        low, high = window
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise UserError(f"--window {low} {high}: give two finite numbers, low below high, e.g. --window 3.0 4.0")
        default_goal["window"] = [low, high]
    options = space_options(suite, space)
    the_suite = load_suite(suite, options)
    cls = type(the_suite)
    items = _read_items(input_file)
    ladder = _tier_list(tiers, tier_param, the_suite)
    for number, item in enumerate(items, 1):
        try:
            cls.goal(default_goal | item.all_goal())
        except (LookupError, ValueError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            raise UserError(f"--input line {number}: {cut(' '.join(str(message).split()), 300)}") from None

    persistent_ledger(ledger_url)
    from arl_flows.best_of_n import rerank
    from storage.ledger import LedgerError
    from verifiers import VerifierNotFound

    sampler = None
    if any(not it.candidates for it in items):
        try:
            sampler = the_suite.sampler(policy_path) if isinstance(the_suite, Rerank) else None
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot load the policy to sample from: {cut(str(exc), 300)}") from None
        if sampler is None:
            empty = next(i for i, it in enumerate(items, 1) if not it.candidates)
            raise UserError(f"--input prompt {empty}: the {shown(the_suite.name)} suite needs candidates (it has no policy to sample them)")
    try:
        results = rerank(items, suite=the_suite.name, n=n, budget=budget, k=k, tiers=ladder, goal=default_goal,
                         ledger_url=ledger_url, sampler=sampler, seed=seed, options=options)
    except (LedgerError, VerifierNotFound, KeyError, ValueError) as exc:
        raise UserError(cut(_reason(exc), 400)) from None

    if as_json:
        print_json([r.as_dict() for r in results])
        return
    total = 0.0
    for i, r in enumerate(results, 1):
        total += r.spend_s
        table = Table(title=f"prompt {i}: {shown(r.prompt, 80)} (n={r.n}, spend {r.spend_s:.2f} CPU-s)", title_justify="left")
        for col in ("rank", "candidate", "reward", "std", "value", "tier", "spend (s)", "cached"):
            table.add_column(col)
        for t in r.top:
            value = "" if t.value_mean is None else f"{t.value_mean:.3f} ± {t.value_std:.3f}"
            table.add_row(str(t.rank), shown(t.completion, 60), f"{t.reward:.3f}", f"{t.std:.3f}", value,
                          shown(t.tier or t.status), f"{t.spend_s:.2f}", "yes" if t.cached else "")
        console.print(table)
    run = results[0].run_id if results else None
    console.print(f"{len(results)} prompts, {total:.2f} CPU-seconds; ledger run {shown(run or '-')}")
