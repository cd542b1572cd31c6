"""Fuzzing of every ``arl`` command and option through the real entry point.

Each command has a spec: every option it takes, with the kind of value to
draw for it (markup and control characters, huge and non-finite numbers,
broken files and database URLs). An example picks a command and some of its
options, runs ``arl`` in process and checks the contract:

- exit code 0, or 2 with one ``error:`` line (or click's usage text ending in
  one ``Error:`` line); ``db check`` may exit 1 when it reports problems;
- never a traceback, never the last-resort ``internal error:`` line, never a
  raw control character from the input on the terminal;
- the fixture ledger loses nothing: its runs are the same at the end and it
  passes ``arl db check``.

Commands that do real work when their input is valid (``run`` trains,
``ui`` serves, ``bench`` benchmarks, ``prior pretrain`` pretrains, ``rerank``
verifies and records a run) always get
one *poison* argument that is checked after the fuzzed ones (a config whose
policy directory does not exist, a missing pool file, ...), so they must end
in exit code 2 without starting. ``test_every_command_and_option_is_fuzzed``
fails when a command or option is added without a spec here.

Default suite: ``EXAMPLES_PER_COMMAND`` inputs for each command (the same every
run); the soak twin (``make test-all``) tries ``SOAK_EXAMPLES`` over random commands.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.cli_runner import arl, assert_no_traceback, assert_user_error
from storage.ledger import Ledger

EXAMPLES_PER_COMMAND = 8
SOAK_EXAMPLES = 2500

# ---------------------------------------------------------------- values

MARKUP = ["[/x]", "[/]", "[bold]x", "c1cc[nH]c1", "[link=x]y[/link]", "\\[/x]", "x\\", "[red", ":cd:", "%s %d {0}"]
CONTROL = ["a\nb", "\x1b[31mred", "\r", "\t", "\x07", "\u2028", "\u202e", "\udcff", "é😀", ""]
NUMBERS = ["nan", "-nan", "inf", "-inf", "1e309", "-1e309", str(10**30), str(-(10**30)), "-1", "0", "1", "3.5", "0x10",
           "1_000", "", " ", "1e-320", "9" * 400]  # fmt: skip
# Placeholders replaced per test by files of the fixture (see _Fixture.paths).
FILES = ["<MISSING>", "<DIR>", "<DEVNULL>", "<BINARY>", "<DEEP_TOML>", "<EMPTY>", "<HUGE_LINE>", "<GARBAGE_DB>", "<FOREIGN_DB>",
         "<JSON_LIST>", "<MARKUP_NAME>"]  # fmt: skip
URLS = ["<LEDGER>", "sqlite:///<GARBAGE_DB>", "sqlite:///<FOREIGN_DB>", "sqlite:///<DIR>", "sqlite:////dev/null", "sqlite:///<BINARY>",
        "mysql://:", "postgresql://host:notaport/db", "nosuchdb://x", "sqlite:///<HOME_FILE>/x.db", ""]  # fmt: skip
BAD_URLS = [u for u in URLS if u not in ("<LEDGER>", "")]

_argv_text = st.text(max_size=40).filter(lambda s: "\x00" not in s)  # argv cannot hold NUL
TEXT = st.one_of(st.sampled_from(MARKUP + CONTROL), _argv_text, st.builds(lambda a, b: f"[{a}]{b}[/{a}]", _argv_text, _argv_text),
                 st.builds(lambda n: "x" * n, st.sampled_from([200, 5_000, 100_000])))  # fmt: skip
NUMBER = st.one_of(st.sampled_from(NUMBERS), st.integers(-(10**40), 10**40).map(str), st.floats().map(str), TEXT)
FILE = st.one_of(st.sampled_from(FILES), TEXT)
URL = st.one_of(st.sampled_from(URLS), TEXT)
FLAG = st.none()  # an option without a value

# ---------------------------------------------------------------- specs: every option of every command

# command path -> ({option: value strategy}, poison arguments always added (None: none), positional strategy or None)
Spec = tuple[dict[str, st.SearchStrategy], list[str] | None, st.SearchStrategy | None]
_RUN_ID = st.one_of(st.sampled_from(["<RUN_ID>", "<RUN_PREFIX>"]), TEXT)
_SAFE_TIERS = st.one_of(st.sampled_from(["fast", "rdkit-eht", "code-format", "fast,fast", ",", "lab", "nosuch", "a:b", "os:path"]),
                        TEXT.filter(lambda s: ":" not in s))  # fmt: skip  # no imports of arbitrary modules
_SPACE = st.one_of(st.sampled_from(["qm9", "druglike", "zinc", ""]), TEXT)
SPECS: dict[str, Spec] = {
    "verify": ({
        "--suite": st.one_of(st.sampled_from(["molecules", "code"]), TEXT), "--smiles": st.one_of(TEXT, st.sampled_from(
            ["CCO", "[CH128]", "c1cc[nH]c1", "C" * 600, "[13CH4]"])), "--input": FILE, "--task": st.one_of(st.just("sum-to-n"), TEXT),
        "--answer-file": FILE, "--answer": TEXT, "--goal": st.one_of(st.sampled_from(["task_id=sum-to-n", "low=3", "=", "x"]), TEXT),
        "--tiers": _SAFE_TIERS, "--goal-low": NUMBER, "--goal-high": NUMBER, "--threads": NUMBER,
        "--timeout": NUMBER, "--ledger": URL, "--json": FLAG, "--space": _SPACE, "--config": FILE,
    }, None, None),
    "run": ({
        "--config": FILE, "--name": TEXT, "--profile": st.one_of(st.sampled_from(["default", "quick"]), TEXT), "--resume": _RUN_ID,
        "--steps": NUMBER, "--task-runner": st.one_of(st.sampled_from(["threads", "dask", "ray"]), TEXT), "--dask-address": TEXT,
        "--pipeline": st.one_of(st.sampled_from(["sync", "async"]), TEXT),
        "--url": URL, "--verbose": FLAG, "--dry-run": FLAG,
    }, ["--config", "<NO_POLICY_TOML>"], None),
    "report": ({"--out": FILE, "--url": URL}, None, _RUN_ID),
    "lab list": ({"--run": _RUN_ID, "--all": FLAG, "--url": URL, "--json": FLAG, "--csv": FILE}, None, None),
    "lab submit": ({"--request": TEXT, "--value": NUMBER, "--notes": TEXT, "--file": FILE, "--url": URL}, None, None),
    "ui": ({"--background": FLAG, "--port": NUMBER}, ["--stop"], None),
    "deploy": ({"--config": FILE, "--cron": st.one_of(st.just("0 3 * * *"), TEXT), "--name": TEXT, "--profile": TEXT},
               ["--url", "<POISON_URL>"], None),
    "db upgrade": ({"--url": st.one_of(st.just("<SCRATCH>"), URL), "--revision": st.one_of(st.sampled_from(["head", "base", "-1", "+1", "0001"]), TEXT)}, None, None),
    "db downgrade": ({"--url": st.one_of(st.just("<SCRATCH>"), st.sampled_from(BAD_URLS))}, None,
                     st.one_of(st.sampled_from(["base", "-1", "0001", "head"]), TEXT)),
    "db check": ({"--url": URL, "--json": FLAG}, None, None),
    "runs list": ({"--url": URL, "--limit": NUMBER, "--json": FLAG}, None, None),
    "runs show": ({"--url": URL, "--json": FLAG, "--top": NUMBER}, None, _RUN_ID),
    "runs eval": ({"--url": URL, "--json": FLAG, "--samples": NUMBER, "--budget": NUMBER, "--seed": NUMBER}, None, _RUN_ID),
    "tiers list": ({"--suite": st.one_of(st.sampled_from(["molecules", "code"]), TEXT), "--json": FLAG}, None, None),
    "tiers show": ({"--json": FLAG, "--no-json": FLAG}, None, st.one_of(_SAFE_TIERS, st.sampled_from(["pyscf-b3lyp", "gfn2-xtb"]))),
    "suites list": ({"--json": FLAG, "--no-json": FLAG}, None, None),
    "suites show": ({"--json": FLAG, "--no-json": FLAG}, None, st.one_of(st.sampled_from(["molecules", "code", "x:Y", "os:path"]), TEXT)),
    "tasks list": ({"--suite": st.one_of(st.just("code"), TEXT), "--json": FLAG, "--long": FLAG,
                    "--source": st.one_of(st.sampled_from(["bundled", "humaneval", "jsonl"]), TEXT), "--path": FILE}, None, None),
    "bench scheduler": ({
        "--pool": FILE, "--window": st.tuples(NUMBER, NUMBER), "--policies": TEXT, "--top-cost": NUMBER, "--step-budget": NUMBER,
        "--seed": NUMBER, "--limit": NUMBER, "--held-out": NUMBER, "--cache": FILE, "--ledger": URL, "--json": FILE, "--png": FILE,
        "--learned": FLAG, "--no-learned": FLAG, "--maximize": FLAG, "--minimize": FLAG, "--top-fraction": NUMBER, "--shipped": FLAG, "--no-shipped": FLAG,
        "--history": NUMBER, "--space": st.one_of(st.sampled_from(["qm9", "druglike", "nope"]), TEXT),
    }, ["--pool", "<MISSING>"], None),
    "bench advantages": ({
        "--pool": FILE, "--window": st.tuples(NUMBER, NUMBER), "--softness": NUMBER, "--group-size": NUMBER, "--groups": NUMBER,
        "--policies": TEXT, "--fractions": st.one_of(st.sampled_from(["0.1,0.2", "nan", "-1", "2", ",", "0"]), TEXT),
        "--top-cost": NUMBER, "--seed": NUMBER, "--limit": NUMBER, "--held-out": NUMBER, "--cache": FILE, "--ledger": URL,
        "--json": FILE, "--learned": FLAG, "--no-learned": FLAG, "--shipped": FLAG, "--no-shipped": FLAG, "--space": _SPACE,
    }, ["--pool", "<MISSING>"], None),
    "bench learning": ({
        "--budget": NUMBER, "--seeds": NUMBER, "--first-seed": NUMBER, "--merge": FILE, "--regimes": TEXT, "--step-budget": NUMBER,
        "--max-steps": NUMBER, "--proxy-max-steps": NUMBER, "--audit-points": NUMBER, "--novel-k": NUMBER, "--history": NUMBER,
        "--config": FILE, "--cache": FILE, "--json": FILE, "--png": FILE, "--space": _SPACE,
    }, ["--workdir", "<EMPTY>"], None),
    "bench pipeline": ({
        "--budget": NUMBER, "--step-budget": NUMBER, "--seed": NUMBER, "--max-steps": NUMBER,
        "--modes": st.one_of(st.sampled_from(["sync,async", "async", "x", ","]), TEXT), "--real": FLAG, "--latency": NUMBER,
        "--slots": NUMBER, "--cost-per-call": NUMBER, "--dask-workers": NUMBER, "--max-ahead": NUMBER, "--settle-std": NUMBER,
        "--max-group-wait": NUMBER, "--audit-points": NUMBER, "--history": NUMBER, "--config": FILE, "--cache": FILE,
        "--json": FILE, "--space": _SPACE, "--top-k": NUMBER,
        "--cluster": st.one_of(st.sampled_from(["local", "slurm", "pbs", "dask", "lsf"]), TEXT),
    }, ["--workdir", "<EMPTY>"], None),
    "prior show": ({"--config": FILE, "--profile": TEXT, "--json": FLAG, "--space": _SPACE}, None, None),
    "prior evaluate": ({"--config": FILE, "--profile": TEXT, "--space": _SPACE, "--samples": NUMBER, "--update-report": FLAG,
                        "--grammar": FLAG, "--no-grammar": FLAG, "--json": FLAG}, ["--dir", "<EMPTY>"], None),
    "config show": ({"--config": FILE, "--profile": TEXT}, None, None),
    "rerank": ({
        "--suite": st.one_of(st.sampled_from(["molecules", "code"]), TEXT), "--input": st.sampled_from([*FILES, "<RERANK_INPUT>"]),
        "--n": NUMBER, "--budget": NUMBER, "--k": NUMBER, "--window": st.tuples(NUMBER, NUMBER), "--tiers": _SAFE_TIERS,
        "--goal": st.one_of(st.sampled_from(["window=[3,4]", "task_id=sum-to-n", "=", "x"]), TEXT),
        "--tier-param": st.one_of(st.sampled_from(["rdkit-eht.x=1", "a=b", "=", "rdkit-eht.=", "x.y"]), TEXT),
        "--policy-path": FILE, "--seed": NUMBER, "--json": FLAG, "--space": _SPACE,
    }, ["--ledger", "<POISON_URL>"], None),
    "prior pretrain": ({
        "--profile": TEXT, "--steps": NUMBER, "--seed": NUMBER, "--force": FLAG, "--ship": FLAG, "--json": FLAG,
        "--space": _SPACE, "--data": FILE,
    }, ["--config", "<DEEP_TOML>"], None),
}
# Options that are the poison itself (never fuzzed) or pure output switches checked elsewhere.
NOT_FUZZED = {"bench learning": {"--workdir"}, "bench pipeline": {"--workdir"}, "ui": {"--stop"}, "prior pretrain": {"--config"}, "prior evaluate": {"--dir"}, "deploy": {"--url"},
              "rerank": {"--ledger", "--url"}}  # one option (the poison URL), two names


def _commands() -> dict[str, Any]:
    """Every leaf command of the app by path ("db check"), as click sees it."""
    import typer.main

    from arl_flows.cli import app

    found: dict[str, Any] = {}

    def walk(command: Any, path: list[str]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                walk(sub, [*path, name])
        else:
            found[" ".join(path)] = command

    walk(typer.main.get_command(app), [])
    return found


def test_every_command_and_option_is_fuzzed() -> None:
    commands = _commands()
    missing = sorted(set(commands) - set(SPECS))
    assert not missing, f"commands without a fuzz spec in {__file__}: {missing}"
    for path, command in commands.items():
        declared = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts) if opt.startswith("--")} - {"--help"}
        spec = set(SPECS[path][0]) | NOT_FUZZED.get(path, set())
        assert declared <= spec, f"{path}: options without a fuzz spec: {sorted(declared - spec)}"


def invocations(path: str) -> st.SearchStrategy[tuple[str, list[str]]]:
    """Argument lists for the command at ``path``: up to four of its options with drawn values, then its poison."""
    options, poison, positional = SPECS[path]

    @st.composite
    def draw_args(draw: st.DrawFn) -> tuple[str, list[str]]:
        args = path.split()
        if positional is not None:
            args.append(draw(positional))
        for option in draw(st.lists(st.sampled_from(sorted(options)), max_size=4, unique=True)):
            value = draw(options[option])
            if value is None:
                args.append(option)
            elif isinstance(value, tuple):
                args += [option, *value]
            else:
                args += [option, value]
        return path, args + (poison or [])

    return draw_args()


_AVAILABLE: list[str] = sorted(p for p in SPECS if p in _commands())  # specs of commands this checkout has

# ---------------------------------------------------------------- the fixture: a ledger and broken files


class _Fixture:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = f"sqlite:///{root / 'ledger.db'}"
        with Ledger(self.url) as ledger:
            self.run_id = ledger.create_run("fuzz [/x] c1cc[nH]c1", {"steps": 1}).id
            ledger.create_run("second", {"steps": 2})
        self.before = self.runs()
        files = root / "files"
        files.mkdir()
        (files / "binary").write_bytes(b"\xff\xfe\x00\x01" * 64)
        (files / "deep.toml").write_text("a = " + "[" * 50_000 + "]" * 50_000 + "\n")
        (files / "empty").write_text("")
        (files / "huge_line").write_text("C" * 300_000 + "\n")
        (files / "garbage.db").write_bytes(b"this is not an SQLite file\x00" * 100)
        with sqlite3.connect(files / "foreign.db") as conn:
            conn.execute("CREATE TABLE runs (x INTEGER)")
        (files / "list.json").write_text("[1, 2, 3]")
        (files / "[bold]markup[").write_text("[/x]\n")
        (files / "no_policy.toml").write_text(f'policy_path = "{files / "no-such-model"}"\n')
        (files / "home_file").write_text("ARL_HOME is not a folder")
        (files / "rerank.jsonl").write_text('{"candidates": ["CCO", "c1ccccc1", "[CH128]"]}\n')
        self.paths = {
            "<LEDGER>": self.url, "<SCRATCH>": f"sqlite:///{root / 'scratch.db'}", "<RUN_ID>": self.run_id,
            "<RUN_PREFIX>": self.run_id[:6], "<MISSING>": str(files / "missing.toml"), "<DIR>": str(files),
            "<DEVNULL>": "/dev/null", "<BINARY>": str(files / "binary"), "<DEEP_TOML>": str(files / "deep.toml"),
            "<EMPTY>": str(files / "empty"), "<HUGE_LINE>": str(files / "huge_line"), "<GARBAGE_DB>": str(files / "garbage.db"),
            "<FOREIGN_DB>": str(files / "foreign.db"), "<JSON_LIST>": str(files / "list.json"),
            "<MARKUP_NAME>": str(files / "[bold]markup["), "<NO_POLICY_TOML>": str(files / "no_policy.toml"),
            "<HOME_FILE>": str(files / "home_file"), "<POISON_URL>": f"sqlite:///{files / 'foreign.db'}",
            "<RERANK_INPUT>": str(files / "rerank.jsonl"),
        }  # fmt: skip
        self.foreign = (files / "foreign.db").read_bytes()

    def runs(self) -> list[tuple]:
        with sqlite3.connect(self.url.removeprefix("sqlite:///")) as conn:
            return sorted(conn.execute("SELECT id, name, config, status, steps_done FROM runs").fetchall())

    def resolve(self, arg: str) -> str:
        for token, value in self.paths.items():
            if token in arg:
                arg = arg.replace(token, value)
        return arg


_FIXTURE: dict[str, _Fixture] = {}


@pytest.fixture
def fixture(tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    monkeypatch.chdir(tmp_path)  # relative paths a fuzzed argument names land in the test's folder
    monkeypatch.setenv("ARL_DATABASE_URL", f"sqlite:///{tmp_path / 'default.db'}")
    _FIXTURE[request.node.name] = _Fixture(tmp_path)
    yield _FIXTURE[request.node.name]
    fx = _FIXTURE.pop(request.node.name)
    # Nothing was lost or changed: the runs are as created, the ledger is consistent, the foreign file untouched.
    assert fx.runs() == fx.before
    code, out, err = arl(["db", "check", "--url", fx.url])
    assert code == 0, out + err
    assert (tmp_path / "files" / "foreign.db").read_bytes() == fx.foreign


# Commands that must never succeed in this test: valid input would start real work, and the poison stops it.
_NEVER_SUCCEED = {"run", "ui", "deploy", "bench scheduler", "bench advantages", "bench learning", "bench pipeline", "prior pretrain", "prior evaluate", "rerank"}


def _check(invocation: tuple[str, list[str]]) -> None:
    (fx,) = _FIXTURE.values()
    path, raw = invocation
    args = [fx.resolve(a) for a in raw]
    code, out, err = arl(args)
    assert_no_traceback(code, out, err)
    user_text = [a for a in args if any(not ch.isprintable() for ch in a)]
    for text in user_text:  # control characters in the input never reach the terminal raw
        for ch in text:
            if not ch.isprintable() and ch not in " ":
                assert ch not in out + err or ch in "\n\t", (args, ch)
    if path in ("prior pretrain", "prior evaluate") and "--help" in args:
        return
    if path in _NEVER_SUCCEED:
        assert code != 0, (args, out[-2000:], err[-2000:])
    if code == 0:
        return
    allowed = (1, 2) if path == "db check" and code == 1 else (2,)
    if code == 1 and path == "db check":
        assert "problem" in out, out
        return
    assert_user_error(code, err, allowed=allowed, out=out)


@pytest.mark.parametrize("path", _AVAILABLE)
@pytest.mark.usefixtures("fixture")
@settings(max_examples=EXAMPLES_PER_COMMAND)
@given(data=st.data())
def test_cli_command(path: str, data: st.DataObject) -> None:
    _check(data.draw(invocations(path)))


@pytest.mark.soak
@pytest.mark.usefixtures("fixture")
@settings(max_examples=SOAK_EXAMPLES, derandomize=False)
@given(data=st.data())
def test_cli_commands_soak(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(_AVAILABLE))
    _check(data.draw(invocations(path)))
