"""``arl lab list`` and ``arl lab submit``: external lab requests a run left pending, and their results."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from arl_flows.cli._common import (
    LEDGER_URL_HELP,
    UserError,
    app,
    console,
    missing_ledger_file,
    open_ledger,
    print_json,
    read_text_file,
    shown,
)

URL_OPTION = typer.Option(None, "--url", help=LEDGER_URL_HELP)

lab_app = typer.Typer(help="External lab results: pending requests and submissions.", no_args_is_help=True)
app.add_typer(lab_app, name="lab")


@lab_app.command("list")
def lab_list(
    run_id: str | None = typer.Option(None, "--run", help="Only requests of this run."),
    all_: bool = typer.Option(False, "--all", help="Include answered requests."),
    url: str | None = URL_OPTION,
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    csv_out: Path | None = typer.Option(
        None, "--csv", help="Write the requests to this CSV for the lab: request, an empty value and notes to fill "
        "in, and what was asked (candidate, verifier, run, created); give it back with `arl lab submit --file`.",
    ),
) -> None:
    """Pending lab requests (a training run never waits for them)."""
    from storage.records import Status

    missing = missing_ledger_file(url)
    if missing is not None and csv_out is None:  # a list creates nothing: a mistyped path is not a new, empty ledger
        if json_out:
            print_json([])
        else:
            console.print(f"no lab requests: no ledger at {shown(str(missing))} yet (a run's lab tier writes them "
                          "there), or check the path if you expected one")
        return
    ledger = open_ledger(url, existing=True)
    if run_id is not None:
        from storage.ledger import LedgerError

        try:  # an unknown run is a mistake to report, not an empty list
            run_id = ledger.get_run(run_id).id
        except LedgerError as exc:
            raise UserError(f"--run: {exc}") from None
    requests = ledger.lab_requests(None if all_ else Status.pending, run_id=run_id)
    in_flight = sum(r.in_flight for r in requests)  # a run's own calls (crash safety), answered by its tiers
    requests = [r for r in requests if not r.in_flight]
    if csv_out is not None:
        _write_csv(csv_out, requests, ledger)
        return
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
    if in_flight:
        console.print(f"({in_flight} call(s) a run sent to its own tiers, recorded in case it crashes, are not shown: "
                      "their tiers answer them)")


@lab_app.command("submit")
def lab_submit(
    request: str | None = typer.Option(None, "--request", help="Request id (see `arl lab list`; a unique prefix is enough)."),
    values: list[str] | None = typer.Option(None, "--value", help="Measured value, e.g. the gap in eV."),
    notes: str = typer.Option("", "--notes", help="Free text stored with the result."),
    file: Path | None = typer.Option(
        None, "--file", help="A CSV of results instead: columns request, value and optionally notes (a header row "
        "names them). Every row is checked before any is recorded.",
    ),
    url: str | None = URL_OPTION,
) -> None:
    """Record lab results: each pending verdict becomes ok and later GRPO/hindsight steps use it."""
    from storage.ledger import LedgerError

    if file is not None:
        if request is not None or values or notes:
            raise UserError("--file holds the requests, values and notes; leave out --request, --value and --notes")
        _submit_file(file, url)
        return
    if request is None or not values:
        raise UserError("give --request ID and --value NUMBER (or --file results.csv)")
    if len(values) != 1:  # the last of several would be recorded, for good
        raise UserError(f"--value given {len(values)} times ({', '.join(values)[:80]}); give the one measured value")
    number = _number(values[0], "--value")
    ledger = open_ledger(url, existing=True)
    try:
        verdict = ledger.submit_lab_result(request, number, notes)
    except LedgerError as exc:
        raise UserError(str(exc)) from None
    console.print(f"recorded {shown(verdict.candidate_key, 500)} = {verdict.value:g} (request {shown(verdict.request_id or request)})")


# A decimal number as a lab writes one: Python's float() also reads '1_0' (10), 'infinity', ' 1e3 ' and
# full-width digits, which a typo or another program's output can produce.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _number(text: str, where: str) -> float:
    text = text.strip()
    if not _DECIMAL.fullmatch(text):
        raise UserError(f"{where} must be a number, got {text!r:.60} (write a decimal like 3.25 or -1.2e-3)")
    number = float(text)
    if not math.isfinite(number):
        raise UserError(f"{where} must be a finite number, got {text!r:.60}")
    return number


_COLUMNS = ("request", "value", "notes")
_ASKED = ("candidate", "verifier", "run", "created")  # written by `arl lab list --csv`, read back and ignored
# A cell a spreadsheet would run as a formula (OWASP, "CSV Injection"): the sheet writes it behind a quote, which a
# spreadsheet shows as text and `submit --file` takes off again.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _as_text(cell: str) -> str:
    return "'" + cell if cell.startswith(_FORMULA_START) else cell


def _from_text(cell: str) -> str:
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(_FORMULA_START) else cell


def _write_csv(path: Path, requests: list, ledger: Any) -> None:
    """The requests as a results sheet: the lab fills in value (and notes) and returns it to ``submit --file``.

    Answered requests (``--all``) carry their value in full precision, so that the sheet goes back unchanged:
    ``submit --file`` skips a row whose request already holds the same value.
    """
    import csv
    import io

    target = path.expanduser()
    filled = _filled_rows(target, ledger)
    if filled:
        raise UserError(f"--csv {shown(str(path), 200)} holds {filled} value(s) filled in for pending requests; record "
                        f"them first (`arl lab submit --file {shown(str(path), 200)}`) or give another file")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")  # RFC 4180: a cell holding \r or \n is quoted
    writer.writerow([*_COLUMNS, *_ASKED])
    for r in requests:
        value = "" if r.value is None else repr(r.value)
        writer.writerow([r.id, value, *(_as_text(cell) for cell in (
            r.notes or "", r.payload or r.candidate_key, r.verifier, r.run_id or "", r.created_at.strftime("%Y-%m-%d %H:%M")))])
    try:  # with a BOM, so that a spreadsheet reads it as UTF-8 (`submit --file` takes it off)
        target.write_text(buffer.getvalue(), encoding="utf-8-sig")
    except OSError as exc:
        raise UserError(f"--csv {shown(str(path), 200)}: cannot write it ({exc.strerror or exc}); give a writable file path") from None
    console.print(f"wrote {len(requests)} lab request(s) to {shown(str(path))}: fill in value, then "
                  f"`arl lab submit --file {shown(str(path))}`")


def _delimiter(text: str) -> str:
    """',' or, where the first line has no comma, ';' or a tab (a spreadsheet's export in a comma-decimal locale)."""
    head = text.lstrip("\ufeff").split("\n", 1)[0]
    return "," if "," in head else ";" if ";" in head else "\t" if "\t" in head else ","


def _read_rows(text: str, delimiter: str | None = None) -> list[tuple[int, list[str]]]:
    """The non-blank rows of a CSV as (the line a row starts on, its cells): a quoted cell may span lines.

    Comma-separated, or semicolon- or tab-separated where the first line has no comma (a spreadsheet's export in a
    locale whose decimal mark is a comma).
    """
    import csv
    import io

    reader = csv.reader(io.StringIO(text), delimiter=delimiter or _delimiter(text))
    rows: list[tuple[int, list[str]]] = []
    try:
        line = 1
        for row in reader:
            rows.append((line, row))
            line = reader.line_num + 1
    except csv.Error as exc:
        raise UserError(f"--file line {reader.line_num}: not CSV ({exc}); check its quotes") from None
    return [(n, row) for n, row in rows if any(cell.strip() for cell in row)]


def _filled_rows(path: Path, ledger: Any) -> int:
    """How many rows of an existing sheet hold a value for a request still pending in ``ledger`` (0: none)."""
    from storage.records import Status

    try:
        if not path.is_file() or path.stat().st_size > 50_000_000:
            return 0
        rows = _read_rows(path.read_text(encoding="utf-8-sig", errors="replace"))
    except (OSError, UserError):
        return 0
    header = [cell.strip().lower() for cell in rows[0][1]] if rows else []
    if "value" not in header or "request" not in header:
        return 0  # not a sheet: overwritten as any output file is
    at, req = header.index("value"), header.index("request")
    filled = [row[req].strip() for _, row in rows[1:] if len(row) > max(at, req) and row[at].strip() and row[req].strip()]
    return sum(1 for given in filled
               if any(found.status == Status.pending for found in ledger.lab_requests_named(given)))


def _candidates(ledger: Any) -> dict[str, str]:
    """Every lab request's candidate as `arl lab list --csv` writes it, and the request's id."""
    return {r.payload or r.candidate_key: r.id for r in ledger.lab_requests(None)}


def _submit_file(file: Path, url: str | None) -> None:
    """Check every row of a results CSV against the ledger's pending requests, then record them all."""
    from storage.ledger import LedgerError
    from storage.records import LabRequest, Status

    text = read_text_file("--file", file)
    delimiter = _delimiter(text)
    rows = _read_rows(text, delimiter)
    decimal_comma = delimiter != ","  # '3,25' in a ';' sheet is 3.25; in a ',' sheet it would be ambiguous
    if not rows:
        raise UserError(f"--file {shown(str(file))} is empty; give a header row (request,value,notes) and one row a result")
    first = rows[0][1]
    while first and not first[-1].strip():  # a spreadsheet's empty trailing columns
        first = first[:-1]
    header = [cell.strip().lower() for cell in first]
    unknown = [h for h in header if h not in _COLUMNS + _ASKED]
    if unknown or "request" not in header or "value" not in header or len(set(header)) != len(header):
        raise UserError(f"--file line {rows[0][0]}: the header is {','.join(rows[0][1])[:80]!r}; name the columns "
                        "request, value and optionally notes, once each (and those `arl lab list --csv` writes)")
    ledger = open_ledger(url, existing=True)
    planned: list[tuple[str, float, str]] = []
    seen: dict[str, int] = {}
    blank = 0  # rows of a sheet from `arl lab list --csv` that the lab left without a value: still pending
    again = 0  # rows whose request already holds this value (a sheet of `arl lab list --all --csv`)
    optional = len(header) - max(header.index("request"), header.index("value")) - 1  # cells after both may be left out
    others: dict[str, str] | None = None  # each lab request's candidate as the sheet writes it -> its id, read if needed
    for line, row in rows[1:]:
        while len(row) > len(header) and not row[-1].strip():  # empty trailing cells
            row = row[:-1]
        if len(row) > len(header) or len(row) < len(header) - optional:
            raise UserError(f"--file line {line}: {len(row)} cells for {len(header)} columns ({','.join(header)})")
        cells = dict(zip(header, [cell.strip() for cell in row] + [""] * (len(header) - len(row))))
        if not cells["value"]:
            blank += 1
            continue
        given = cells["request"]
        matches = ledger.lab_requests_named(given)
        if len(matches) != 1:
            what = "no lab request" if not matches else "more than one lab request"
            raise UserError(f"--file line {line}: {what} starts with {given!r:.60} (see `arl lab list`); nothing was recorded")
        found = matches[0]
        if found.in_flight:
            raise UserError(f"--file line {line}: request {found.id[:12]} is a call a run sent to its own {found.verifier} "
                            "tier, not a lab's; nothing was recorded")
        # The cells `arl lab list --csv` wrote beside the request say what was asked: a row whose candidate is another
        # request's was moved out of line (a column sorted on its own), and its value belongs to another molecule. (A
        # spreadsheet may rewrite a cell it takes for a formula, so only another request's candidate is refused.)
        cell = _from_text(cells.get("candidate", ""))
        asked = found.payload or found.candidate_key
        if cell and cell != asked and cell in (others := others if others is not None else _candidates(ledger)):
            raise UserError(f"--file line {line}: request {found.id[:12]} asked about candidate {asked!r:.80}, the row "
                            f"says {cell!r:.80} (request {others[cell][:12]}'s); were rows sorted apart? nothing was recorded")
        cell = _from_text(cells.get("verifier", ""))
        if cell and cell != found.verifier:
            raise UserError(f"--file line {line}: request {found.id[:12]} asked verifier {found.verifier!r:.80}, the row "
                            f"says {cell!r:.80}; nothing was recorded")
        given_value = cells["value"]
        if decimal_comma and "," in given_value and "." not in given_value:
            given_value = given_value.replace(",", ".")
        number = _number(given_value, f"--file line {line}: value")
        if (found.status != Status.pending and found.value is not None
                and math.isclose(found.value, number, rel_tol=1e-12, abs_tol=1e-300)):  # an --all sheet sent back as it was
            # (a spreadsheet keeps 15 significant digits of the 17 written)
            again += 1
            continue
        if found.status != Status.pending:
            raise UserError(f"--file line {line}: request {found.id} already has a result ({found.value!r}); nothing was "
                            "recorded (the ledger keeps the first answer)")
        if found.id in seen:
            raise UserError(f"--file line {line}: request {found.id} is on line {seen[found.id]} too; nothing was recorded")
        pending = ledger.lookup_verdicts([found.candidate_key], found.verifier, found.version, found.params_hash)
        problem = LabRequest.value_problem(pending[found.candidate_key].values if pending else None, number)
        if problem:
            raise UserError(f"--file line {line}: value {problem}; nothing was recorded")
        seen[found.id] = line
        planned.append((found.id, number, _from_text(cells.get("notes", ""))))
    if not planned and again:
        console.print(f"nothing new in {shown(str(file))}: its {again} result(s) are recorded already"
                      + (f"; {blank} row(s) without a value left pending" if blank else ""))
        return
    if not planned:
        raise UserError(f"--file {shown(str(file))} has a header and no results"
                        + (f" ({blank} row(s) without a value)" if blank else ""))
    for done, (request_id, value, notes) in enumerate(planned):
        try:
            ledger.submit_lab_result(request_id, value, notes)
        except LedgerError as exc:  # answered by someone else since the check
            raise UserError(f"request {request_id}: {exc}; {done} of {len(planned)} results were recorded before it") from None
    console.print(f"recorded {len(planned)} lab result(s) from {shown(str(file))}"
                  + (f"; {again} recorded already" if again else "")
                  + (f"; {blank} row(s) without a value left pending" if blank else ""))
