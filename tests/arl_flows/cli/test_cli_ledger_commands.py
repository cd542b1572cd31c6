"""`arl runs`, `arl lab` and `arl report` on a ledger a person manages: prefixes, mistyped paths, corrections."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest
from storage.ledger import Ledger
from storage.records import LabRequest
from tests.helpers.cli_runner import arl, assert_user_error


def _url(path: Path) -> str:
    return f"sqlite:///{path}"


def test_an_ambiguous_run_prefix_says_so_and_a_mistyped_ledger_is_never_created(tmp_path: Path) -> None:
    url = _url(tmp_path / "ledger.db")
    with Ledger(url) as ledger:
        by_first: dict[str, list[str]] = defaultdict(list)
        for i in range(17):  # 17 random hex ids: two share their first character
            by_first[ledger.create_run(f"r{i}", {"steps": 2}).id[0]].append("")
    shared = next(c for c, ids in by_first.items() if len(ids) > 1)
    code, out, err = arl(["runs", "show", shared, "--url", url])
    assert_user_error(code, err, out=out)
    assert f"run id '{shared}' is the start of more than one run (" in err and "give more of it" in err
    code, out, err = arl(["report", shared, "--url", url, "--out", str(tmp_path / "r")])
    assert_user_error(code, err, out=out)
    assert "is the start of more than one run" in err
    # A read command on a path with no ledger creates none: a list says so, a lookup is one line.
    typo = tmp_path / "ledgr.db"
    code, out, err = arl(["runs", "list", "--url", _url(typo)])
    assert code == 0 and "no runs yet: no ledger at" in " ".join(out.split()) and not typo.exists(), out + err
    code, out, err = arl(["runs", "list", "--url", _url(typo), "--json"])
    assert code == 0 and out.strip() == "[]" and not typo.exists()
    code, out, err = arl(["lab", "list", "--url", _url(typo)])  # as `runs list` does, not an error
    assert code == 0 and "no lab requests: no ledger at" in " ".join(out.split()) and not typo.exists(), out + err
    code, out, err = arl(["lab", "list", "--url", _url(typo), "--json"])
    assert code == 0 and out.strip() == "[]" and not typo.exists()
    for command in (["runs", "show", "abc"], ["runs", "eval", "abc"], ["report", "abc", "--out", str(tmp_path / "r")]):
        code, out, err = arl([*command, "--url", _url(typo)])
        assert_user_error(code, err, out=out)
        assert "no ledger at" in err and not typo.exists(), command
    code, out, err = arl(["runs", "list", "--url", url, "--json"])
    assert code == 0 and all(r["steps_total"] == 2 for r in __import__("json").loads(out))


def test_a_ledger_of_a_newer_arl_says_to_upgrade_arl(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    Ledger(_url(path)).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE alembic_version SET version_num = '0099'")
    code, out, err = arl(["runs", "list", "--url", _url(path)])
    assert_user_error(code, err, out=out)
    assert "was written by a newer ARL (its revision '0099'; this ARL knows revisions up to" in err and "upgrade ARL" in err


def _pending_lab_requests(url: str, prefix: str, payloads: dict[str, str]) -> tuple[str, list[str]]:
    """A run and one pending `lab` request per payload (id: ``prefix`` and the key, padded to 32 characters;
    candidate ``molecules:<key>``): the run's id and the requests' ids."""
    with Ledger(url) as ledger:
        run = ledger.create_run("lab-run", {"steps": 1})
        return run.id, ledger.create_lab_requests([
            LabRequest(id=(prefix + key).ljust(32, "0"), run_id=run.id, candidate_key=f"molecules:{key}", payload=payload,
                       verifier="lab", version="1", params_hash="h")
            for key, payload in payloads.items()
        ])


def test_lab_requests_take_a_prefix_one_value_and_show_their_run_and_verifier(tmp_path: Path) -> None:
    url = _url(tmp_path / "ledger.db")
    run_id, ids = _pending_lab_requests(url, "aa11", {"b": "CCO", "c": "CCN"})
    code, out, err = arl(["lab", "list", "--url", url, "--json"])
    assert code == 0 and {r["run_id"] for r in __import__("json").loads(out)} == {run_id}
    code, out, err = arl(["lab", "list", "--url", url])
    assert code == 0 and "verifier" in out and "UTC" in out, out
    code, out, err = arl(["lab", "submit", "--request", "aa11", "--value", "3.4", "--url", url])
    assert_user_error(code, err, out=out)
    assert "lab request id 'aa11' is the start of more than one request" in err
    code, out, err = arl(["lab", "submit", "--request", "aa11b", "--value", "3.4", "--value", "4.3", "--url", url])
    assert_user_error(code, err, out=out)
    assert "--value given 2 times (3.4, 4.3); give the one measured value" in err
    code, out, err = arl(["lab", "submit", "--request", "aa11b", "--value", "3.4", "--url", url])  # a unique prefix
    assert code == 0 and f"(request {ids[0]})" in out, out + err
    code, out, err = arl(["lab", "submit", "--request", ids[0], "--value", "3.5", "--url", url])
    assert_user_error(code, err, out=out)
    assert "already has a result (3.4); results are not overwritten (the ledger keeps the first answer" in err


def test_a_report_into_a_file_is_one_line_about_out(tmp_path: Path) -> None:
    url = _url(tmp_path / "ledger.db")
    with Ledger(url) as ledger:
        run = ledger.create_run("r", {"steps": 1})
    taken = tmp_path / "a-file"
    taken.write_text("mine")
    code, out, err = arl(["report", run.id, "--url", url, "--out", str(taken)])
    assert_user_error(code, err, out=out)
    assert f"--out {taken}: cannot write the report there" in err and taken.read_text() == "mine"


def test_lab_requests_go_out_as_a_csv_and_come_back_filled_in(tmp_path: Path) -> None:
    """`arl lab list --csv` writes the sheet `arl lab submit --file` reads; rows left blank stay pending."""
    url = _url(tmp_path / "ledger.db")
    _, ids = _pending_lab_requests(url, "cc", {c: f"C{c}O" for c in "xyz"})
    sheet = tmp_path / "for-the-lab.csv"
    code, out, err = arl(["lab", "list", "--csv", str(sheet), "--url", url])
    assert code == 0 and "wrote 3 lab request(s)" in " ".join(out.split()), out + err
    lines = sheet.read_text(encoding="utf-8-sig").splitlines()
    assert lines[0] == "request,value,notes,candidate,verifier,run,created"
    assert [line.split(",")[:5] for line in lines[1:]] == [[i, "", "", f"C{c}O", "lab"] for i, c in zip(ids, "xyz")]
    # The lab fills in two of the three; the third stays pending.
    filled = [lines[0], lines[1].replace(",,", ",3.4,UV-vis", 1), lines[2].replace(",,", ",4.1,", 1), lines[3]]
    sheet.write_text("\n".join(filled) + "\n", encoding="utf-8")
    code, out, err = arl(["lab", "submit", "--file", str(sheet), "--url", url])
    flat = " ".join(out.split())
    assert code == 0 and "recorded 2 lab result(s)" in flat and "1 row(s) without a value left pending" in flat, out + err
    with Ledger(url) as ledger:
        assert {r.id: (r.status.value, r.value, r.notes) for r in ledger.lab_requests(None)} == {
            ids[0]: ("ok", 3.4, "UV-vis"), ids[1]: ("ok", 4.1, ""), ids[2]: ("pending", None, "")}
    code, out, err = arl(["lab", "list", "--csv", str(tmp_path / "no-such-dir" / "x.csv"), "--url", url])
    assert_user_error(code, err, out=out)
    assert "cannot write it" in " ".join(err.split())


def test_a_lab_sheet_survives_a_spreadsheet_and_goes_back_whole(tmp_path: Path) -> None:
    """Formulas stay text, a carriage return stays in its cell, `--all` sheets go back, a filled sheet is kept."""
    url = _url(tmp_path / "ledger.db")
    payloads = ['=HYPERLINK("http://x","y")', "C\rO", "@SUM(1)", "CCO"]
    _, ids = _pending_lab_requests(url, "ee", {str(i): p for i, p in enumerate(payloads)})
    with Ledger(url) as ledger:
        ledger.submit_lab_result(ids[3], 4.902552131931743, "-first")
    sheet = tmp_path / "all.csv"
    code, out, err = arl(["lab", "list", "--all", "--csv", str(sheet), "--url", url])
    assert code == 0, out + err
    raw = sheet.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"'=HYPERLINK" in raw and b"'@SUM(1)" in raw and b"'-first" in raw
    assert b'"C\rO"' in raw and b",4.902552131931743," in raw  # quoted; the value in full precision
    # The lab fills in one pending row (semicolons, as a spreadsheet in a comma-decimal locale saves it).
    rows = [line.split(",") for line in raw.decode("utf-8-sig").split("\r\n") if line]
    rows[1][1] = "3,25"  # a comma-decimal locale's spreadsheet
    rows[4][1] = "4.90255213193174"  # 15 significant digits of the 17 written: the same value
    sheet.write_text("\r\n".join(";".join(r) for r in rows) + "\r\n", encoding="utf-8-sig")
    code, out, err = arl(["lab", "list", "--csv", str(sheet), "--url", url])  # would throw the lab's value away
    assert_user_error(code, err, out=out)
    assert "holds 1 value(s) filled in for pending requests; record them first" in " ".join(err.split())
    code, out, err = arl(["lab", "submit", "--file", str(sheet), "--url", url])
    flat = " ".join(out.split())
    assert code == 0 and "recorded 1 lab result(s)" in flat and "1 recorded already" in flat, out + err
    assert "2 row(s) without a value left pending" in flat
    with Ledger(url) as ledger:
        answered = {r.id: (r.value, r.notes) for r in ledger.lab_requests(None) if r.status.value == "ok"}
    assert answered == {ids[0]: (3.25, ""), ids[3]: (4.902552131931743, "-first")}
    code, out, err = arl(["lab", "list", "--all", "--csv", str(sheet), "--url", url])  # all recorded: written anew
    assert code == 0 and "wrote 4 lab request(s)" in " ".join(out.split()), out + err


def test_lab_results_from_a_csv_are_all_checked_before_any_is_recorded(tmp_path: Path) -> None:
    url = _url(tmp_path / "ledger.db")
    _, ids = _pending_lab_requests(url, "bb", {c: c for c in "xyz"})
    bad = [
        ("\ufeffrequest,value,notes\nbbx,3.4,first\nbby,abc,\n", "--file line 3: value must be a number, got 'abc'"),
        ("request,value\nbbx,3.4\nbbx,3.5\n", "--file line 3: request bbx" + "0" * 29 + " is on line 2 too"),
        ("req,value\nbbx,3.4\n", "--file line 1: the header is 'req,value'; name the columns request, value"),
        ("request,value\nbb,3.4\n", "--file line 2: more than one lab request starts with 'bb'"),
        ("request,value\nbbq,3.4\n", "--file line 2: no lab request starts with 'bbq'"),
        ("request,value\nbbx,3.4,extra\n", "--file line 2: 3 cells for 2 columns"),
        ("request,value\nbbx,inf\n", "--file line 2: value must be a number, got 'inf'"),
        ("request,value\nbbx,1e999\n", "--file line 2: value must be a finite number"),
        ("request,value\n", "has a header and no results"),
        ("request,value\nbbx,\n", "has a header and no results (1 row(s) without a value)"),
        ('request,value\n"bbx,3.4\n' + "x" * 140_000, "--file line 3: not CSV (field larger than field limit"),
        ('request,value,notes\n"bb\nx",3.4,n\nbbq,1\n', "--file line 2: no lab request starts with 'bb\\nx'"),
    ]
    code, out, err = arl(["lab", "submit", "--file", "no-such-results.csv", "--url", url])
    assert_user_error(code, err, out=out)
    assert "--file no-such-results.csv does not exist (relative paths are read from the current directory" in " ".join(err.split())
    for i, (text, message) in enumerate(bad):
        path = tmp_path / f"bad{i}.csv"
        path.write_text(text, encoding="utf-8")
        code, out, err = arl(["lab", "submit", "--file", str(path), "--url", url])
        assert_user_error(code, err, out=out)
        assert message in err, (text, err)
    with Ledger(url) as ledger:
        assert all(r.status.value == "pending" for r in ledger.lab_requests(None))  # nothing recorded by a bad file
    good = tmp_path / "results.csv"
    # Excel's BOM, CRLF and empty trailing columns; a row that leaves out its empty notes cell.
    good.write_text('\ufeffrequest,value,notes,,\nbbx,3.4,UV-vis,,\r\nbby,4.1,"a, b"\nbbz,2.5\n\n', encoding="utf-8")
    code, out, err = arl(["lab", "submit", "--file", str(good), "--url", url])
    assert code == 0 and "recorded 3 lab result(s)" in out, out + err
    with Ledger(url) as ledger:
        answered = {r.id: (r.value, r.notes) for r in ledger.lab_requests(None) if r.status.value == "ok"}
    assert answered == {ids[0]: (3.4, "UV-vis"), ids[1]: (4.1, "a, b"), ids[2]: (2.5, "")}
    code, out, err = arl(["lab", "submit", "--file", str(good), "--url", url])  # sent again: nothing new, nothing lost
    assert code == 0 and "its 3 result(s) are recorded already" in " ".join(out.split()), out + err
    changed = tmp_path / "changed.csv"
    changed.write_text("request,value\nbbx,3.5\nbby,4.1\n", encoding="utf-8")
    code, out, err = arl(["lab", "submit", "--file", str(changed), "--url", url])
    assert_user_error(code, err, out=out)
    assert "--file line 2: request bbx" in err and "already has a result (3.4); nothing was recorded" in err
    for args in (["--file", str(good), "--value", "3"], []):
        code, out, err = arl(["lab", "submit", *args, "--url", url])
        assert_user_error(code, err, out=out)


def test_deploy_without_cron_serves_on_demand_and_names_its_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`arl deploy` required --cron, so the lab_results form could not be served without a schedule."""
    import prefect

    served: list[object] = []
    monkeypatch.setattr(prefect, "serve", lambda *deployments: served.extend(deployments))
    monkeypatch.setenv("ARL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    code, out, err = arl(["deploy", "--profile", "quick", "--url", _url(tmp_path / "ledger.db")])
    assert code == 0, out + err
    flat = " ".join(out.split())
    assert "'training_run/arl-training' (on demand: the UI's Run button)" in flat
    # The server it serves on: a temporary one, or (in a test worker where an earlier test set one up) that one.
    assert "on a temporary Prefect server that stops with this command" in flat or "on the Prefect server at http" in flat
    by_name = {d.name: d for d in served}
    assert set(by_name) == {"arl-training", "lab-results"} and not by_name["arl-training"].schedules
    code, out, err = arl(["deploy", "--cron", "0 3 * *", "--url", _url(tmp_path / "ledger.db")])
    assert_user_error(code, err, out=out)
    assert "is not a valid cron expression; give five fields" in " ".join(err.split())
    assert "pydantic" not in err and "validation error" not in err


@pytest.mark.parametrize("memory", ["sqlite://", "sqlite:///:memory:"])
def test_a_ledger_in_memory_is_refused_before_anything_is_paid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                memory: str) -> None:
    """`arl run` trained a whole step into an in-memory SQLite ledger and lost it at exit; verify/rerank said 'stored'."""
    items = tmp_path / "in.jsonl"
    items.write_text('{"candidates": ["CCO", "CCN"]}\n')
    for command in (["verify", "--answer", "CCO", "--tiers", "fast", "--ledger", memory],
                    ["rerank", "--input", str(items), "--ledger", memory],
                    ["run", "--dry-run", "--url", memory], ["run", "--profile", "quick", "--url", memory]):
        code, out, err = arl(command)
        assert_user_error(code, err, out=out)
        assert f"{memory} names no database file" in err and "give sqlite:///PATH" in " ".join(err.split()), command
    monkeypatch.setenv("ARL_DATABASE_URL", memory)
    code, out, err = arl(["run", "--dry-run"])
    assert_user_error(code, err, out=out)


