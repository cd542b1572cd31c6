"""``arl verify``: run named tiers on hand-given candidates and print the verdicts.

This is how a user checks a new tier by hand, and how tests and benchmarks
drive tiers from outside. No ledger is needed; ``--ledger`` stores the
verdicts (and lab requests) when one is wanted.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from arl_flows.cli._common import (
    UserError,
    app,
    console,
    cut,
    goal_of_items,
    load_suite,
    open_ledger,
    print_json,
    read_text_file,
    shown,
    space_options,
)

# Command bodies import what they run (the ledger, the flows, Prefect, the suites' heavy parts) when they
# run, so that `arl --help` loads none of it.

_STATUS_STYLE = {"ok": "green", "invalid": "red", "failed": "yellow", "timeout": "magenta", "pending": "cyan"}


def _read_inputs(answers: list[str], input_file: Path | None) -> list[str]:
    texts = list(answers)
    if input_file is not None:
        lines = read_text_file("--input", input_file).splitlines()
        given = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        if not given:
            raise UserError(f"--input {cut(str(input_file), 300)} has no candidates (only blank lines and '#' comments)")
        texts += given
    return texts


def _resolve_verifiers(the_suite: Any, tiers: str | None) -> list[tuple[Any, dict[str, Any]]]:
    """The verifiers to run, each with the params it runs with.

    No ``tiers``: the suite's ladder, with its params. A tier name: the ladder's rung at that tier, or every
    verifier of the suite registered at it when the ladder has none there. Other names are verifier names
    or 'module:Class' references, run with their own default params.
    """
    from storage.records import Tier
    from verifiers import VerifierNotFound, registry

    suite = the_suite.name
    ladder: list[tuple[Any, dict[str, Any]]] = []
    for rung in the_suite.config.tiers:
        try:
            ladder.append((registry.get(rung.verifier), dict(rung.params)))
        except (VerifierNotFound, ImportError, TypeError, ValueError) as exc:
            raise UserError(f"suite {shown(suite)}: ladder verifier {rung.verifier!r}: {exc}") from None
    if tiers is None:
        return _with_options(the_suite, ladder)
    chosen: list[tuple[Any, dict[str, Any]]] = []
    for item in (t.strip() for t in tiers.split(",")):
        if not item:
            continue
        if item in Tier.__members__:
            found = [(c, p) for c, p in ladder if c.tier == Tier(item)]
            found = found or [(c, {}) for c in registry.for_suite(suite) if c.tier == Tier(item)]
            if not found:
                raise UserError(f"no verifier of suite {suite!r} at tier {item!r}; see `arl tiers list --suite {suite}`")
        else:
            try:
                cls = registry.get(item)
            except VerifierNotFound as exc:
                raise UserError(f"{exc}; or use a tier name ({', '.join(Tier.__members__)})") from None
            except (ImportError, TypeError, ValueError) as exc:
                raise UserError(str(exc)) from None
            if cls.suite not in (suite, None):
                raise UserError(f"verifier {cls.name!r} belongs to suite {cls.suite!r}, not {suite!r}")
            found = [(cls, {})]
        chosen += [(c, p) for c, p in found if c not in [k for k, _ in chosen]]
    if not chosen:
        raise UserError("--tiers is empty; e.g. --tiers fast,simulation, or leave it out for the suite's ladder")
    return _with_options(the_suite, chosen)


def _with_options(the_suite: Any, chosen: list[tuple[Any, dict[str, Any]]]) -> list[tuple[Any, dict[str, Any]]]:
    """Each verifier's params with what the suite's options add (the molecules suite's chemistry space)."""
    return [(cls, the_suite.verifier_params(cls, params)) for cls, params in chosen]


def _make_params(cls: Any, base: dict[str, Any], threads: int | None, timeout_s: float | None) -> dict[str, Any]:
    fields = cls.Params.model_fields
    params = dict(base)
    if threads is not None and "threads" in fields:
        params["threads"] = threads
    if timeout_s is not None and "timeout_s" in fields:
        params["timeout_s"] = timeout_s
    return params


def _suite_of_config(path: Path, suite: str | None, space: str | None) -> Any:
    """The suite of a run config with its [options], having loaded and checked what they point at (``Suite.check``)."""
    from arl_flows.config import ConfigError, load_config

    if space is not None:
        raise UserError("--space with --config: the config's [options] space decides; leave out --space")
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    if suite is not None and suite != cfg.suite:
        raise UserError(f"--suite {shown(suite)}: the config {shown(str(path))} is for the {shown(cfg.suite)} suite; leave out --suite")
    from arl_flows.suites import get_suite

    the_suite = get_suite(cfg.suite)(cfg)  # the config's own ladder and [options], not the suite's defaults
    try:
        the_suite.check()
    except ValueError as exc:
        raise UserError(f"{shown(str(path))}: {' '.join(str(exc).split())[:400]}") from None
    return the_suite


@app.command("verify")
def verify(
    suite: str | None = typer.Option(None, "--suite", help="The suite (`arl suites list`; default: a run config's default)."),
    answers: list[str] = typer.Option([], "--answer", help="A candidate to verify, as the policy would write it (repeatable)."),
    input_file: Path | None = typer.Option(None, "--input", help="File with one candidate per line ('#' comments)."),
    answer_file: Path | None = typer.Option(
        None, "--answer-file",
        help="File whose whole text is one candidate, as the policy writes it (a code answer: <think>...</think><code>...</code>).",
    ),
    config: Path | None = typer.Option(
        None, "--config", help="Take the suite and its \\[options] from a run config (e.g. the code suite's own task file)."
    ),
    goal_items: list[str] = typer.Option(
        [], "--goal", help="KEY=VALUE of the goal the candidates answer (repeatable; `arl suites show NAME` says which keys)."
    ),
    tiers: str | None = typer.Option(
        None,
        "--tiers",
        help="Comma-separated tier names (the ladder's verifier at that tier; all of the suite's verifiers at it "
        "when the ladder has none), verifier names, or 'module:Class' references. A tier name wins over a "
        "verifier of the same name ('lab'). Default: the suite's ladder with its params (`arl suites show NAME`).",
    ),
    threads: int | None = typer.Option(None, "--threads", min=1, max=1024, help="Threads per worker for isolated tiers (default: their params)."),
    timeout_s: float | None = typer.Option(None, "--timeout", min=0.001, max=86_400, help="Per-candidate timeout for isolated tiers (s)."),
    ledger_url: str | None = typer.Option(None, "--ledger", help="Also store the verdicts in this ledger."),
    space: str | None = typer.Option(None, "--space", help="Chemistry space of the molecules suite (qm9, druglike; default: qm9)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    # Older spellings, kept working: the goal keys and answers of the built-in suites.
    legacy_answers: list[str] = typer.Option([], "--smiles", hidden=True, help="Same as --answer."),
    task: str | None = typer.Option(None, "--task", hidden=True, help="Same as --goal task_id=ID."),
    goal_low: float | None = typer.Option(None, "--goal-low", hidden=True, help="Same as --goal low=X."),
    goal_high: float | None = typer.Option(None, "--goal-high", hidden=True, help="Same as --goal high=X."),
) -> None:
    """Run the suite's ladder (or the named tiers) on candidates and print one verdict per candidate and verifier."""
    if timeout_s is not None and not math.isfinite(timeout_s):  # click's range check lets NaN through
        raise UserError(f"--timeout must be a number of seconds, got {timeout_s}")
    if config is not None:
        the_suite = _suite_of_config(config, suite, space)
    else:
        the_suite = load_suite(suite, space_options(suite, space))
    suite = the_suite.name
    given = goal_of_items(goal_items, "--goal")
    if task is not None:
        given["task_id"] = task
    if (goal_low is None) != (goal_high is None):
        raise UserError("give both --goal-low and --goal-high, or neither")
    if goal_low is not None and goal_high is not None:
        given |= {"low": goal_low, "high": goal_high}
    texts = _read_inputs([*answers, *legacy_answers], input_file)
    sources = list(texts)
    if answer_file is not None:
        text = read_text_file("--answer-file", answer_file)
        if not text.strip():
            raise UserError(f"--answer-file {cut(str(answer_file), 300)} is empty; its whole text is one candidate")
        texts.append(text)
        sources.append(str(answer_file))
    if not texts:
        raise UserError("nothing to verify: give --answer TEXT (repeatable), --input FILE or --answer-file FILE")
    try:
        goal = type(the_suite).goal(given)
        candidates = [the_suite.candidate(text, goal) for text in texts]
    except (LookupError, ValueError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        raise UserError(f"cannot verify for suite {shown(suite)}: {' '.join(str(message).split())[:400]}") from None
    texts = sources

    chosen = _resolve_verifiers(the_suite, tiers)
    if tiers is None and not as_json:
        names = ", ".join(shown(cls.name) for cls, _ in chosen)
        console.print(f"tiers: the {shown(suite)} suite's ladder ({names}); --tiers to choose others")
    from verifiers import Closable, LabRequester
    from verifiers.base import check_batch

    all_verdicts: list[tuple[str, Any]] = []
    lab_requests = []
    for cls, base in chosen:
        try:
            verifier = cls(_make_params(cls, base, threads, timeout_s))
        except ValueError as exc:  # pydantic's ValidationError: --threads/--timeout outside what this tier takes
            raise UserError(f"{cls.name}: --threads/--timeout: {' '.join(str(exc).split())[:300]}") from None
        try:
            verdicts = verifier.verify_batch(candidates)
        finally:
            if isinstance(verifier, Closable):
                verifier.close()
        check_batch(verifier, candidates, verdicts)  # names the tier (`verifier` here), as a run's does
        all_verdicts += [(text, v) for text, v in zip(texts, verdicts, strict=True)]
        if isinstance(verifier, LabRequester):
            lab_requests += verifier.lab_requests(candidates, verdicts)

    stored = ""
    if ledger_url is not None:
        ledger = open_ledger(ledger_url)
        # What the ledger holds is what we report: a verdict or lab request it already had wins
        # (e.g. the pending request of an earlier `arl verify` for the same candidate).
        ids = ledger.create_lab_requests(lab_requests)
        new_requests = sum(1 for request, kept_id in zip(lab_requests, ids, strict=True) if kept_id == request.id)
        kept = ledger.put_verdicts([v for _, v in all_verdicts])
        all_verdicts = [(text, v) for (text, _), v in zip(all_verdicts, kept, strict=True)]
        stored = f"stored {len(kept)} verdict(s) and {new_requests} new lab request(s) in the ledger"
    elif lab_requests and not as_json:
        stored = f"{len(lab_requests)} lab request(s) not recorded: pass --ledger URL to store them"

    rows = [{"input": text, **v.model_dump(mode="json", exclude={"id", "created_at"})} for text, v in all_verdicts]
    if as_json:
        print_json(rows)
        return
    table = Table(
        title=f"verdicts ({shown(suite)}); cost in CPU-seconds",
        caption="ok: the verifier ran and gave the value (0 can be a real 0: a killed program, a failed test); "
        "invalid: the candidate is wrong; failed / timeout: the verifier could not decide",
    )
    for column in ("input", "verifier", "tier", "value", "cost"):
        table.add_column(column, no_wrap=True, overflow="ellipsis", max_width=20 if column == "input" else None)
    table.add_column("status: feedback", overflow="fold")
    # Group by candidate: one block of tiers per input, cheapest tier first.
    rows.sort(key=lambda r: texts.index(r["input"]))
    for row in rows:
        style = _STATUS_STYLE.get(row["status"], "")
        status = f"[{style}]{row['status']}[/]" if style else shown(row["status"])
        table.add_row(
            shown(row["input"], 1000) or "(empty)",
            shown(row["verifier"]),
            shown(row["tier"]),
            "" if row["value"] is None else f"{row['value']:.2f}",
            f"{row['cost_s']:.3g}",
            f"{status}: {shown(row['feedback'], 2000)}" if row["feedback"] else status,
            end_section=False,
        )
    console.print(table)
    if stored:
        console.print(stored)
