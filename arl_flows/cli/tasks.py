"""``arl tasks``: list the bundled tasks of a suite."""

from __future__ import annotations

import typer

from arl_flows.cli import app
from arl_flows.cli._common import UserError, console, print_json, shown

tasks_app = typer.Typer(help="Bundled tasks of a suite.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")

_SUITES_WITH_TASKS = ("code",)


@tasks_app.command("list")
def list_tasks(
    suite: str = typer.Option(..., "--suite", help="Suite whose tasks to list (code)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (id and prompt of each task)."),
) -> None:
    """List task ids and prompts."""
    if suite not in _SUITES_WITH_TASKS:
        raise UserError(f"suite {suite[:100]!r} has no bundled task list; suites with tasks: {', '.join(_SUITES_WITH_TASKS)}")
    from verifiers.code.tasks import load_tasks

    tasks = load_tasks()
    if as_json:
        print_json([{"id": t.id, "prompt": t.prompt} for t in tasks])
        return
    from rich.table import Table

    table = Table(title=f"{len(tasks)} {shown(suite)} tasks")
    table.add_column("id", no_wrap=True)
    table.add_column("prompt")
    for t in tasks:
        table.add_row(shown(t.id), shown(t.prompt))
    console.print(table)