def test_a_runs_own_calls_in_flight_are_not_lab_work(tmp_path: Path) -> None:
    """The async service records each expensive call as a pending request (crash safety); `lab list` showed them."""
    url = _url(tmp_path / "ledger.db")
    with Ledger(url) as ledger:
        run = ledger.create_run("lab-run", {"steps": 1})
        lab, flight = ledger.create_lab_requests([
            LabRequest(id="ff1" + "0" * 29, run_id=run.id, candidate_key="molecules:CCO", payload="CCO", verifier="lab",
                       version="1", params_hash="h"),
            LabRequest(id="ff2" + "0" * 29, run_id=run.id, candidate_key="molecules:CCN", payload="CCN",
                       verifier="pyscf-b3lyp", version="1", params_hash="h", notes=LabRequest.in_flight_note("pyscf-b3lyp")),
        ])
    code, out, err = arl(["lab", "list", "--url", url])
    flat = " ".join(out.split())
    assert code == 0 and "ff10" in out and "ff20" not in out and "1 call(s) a run sent to its own tiers" in flat, out + err
    sheet = tmp_path / "sheet.csv"
    code, out, err = arl(["lab", "list", "--csv", str(sheet), "--url", url])
    assert code == 0 and lab in sheet.read_text(encoding="utf-8-sig") and flight not in sheet.read_text(encoding="utf-8-sig")
    code, out, err = arl(["lab", "submit", "--request", "ff2", "--value", "4.2", "--url", url])
    assert_user_error(code, err, out=out)
    assert "is a call a run sent to its own pyscf-b3lyp tier, not a lab's" in " ".join(err.split())
    rows = tmp_path / "rows.csv"
    rows.write_text("request,value\nff1,3.3\nff2,4.2\n", encoding="utf-8")
    code, out, err = arl(["lab", "submit", "--file", str(rows), "--url", url])
    assert_user_error(code, err, out=out)
    assert "--file line 3: request ff2" in err
    with Ledger(url) as ledger:
        assert all(r.status.value == "pending" for r in ledger.lab_requests(None))


