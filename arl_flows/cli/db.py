"""``arl db``: migrations and integrity checks of the ledger."""

from __future__ import annotations

import typer

from arl_flows.cli._common import LEDGER_URL_HELP, UserError, app, console, open_ledger, print_json, require_existing_ledger, shown

# Command bodies import what they run (the ledger, the flows, Prefect, the suites' heavy parts) when they
# run, so that `arl --help` loads none of it.

db_app = typer.Typer(help="Ledger database: migrations and integrity checks.", no_args_is_help=True)
app.add_typer(db_app, name="db")

URL_OPTION = typer.Option(None, "--url", help=LEDGER_URL_HELP)


@db_app.command("upgrade")
def upgrade(url: str | None = URL_OPTION, revision: str = typer.Option("head", help="Target revision.")) -> None:
    """Apply Alembic migrations to the ledger."""
    ledger = open_ledger(url) if revision == "head" else _open_unmigrated(url)
    ledger.upgrade(revision)
    console.print(f"ledger at {shown(ledger.safe_url)} is at revision {ledger.current_revision()}")


@db_app.command("downgrade")
def downgrade(revision: str = typer.Argument("-1", help="Target revision, e.g. -1 or base."), url: str | None = URL_OPTION) -> None:
    """Revert migrations (for development; data in dropped tables is lost)."""
    ledger = _open_unmigrated(url, existing=True)
    ledger.downgrade(revision)
    console.print(f"ledger at {shown(ledger.safe_url)} is at revision {ledger.current_revision()}")


@db_app.command("check")
def check(url: str | None = URL_OPTION, json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Run the integrity checks and report problems in plain words (exit 1 if any)."""
    ledger = open_ledger(url, existing=True)
    problems = ledger.integrity_problems()
    if json_out:
        print_json({"ok": not problems, "problems": problems})
    elif problems:
        console.print(f"[bold red]{len(problems)} problem(s)[/] in {shown(ledger.safe_url)}:", soft_wrap=True)
        for p in problems:
            console.print(f"  - {shown(p)}", highlight=False, soft_wrap=True)
    else:
        console.print(f"[green]ledger is consistent[/] ({shown(ledger.safe_url)})", soft_wrap=True)
    raise typer.Exit(1 if problems else 0)


def _open_unmigrated(url: str | None, existing: bool = False):  # noqa: ANN202
    from storage.ledger import Ledger, LedgerError, default_database_url

    try:
        if existing:
            require_existing_ledger(url or default_database_url())
        return Ledger(url, migrate=False)
    except LedgerError as exc:
        raise UserError(str(exc)) from None
