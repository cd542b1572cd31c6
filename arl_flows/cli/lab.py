"""``arl lab list`` and ``arl lab submit``: external lab requests a run left pending, and their results."""

from __future__ import annotations

import typer
from rich.table import Table

from arl_flows.cli._common import UserError, app, console, open_ledger, print_json, shown

URL_OPTION = typer.Option(None, "--url", help="Ledger URL (default: $ARL_DATABASE_URL or ~/.arl/ledger.db).")

lab_app = typer.Typer(help="External lab results: pending requests and submissions.", no_args_is_help=True)
app.add_typer(lab_app, name="lab")


@lab_app.command("list")
def lab_list(
    run_id: str | None = typer.Option(None, "--run", help="Only requests of this run."),
    all_: bool = typer.Option(False, "--all", help="Include answered requests."),
    url: str | None = URL_OPTION,
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Pending lab requests (a training run never waits for them)."""
    from storage.records import Status

    ledger = open_ledger(url, existing=True)
    if run_id is not None:
        from storage.ledger import LedgerError

        try:  # an unknown run is a mistake to report, not an empty list
            run_id = ledger.get_run(run_id).id
        except LedgerError as exc:
            raise UserError(f"--run: {exc}") from None
    requests = ledger.lab_requests(None if all_ else Status.pending, run_id=run_id)
    if json_out:
        print_json([r.model_dump(mode="json") for r in requests])
        return
    table = Table(title=f"{'all' if all_ else 'pending'} lab requests")
    for col in ("request id", "candidate", "run", "verifier", "status", "value", "created (UTC)"):
        table.add_column(col)
    for r in requests:
        table.add_row(shown(r.id), shown(r.payload or r.candidate_key, 500), shown((r.run_id or "")[:12]), shown(r.verifier),
                      r.status.value, "" if r.value is None else f"{r.value:g}", r.created_at.strftime("%Y-%m-%d %H:%M"))
    console.print(table if requests else f"no {'' if all_ else 'pending '}lab requests" + (f" for run {run_id}" if run_id else ""))


@lab_app.command("submit")
def lab_submit(
    request: str = typer.Option(..., "--request", help="Request id (see `arl lab list`; a unique prefix is enough)."),
    values: list[str] = typer.Option(..., "--value", help="Measured value, e.g. the gap in eV."),
    notes: str = typer.Option("", "--notes", help="Free text stored with the result."),
    url: str | None = URL_OPTION,
) -> None:
    """Record a lab result: its pending verdict becomes ok and later GRPO/hindsight steps use it."""
    from storage.ledger import LedgerError

    if len(values) != 1:  # the last of several would be recorded, for good
        raise UserError(f"--value given {len(values)} times ({', '.join(values)[:80]}); give the one measured value")
    value = values[0]
    try:
        number = float(value)
    except ValueError:
        raise UserError(f"--value must be a number, got {value!r}") from None
    ledger = open_ledger(url, existing=True)
    try:
        verdict = ledger.submit_lab_result(request, number, notes)
    except LedgerError as exc:
        raise UserError(str(exc)) from None
    console.print(f"recorded {shown(verdict.candidate_key, 500)} = {verdict.value:g} (request {shown(verdict.request_id or request)})")