def test_a_scoring_run_is_not_shown_or_evaluated_as_a_training_run(tmp_path: Path) -> None:
    """Rerank and eval records showed as `1/None` training runs, and `runs show` offered an `arl runs eval` that failed."""
    url = _url(tmp_path / "ledger.db")
    with Ledger(url) as ledger:
        scoring = ledger.create_run("eval-abc", {"steps": None, "source": "TieredReward"})
        training = ledger.create_run("train", {"steps": 3})
    code, out, err = arl(["runs", "list", "--url", url])
    rows = {line.split("│")[2].strip(): [c.strip() for c in line.split("│")] for line in out.splitlines() if "│" in line}
    assert code == 0 and rows["eval-abc"][3] == "eval" and rows["eval-abc"][5] == "-", out
    assert rows["train"][3] == "train" and rows["train"][5] == "0/3"
    code, out, err = arl(["runs", "show", scoring.id, "--url", url])
    assert code == 0 and "verdicts scored outside a training run" in " ".join(out.split()) and "runs eval" not in out
    code, out, err = arl(["runs", "eval", scoring.id[:10], "--url", url])
    assert_user_error(code, err, out=out)
    assert f"run {scoring.id[:12]} is an eval run" in err and "only a training run has a policy" in " ".join(err.split())
    code, out, err = arl(["runs", "show", training.id, "--url", url])
    assert code == 0 and f"arl runs eval {training.id[:12]}" in out


