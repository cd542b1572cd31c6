"""Each kind of bad input that once printed a traceback, through the real ``arl`` entry point.

Every case ends in one line naming what to fix, exit code 2 (``db check``
reporting a damaged ledger: 1), and leaves the ledger it was pointed at as
it was. The fuzz tests (``test_fuzz.py``) draw the same kinds at random.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.helpers.cli_runner import arl, assert_no_traceback, assert_user_error
from storage.ledger import Ledger, LedgerError

MARKUP = ["[/x]", "[/]", "[bold]unclosed", "c1cc[nH]c1", "[link=file:///etc/passwd]x[/link]", "\\[/x]", "x\\"]


@pytest.fixture
def ledger_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with Ledger(url) as ledger:
        ledger.create_run("plain", {"steps": 1})
    return url


@pytest.fixture
def wide_console() -> object:
    """Tables wide enough that a cell is not wrapped (the test checks the text as printed)."""
    from arl_flows.cli._common import console

    saved = console._width
    console.width = 250
    yield console
    console._width = saved


def _rows(url: str) -> list[tuple]:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        return sorted(conn.execute("SELECT id, name, status, steps_done FROM runs").fetchall())


# ---------------------------------------------------------------- rich markup in user text


@pytest.mark.parametrize("name", MARKUP)
@pytest.mark.usefixtures("wide_console")
def test_a_run_named_with_markup_is_listed_and_shown_as_written(ledger_url: str, name: str) -> None:
    """A run name is data: `runs list` and `runs show` print it literally and keep working for the whole ledger."""
    with Ledger(ledger_url) as ledger:
        run = ledger.create_run(name, {"steps": 1})
    code, out, err = arl(["runs", "list", "--url", ledger_url])
    assert code == 0, err
    assert_no_traceback(code, out, err)
    assert name in out and "plain" in out
    code, out, err = arl(["runs", "show", run.id[:12], "--url", ledger_url])
    assert code == 0, err
    assert name in out


@pytest.mark.parametrize("text", MARKUP)
def test_markup_in_arguments_is_an_error_line_not_a_crash(ledger_url: str, text: str) -> None:
    for args in (["runs", "show", text, "--url", ledger_url], ["tasks", "list", "--suite", text], ["tiers", "show", text],
                 ["lab", "submit", "--request", text, "--value", "1", "--url", ledger_url], ["report", text, "--url", ledger_url],
                 ["rerank", "--input", text]):
        code, out, err = arl(args)
        assert_user_error(code, err, out=out)
        quoted = str(Path(text)) if args[0] == "rerank" else text  # a path is shown as a path ("///" -> "/")
        assert quoted in err, (args, err)  # the message quotes what was given, not a mangled version


@pytest.mark.usefixtures("wide_console")
def test_verify_prints_smiles_and_feedback_literally() -> None:
    """`c1cc[nH]c1` lost its `[nH]` as a style tag; `C[/x]` crashed the table."""
    code, out, err = arl(["verify", "--smiles", "c1cc[nH]c1", "--smiles", "C[/x]", "--smiles", "C\x1b[31m", "--tiers", "fast"])
    assert code == 0, err
    assert "c1cc[nH]c1" in out and "C[/x]" in out
    assert "\x1b[31m" not in out and "C\\x1b[31m" in out  # a control character is shown, not sent to the terminal


# ---------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["verify", "--smiles", "CCO", "--goal-low", "nan", "--goal-high", "3"], "finite"),
        (["verify", "--smiles", "CCO", "--goal-low", "4", "--goal-high", "3"], "swap"),
        (["verify", "--smiles", "CCO", "--goal-low", "-inf", "--goal-high", "inf"], "finite"),
        (["verify", "--smiles", "CCO", "--timeout", "nan"], "--timeout"),
        (["verify", "--smiles", "CCO", "--threads", str(10**30)], "--threads"),
        (["runs", "list", "--limit", "-1"], "--limit"),
        (["run", "--steps", str(10**30)], "steps"),
        (["ui", "--port", str(10**30)], "--port"),
        (["bench", "scheduler", "--window", "nan", "4"], "--window"),
        (["bench", "scheduler", "--window", "4", "3"], "--window"),
        (["bench", "scheduler", "--top-cost", "nan"], "--top-cost"),
        (["bench", "advantages", "--softness", "nan"], "--softness"),
        (["bench", "learning", "--budget", "inf", "--seeds", "1"], "--budget"),
        (["ui", "--stop", "--background"], "give one of them"),  # was taken as --stop (newcomer pass)
    ],
)
def test_non_finite_huge_and_reversed_numbers(args: list[str], says: str) -> None:
    code, out, err = arl(args)
    assert_user_error(code, err, out=out)
    assert says in err, err


def test_runs_list_with_a_huge_limit_lists_everything(ledger_url: str) -> None:
    code, out, err = arl(["runs", "list", "--limit", str(10**30), "--url", ledger_url, "--json"])
    assert code == 0, err
    assert [r["name"] for r in json.loads(out)] == ["plain"]


def test_a_100000_character_run_id_is_unknown_in_one_short_line(ledger_url: str) -> None:
    code, out, err = arl(["runs", "show", "a" * 100_000, "--url", ledger_url])
    assert_user_error(code, err, out=out)
    assert len(err) < 500


# ---------------------------------------------------------------- files and databases


def test_config_files_that_cannot_be_read(tmp_path: Path) -> None:
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00steps = 3")
    for path, says in ((deep, "nests"), (binary, "UTF-8"), (tmp_path, "not a regular file"), (tmp_path / "none.toml", "does not exist")):
        code, out, err = arl(["run", "--config", str(path)])
        assert_user_error(code, err, out=out)
        assert says in err, err


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ("[rollout]\ngoal_windows = [[4.0, 3.0]]\n", "low below high"),
        ("[rollout]\ngoal_windows = [[nan, 3.0]]\n", "finite"),
        ("[rollout]\ngoal_windows = [[3.0, inf]]\n", "finite"),
        ("tier_concurrency = {gfn2-xtb = -1}\n", "tier_concurrency"),
        ("tier_concurrency = {gfn2-xtb = 0}\n", "tier_concurrency"),
        ("steps = 100000000000\n", "steps"),
        ("[trainer]\ngroup_size = 100000000\n", "group_size"),
        ("[rollout]\nprompts_per_step = 100000000\n", "prompts_per_step"),
        ("name = \"a\\nb\"\n", "name"),
        ("seed = -1\n", "seed"),
        ("[eval]\nbogus = 1\n", "eval.bogus: unknown field"),
        ("[eval]\nsamples = 1\n", "eval.samples: one sample a side has no standard error"),
        ("[eval]\nbudget = 0\n", "eval.budget"),
    ],
)
def test_run_configs_outside_sane_bounds(tmp_path: Path, toml: str, says: str) -> None:
    path = tmp_path / "run.toml"
    path.write_text(toml)
    code, out, err = arl(["run", "--config", str(path)])
    assert_user_error(code, err, out=out)
    assert says in err and str(path) in err, err


def test_a_foreign_sqlite_file_with_its_own_runs_table_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "foreign.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE runs (x INTEGER)")
        conn.execute("INSERT INTO runs VALUES (42)")
    before = path.read_bytes()
    for args in (["runs", "list"], ["db", "check"], ["lab", "list"], ["runs", "show", "x"]):
        code, out, err = arl([*args, "--url", f"sqlite:///{path}"])
        assert_user_error(code, err, out=out)
        assert "not an ARL ledger" in err, err
    assert path.read_bytes() == before
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("runs",)]


@pytest.mark.parametrize("target", ["/dev/null", "FOLDER"])
def test_a_ledger_path_that_is_not_a_file(tmp_path: Path, target: str) -> None:
    path = str(tmp_path) if target == "FOLDER" else target
    code, out, err = arl(["runs", "list", "--url", f"sqlite:///{path}"])
    assert_user_error(code, err, out=out)
    assert "not a regular file" in err or "is a folder" in err, err


def test_arl_home_pointing_at_a_regular_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("not a folder")
    monkeypatch.setenv("ARL_HOME", str(home))
    for args in (["runs", "list"], ["db", "check"], ["lab", "list"]):
        code, out, err = arl(args)
        assert_user_error(code, err, out=out)
        assert str(home) in err, err
    code, out, err = arl(["ui", "--stop"])
    assert_user_error(code, err, out=out)
    assert home.read_text() == "not a folder"


def _damage(path: Path, start: int) -> None:
    data = bytearray(path.read_bytes())
    for i in range(start, min(start + 3000, len(data))):
        data[i] = (i * 7) % 256
    path.write_bytes(bytes(data))


def test_db_check_reports_a_damaged_ledger_in_plain_words(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger(f"sqlite:///{path}") as ledger:
        for i in range(50):
            ledger.create_run(f"r{i}", {"steps": 1})
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    _damage(path, path.stat().st_size // 2)
    code, out, err = arl(["db", "check", "--url", f"sqlite:///{path}"])
    assert_no_traceback(code, out, err)
    assert code in (1, 2), (code, out, err)
    assert "damaged" in out + err, out + err
    code, out, err = arl(["runs", "list", "--url", f"sqlite:///{path}"])  # reads what it can, or one line
    assert_no_traceback(code, out, err)
    if code:
        assert_user_error(code, err, out=out)


def test_a_ledger_whose_schema_text_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    Ledger(f"sqlite:///{path}").close()
    data = bytearray(path.read_bytes())
    for i in range(4096 * 3, len(data), 97):
        data[i] = 0xAB
    path.write_bytes(bytes(data))
    for args in (["db", "check"], ["runs", "list"]):
        code, out, err = arl([*args, "--url", f"sqlite:///{path}"])
        assert_no_traceback(code, out, err)
        assert code in (1, 2) and "damaged" in out + err, (code, out, err)


@pytest.mark.parametrize("revision", ["nonsense", "", " ", "@", "base@", "x:y"])  # alembic asserts on "" and "@"
def test_db_upgrade_to_an_unknown_revision(ledger_url: str, revision: str) -> None:
    for args in (["db", "upgrade", "--revision", revision], ["db", "downgrade", revision]):
        code, out, err = arl([*args, "--url", ledger_url])
        assert_user_error(code, err, out=out)
        assert repr(revision) in err, err
    assert [r[1] for r in _rows(ledger_url)] == ["plain"]


def test_commands_that_read_a_ledger_never_create_one_at_a_mistyped_path(tmp_path: Path) -> None:
    """`arl db check` of a path with no file said "ledger is consistent" and left a new, empty ledger there."""
    missing = tmp_path / "ledgr.db"
    for args in (["db", "check"], ["db", "downgrade"], ["lab", "submit", "--request", "r", "--value", "1"]):
        code, out, err = arl([*args, "--url", f"sqlite:///{missing}"])
        assert_user_error(code, err, out=out)
        assert f"no ledger at {missing}; check the path" in err, err
    code, out, err = arl(["lab", "list", "--url", f"sqlite:///{missing}"])  # a list says so, as `runs list` does
    assert code == 0 and f"no lab requests: no ledger at {missing}" in " ".join(out.split()), out + err
    assert list(tmp_path.iterdir()) == []
    code, out, err = arl(["db", "check", "--url", "sqlite:///"])
    assert_user_error(code, err, out=out)
    assert "names no database file" in err
    code, out, err = arl(["db", "upgrade", "--url", f"sqlite:///{missing}"])  # the command that creates one
    assert code == 0 and missing.is_file(), err
    code, out, err = arl(["db", "check", "--url", f"sqlite:///{missing}"])
    assert code == 0 and "ledger is consistent" in out, err


def test_lab_list_of_an_unknown_run_says_so(ledger_url: str) -> None:
    code, out, err = arl(["lab", "list", "--run", "no-such-run", "--url", ledger_url])
    assert_user_error(code, err, out=out)
    assert "no-such-run" in err
    code, out, err = arl(["lab", "list", "--url", ledger_url])
    assert code == 0 and "no pending lab requests" in out, (out, err)


def test_ledger_api_refuses_what_the_cli_refuses(tmp_path: Path) -> None:
    with Ledger(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
        with pytest.raises(LedgerError, match="no run with id"):
            ledger.get_run("x" * 100_000)
        with pytest.raises(LedgerError, match="limit"):
            ledger.list_runs(limit=-1)
        assert ledger.list_runs(limit=10**30) == []


def test_an_unexpected_exception_is_one_line_naming_its_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The last-resort guard: a bug prints one line and the log file that holds the traceback, exit code 1."""
    from arl_flows.cli import app

    def probe() -> None:
        raise ZeroDivisionError("a bug [/x]")

    monkeypatch.setattr(app, "registered_commands", list(app.registered_commands))  # the probe is gone afterwards
    app.command("internal-error-probe")(probe)
    monkeypatch.setenv("ARL_HOME", str(tmp_path))
    code, out, err = arl(["internal-error-probe"])
    assert code == 1 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("internal error: ZeroDivisionError: a bug [/x]"), err
    (log,) = (tmp_path / "logs").glob("arl-error-*.log")
    assert "Traceback" in log.read_text() and "ZeroDivisionError" in log.read_text()
    assert str(log) in err
    monkeypatch.setenv("ARL_TRACEBACK", "1")  # for developers: the traceback itself
    code, out, err = arl(["internal-error-probe"])
    assert code == 1 and "Traceback" in err and "ZeroDivisionError" in err


def test_a_task_source_without_its_path_names_the_option_not_pydantic() -> None:
    code, out, err = arl(["tasks", "list", "--source", "jsonl"])
    assert_user_error(code, err, out=out)
    assert "source 'jsonl' needs --path, the JSONL file" in err and "Value error" not in err


def test_a_prefect_server_that_goes_away_under_arl_deploy_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """`arl ui --stop` under a serving `arl deploy`: Prefect's runner failed to pause its deployments on the way out
    and ARL called it 'internal error: ConnectError ... a bug in ARL' (newcomer pass). The failure is Prefect's client
    reaching no server, as here."""
    import httpx
    import prefect

    def no_server(*_deployments, **_kwargs):  # noqa: ANN002, ANN003, ANN202
        raise httpx.ConnectError("All connection attempts failed")

    monkeypatch.setattr(prefect, "serve", no_server)
    code, out, err = arl(["deploy"])
    assert_user_error(code, err, out=out)
    assert "stopped answering (ConnectError); deploy stopped: start the server again (`arl ui --background`)" in " ".join(err.split())