def test_a_lab_row_moved_out_of_line_or_a_number_python_alone_reads_is_refused(tmp_path: Path) -> None:
    """The sheet's candidate and verifier cells must be the request's (a column sorted on its own gives ethanol's row
    another molecule's value); a value is a plain decimal number ('1_0' is 10 to float(), a typo to a lab). Fifth
    attack pass."""
    url = _url(tmp_path / "ledger.db")
    _, ids = _pending_lab_requests(url, "dd", {c: f"C{c}O" for c in "xy"})
    sheet = tmp_path / "sheet.csv"
    assert arl(["lab", "list", "--csv", str(sheet), "--url", url])[0] == 0
    lines = sheet.read_text(encoding="utf-8-sig").splitlines()
    header, x, y = lines[0], lines[1].split(","), lines[2].split(",")
    x[3], y[3] = y[3], x[3]  # the candidate column sorted apart from the rest
    for rows, words in (
        ([",".join(x[:1] + ["3.6"] + x[2:]), ",".join(y)], "asked about candidate 'CxO', the row says 'CyO' (request ddy0000"),
        ([f"{ids[0]},3.6,,CxO,xtb"], "asked verifier 'lab', the row says 'xtb'"),
        ([f"{ids[0]},1_0"], "must be a number, got"),
        ([f"{ids[0]},\uff13.5"], "must be a number, got"),
        ([f"{ids[0]},infinity"], "must be a number, got"),
    ):
        sheet.write_text("\n".join([header if "," in rows[0][40:] else "request,value", *rows]) + "\n", encoding="utf-8")
        code, out, err = arl(["lab", "submit", "--file", str(sheet), "--url", url])
        assert_user_error(code, err, out=out)
        assert words in " ".join(err.split()), err
    with Ledger(url) as ledger:
        assert all(r.status.value == "pending" for r in ledger.lab_requests(None))  # nothing was recorded
    code, out, err = arl(["lab", "submit", "--request", ids[1][:8], "--value", "2.5e0", "--url", url])
    assert code == 0, out + err


def test_a_lab_result_outside_the_requests_plausible_range_is_refused(tmp_path: Path) -> None:
    """The lab tier stores the plausible range of its measurement with each request ([0, 30] eV for the gap);
    3500 (meV typed for eV) or 1e200 would teach every later run's surrogate nonsense (fifth attack pass)."""
    from arl_flows.suites.molecules import make_candidate
    from arl_flows.suites.molecules.lab import LabVerifier

    url = _url(tmp_path / "ledger.db")
    lab = LabVerifier()
    with Ledger(url) as ledger:
        run = ledger.create_run("lab-run", {"steps": 1})
        candidates = [make_candidate("CCO"), make_candidate("CCN")]
        verdicts = ledger.put_verdicts(lab.verify_batch(candidates))
        ids = ledger.create_lab_requests(lab.lab_requests(candidates, verdicts, run.id))
    for value in ("3500", "1e200", "-0.5", " 99 "):
        code, out, err = arl(["lab", "submit", "--request", ids[0], "--value", value, "--url", url])
        assert_user_error(code, err, out=out)
        assert "is outside [0, 30], the plausible range the request was made with (HOMO-LUMO gap (eV))" in err, err
    sheet = tmp_path / "sheet.csv"
    sheet.write_text(f"request,value\n{ids[0]},3.5\n{ids[1]},4100\n", encoding="utf-8")
    code, out, err = arl(["lab", "submit", "--file", str(sheet), "--url", url])
    assert_user_error(code, err, out=out)
    assert "--file line 3: value 4100.0 is outside [0, 30]" in err and "nothing was recorded" in err
    with Ledger(url) as ledger:
        assert all(r.status.value == "pending" for r in ledger.lab_requests(None))
    code, out, err = arl(["lab", "submit", "--request", ids[0], "--value", " 3.5 ", "--url", url])  # spaces are no typo
    assert code == 0, out + err
    # The range checks submissions only: a ledger's requests and answers keep their cache key (the params hash).
    from arl_flows.suites.molecules.lab import LabParams

    assert LabVerifier({"value_range": [1, 2]}).params_hash == lab.params_hash == LabVerifier({"value_range": []}).params_hash
    assert LabParams(measurement="logD at pH 7.4").value_range is None  # another measurement: no gap range by default
    assert LabParams(value_range=[]).value_range is None
