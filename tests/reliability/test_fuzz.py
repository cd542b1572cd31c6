"""Fuzzing of everything that takes outside input: each input gets a clear error or an ``invalid`` verdict.

Properties, each run on generated input (hypothesis):

- SMILES (random bytes decoded, huge strings, unicode, SMILES-like alphabets) into
  ``check_molecule``, ``make_candidate`` and the fast chemistry tier;
- code trajectories (random text, nested and unclosed tags) into ``parse_answer``,
  ``check_trajectory``, ``make_candidate`` and the fast code tier;
- lab submissions (unknown request, wrong type, NaN/inf, duplicates) into
  ``Ledger.submit_lab_result``, and verdicts with awkward text fields round-tripping
  through the ledger exactly, which must pass its integrity check at the end;
- CLI arguments (``runs show``, ``verify --suite molecules --smiles``, ``tasks list``,
  ``db check``): a user mistake exits 2 (``db check`` problems: 1) with a one-line
  message and no traceback. Every other command and option is fuzzed in
  ``test_fuzz_cli.py``.

The default suite runs each property on ``settings.max_examples`` inputs (the
profile in ``conftest.py``); each ``*_soak`` twin (``make test-all`` only) runs the
same check on ``SOAK_EXAMPLES[name]`` inputs, and ``test_soak_fuzz_total`` asserts
that the soak run tried at least 20,000 inputs in all. Inputs that crash code owned
elsewhere are pinned in ``xfail(strict=True)`` tests at the end (none at
present): they flip to failures once fixed, and then move into the properties;
the inputs that once crashed stay at the end as plain regression tests.

Text with lone surrogates (which Python strings can hold, and UTF-8 cannot) is
refused where it names something (a SMILES, a request id, a candidate key) and
stored backslash-escaped where it is free text (lab notes, verdict feedback).
"""

from __future__ import annotations

import collections
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from storage.ledger import Ledger, LedgerError
from storage.records import LabRequest, Status, Tier, Verdict
from arl_flows.suites.molecules import EHTGapVerifier, InvalidMolecule, check_molecule
from arl_flows.suites.molecules import make_candidate as molecule_candidate
from arl_flows.suites.code import CodeFormat, check_trajectory, load_tasks, parse_answer
from arl_flows.suites.code import make_candidate as code_candidate
from arl_flows.suites.code.format import FormatError, ParsedTrajectory

from tests.helpers.cli_runner import arl
from tests.helpers.cli_runner import assert_user_error as _assert_user_error

# Inputs tried per property (default and soak runs alike); the soak total is asserted at the end.
TRIED: collections.Counter[str] = collections.Counter()
SOAK_EXAMPLES = {
    "smiles_text": 5000,
    "smiles_alphabet": 4000,
    "code": 5000,
    "lab_submission": 2000,
    "ledger_roundtrip": 2000,
    "cli": 2000,
}
SOAK_TOTAL = 20_000


def _property(name: str, strategy: st.SearchStrategy, check: Callable[[Any], None]) -> tuple[Any, Any]:
    """A default-suite test and its soak twin running ``check`` on inputs drawn from ``strategy``."""

    @given(strategy)
    def default(value: Any) -> None:
        TRIED[name] += 1
        check(value)

    @pytest.mark.soak
    @settings(max_examples=SOAK_EXAMPLES[name], derandomize=False)
    @given(strategy)
    def soak(value: Any) -> None:
        TRIED[f"soak:{name}"] += 1
        check(value)

    return default, soak


# --------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------

# st.text() leaves out lone surrogates, which Python strings can hold (bytes decoded with
# "surrogateescape", as os.fsdecode and sys.argv do): _decoded_bytes and _text bring them in.
_decoded_bytes = st.one_of(
    st.binary(max_size=300).map(lambda b: b.decode("utf-8", errors="replace")),
    st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
    st.binary(max_size=300).map(lambda b: b.decode("utf-8", errors="surrogateescape")),
)
_LONE_SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, exclude_categories=())


def _text(max_size: int) -> st.SearchStrategy[str]:
    """Any text, lone surrogates included (often enough to matter)."""
    pieces = st.lists(st.one_of(st.text(max_size=8), _LONE_SURROGATE), max_size=max(max_size // 4, 1))
    return st.one_of(st.text(max_size=max_size), pieces.map("".join).map(lambda t: t[:max_size]))


def _stored_text(text: str) -> str:
    """Free text as the ledger stores it: lone surrogates backslash-escaped (storage/ledger/_errors.py _storable_text)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")

_huge = st.builds(lambda s, n: (s * n)[:200_000], st.text(min_size=1, max_size=8), st.integers(1, 50_000))
_SMILES_ALPHABET = "CNOFHSPclnos()[]=#-+@/\\.%0123456789*:"
SMILES_LIKE = st.one_of(
    st.text(alphabet=_SMILES_ALPHABET, max_size=40),
    st.text(alphabet="CNOcno()=#123[]H+-", min_size=1, max_size=14),  # often a real molecule
)
SMILES_TEXT = st.one_of(st.text(max_size=200), _decoded_bytes, _huge, SMILES_LIKE)

_TAGS = ["<think>", "</think>", "<code>", "</code>", "<observation>", "</observation>", "<think", "code>", "</"]
_CODE_BITS = [
    "print(1)", "x = 1\n", "import os\n", "def f(n):\n    return n\n", "eval('1')", "(", ")", "\n", "  ", "\t",
    "while True: pass\n", "__import__('os')", "\x00", "\r\n", "é", "😀", "#", "'''", "lambda: 0", "[" * 30,
]  # fmt: skip
TRAJECTORY = st.one_of(
    st.lists(st.one_of(st.sampled_from(_TAGS), st.sampled_from(_CODE_BITS), st.text(max_size=20)), max_size=40).map("".join),
    st.text(max_size=300),
    _decoded_bytes,
    st.builds(lambda body, n: "<think>t</think><code>" + body * n + "</code>", st.sampled_from(_CODE_BITS), st.integers(1, 3000)),
    st.builds(lambda d: "<think>" * d + "<code>x</code>" + "</think>" * d, st.integers(1, 200)),  # nested tags
)


# --------------------------------------------------------------------------
# SMILES into the chemistry fast tier
# --------------------------------------------------------------------------

_eht = EHTGapVerifier()


def _check_smiles(text: str) -> None:
    try:
        parsed = check_molecule(text)
    except InvalidMolecule as exc:
        assert str(exc) and "\n" not in str(exc), repr(str(exc))
        parsed = None
    candidate = molecule_candidate(text)
    assert candidate.valid in (True, False)
    if parsed is not None:
        assert candidate.key == f"molecules:{parsed.canonical}"
        assert parsed.heavy_atoms <= 9
    verdict = _eht.verify_batch([candidate])[0]
    assert verdict.candidate_key == candidate.key
    if parsed is None:
        assert verdict.status == Status.invalid and verdict.feedback, verdict
        assert verdict.value is None
    else:
        assert verdict.status in (Status.ok, Status.failed), verdict
        if verdict.status == Status.ok:
            assert verdict.value is not None and math.isfinite(verdict.value)
        else:
            assert verdict.feedback


test_smiles_text, test_smiles_text_soak = _property("smiles_text", SMILES_TEXT, _check_smiles)
test_smiles_alphabet, test_smiles_alphabet_soak = _property("smiles_alphabet", SMILES_LIKE, _check_smiles)


# --------------------------------------------------------------------------
# Code trajectories into parsing and the fast code tier
# --------------------------------------------------------------------------

_TASK_ID = load_tasks()[0].id
_code_fast = CodeFormat()


def _check_code(text: str) -> None:
    parsed = parse_answer(text)
    assert isinstance(parsed, (ParsedTrajectory, FormatError))
    if isinstance(parsed, FormatError):
        assert parsed.reason and 0 <= parsed.offset <= len(text)
    result = check_trajectory(text)
    assert isinstance(result, (ParsedTrajectory, str))
    if isinstance(parsed, FormatError):
        assert isinstance(result, str) and result.startswith("format: ")
    candidate = code_candidate(_TASK_ID, text)
    assert candidate.valid == isinstance(parsed, ParsedTrajectory)
    assert candidate.key == code_candidate(_TASK_ID, text).key  # deterministic
    verdict = _code_fast.verify_batch([candidate])[0]
    if isinstance(result, str):
        assert verdict.status == Status.invalid and verdict.feedback == result and verdict.value is None
    else:
        assert verdict.status == Status.ok and verdict.value == 1.0


test_code_trajectories, test_code_trajectories_soak = _property("code", TRAJECTORY, _check_code)


# --------------------------------------------------------------------------
# Lab submissions and the ledger's text fields
# --------------------------------------------------------------------------


class _LabFixture:
    """One temporary SQLite ledger per test function, shared by its examples (a real ledger, no mocks)."""

    def __init__(self, directory: Path) -> None:
        self.ledger = Ledger(f"sqlite:///{directory / 'fuzz.db'}")
        self.answered: dict[str, float] = {}
        self.pending: list[str] = []
        self.stored: dict[tuple[str, str, str, str], Verdict] = {}
        self.requests = 0

    def new_request(self) -> str:
        self.requests += 1
        request = LabRequest(candidate_key=f"molecules:C{self.requests}", verifier="lab", version="1", params_hash="p")
        self.ledger.create_lab_requests([request])
        self.ledger.put_verdicts([
            Verdict(candidate_key=request.candidate_key, verifier="lab", version="1", params_hash="p",
                    tier=Tier.lab, status=Status.pending, request_id=request.id)
        ])  # fmt: skip
        self.pending.append(request.id)
        return request.id


_LAB: dict[str, _LabFixture] = {}


@pytest.fixture
def lab(tmp_path: Path, request: pytest.FixtureRequest):  # noqa: ANN201
    fixture = _LabFixture(tmp_path)
    _LAB[request.node.name] = fixture
    yield fixture
    problems = fixture.ledger.integrity_problems()
    fixture.ledger.close()
    del _LAB[request.node.name]
    assert problems == [], problems


_numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**400), max_value=10**400),  # beyond the float range too
    st.text(max_size=20),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "3.2", " 4 ", ""]),
    st.none(),
    st.lists(st.floats(), max_size=2),
    st.booleans(),
)
LAB_SUBMISSION = st.tuples(
    st.sampled_from(["pending", "answered", "unknown"]),
    _text(max_size=40),  # unknown request id
    _numbers,
    _text(max_size=200),  # notes: NULs, unicode, lone surrogates
)


def _check_lab(fixture: _LabFixture, submission: tuple[str, str, Any, str]) -> None:
    which, unknown_id, value, notes = submission
    if which == "answered" and fixture.answered:
        request_id = next(iter(fixture.answered))  # a duplicate submission
    elif which == "unknown":
        request_id = unknown_id
    else:
        request_id = fixture.new_request()
    known = request_id in fixture.pending or request_id in fixture.answered
    try:
        number = float(value)
        good = math.isfinite(number) and not isinstance(value, (list, type(None)))
    except (TypeError, ValueError, OverflowError):
        good = False
    try:
        verdict = fixture.ledger.submit_lab_result(request_id, value, notes=notes)
    except LedgerError as exc:
        message = str(exc)
        assert message and "\n" not in message.strip()
        assert not (good and known and request_id not in fixture.answered), f"refused a good submission: {message}"
        return
    assert good and known and request_id not in fixture.answered, (request_id, value)
    assert verdict.status == Status.ok and verdict.value == float(value) and verdict.request_id == request_id
    # Notes are kept as written, lone surrogates escaped (the databases store UTF-8 only).
    assert verdict.feedback == (f"lab result: {_stored_text(notes)}" if notes else "lab result")
    fixture.answered[request_id] = verdict.value
    fixture.pending.remove(request_id)
    # The answer is in the ledger exactly once, and the request is closed.
    (request,) = [r for r in fixture.ledger.lab_requests() if r.id == request_id]
    assert request.status == Status.ok and request.value == verdict.value and request.notes == _stored_text(notes)


def _lab_property(name: str) -> tuple[Any, Any]:
    def check(submission: tuple[str, str, Any, str]) -> None:
        (fixture,) = _LAB.values()
        _check_lab(fixture, submission)

    default, soak = _property(name, LAB_SUBMISSION, check)
    return pytest.mark.usefixtures("lab")(default), pytest.mark.usefixtures("lab")(soak)


test_lab_submissions, test_lab_submissions_soak = _lab_property("lab_submission")

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=8,
)
VERDICT_FIELDS = st.fixed_dictionaries({
    "candidate_key": st.one_of(st.text(min_size=1, max_size=2000), _text(max_size=40)),  # long keys, NULs, unicode
    "feedback": _text(max_size=2000),  # stored with lone surrogates escaped
    "values": st.dictionaries(st.text(max_size=20), _json_values, max_size=5),
    "status": st.sampled_from([Status.failed, Status.invalid, Status.ok, Status.timeout]),
    "value": st.floats(min_value=-1e15, max_value=1e15, allow_nan=False, allow_infinity=False, width=64),
    "request_id": st.none() | _text(max_size=40),
})  # fmt: skip


def _has_lone_surrogate(text: str | None) -> bool:
    return text is not None and any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def _check_roundtrip(fields: dict[str, Any]) -> None:
    (fixture,) = _LAB.values()
    value = fields.pop("value")
    if fields["status"] != Status.ok:
        value = None  # only an ok verdict carries a value
    verdict = Verdict(verifier="fuzz", version="1", params_hash="p", tier=Tier.fast, value=value, **fields)
    if _has_lone_surrogate(verdict.candidate_key) or _has_lone_surrogate(verdict.request_id):
        # Keys and ids are stored as they are or not at all: escaping could merge two of them.
        with pytest.raises(LedgerError, match="lone surrogate"):
            fixture.ledger.put_verdicts([verdict])
        return
    (stored,) = fixture.ledger.put_verdicts([verdict])
    first = fixture.stored.setdefault(verdict.cache_key, stored)  # the first verdict for a key wins
    again = fixture.ledger.lookup_verdicts([verdict.candidate_key], "fuzz", "1", "p")[verdict.candidate_key]
    for got in (stored, again):
        assert got.model_dump(exclude={"id", "created_at"}) == first.model_dump(exclude={"id", "created_at"})
    if first is stored:
        expected = verdict.model_copy(update={"feedback": _stored_text(verdict.feedback)})
        assert stored.model_dump(exclude={"id", "created_at"}) == expected.model_dump(exclude={"id", "created_at"})


test_ledger_roundtrip, test_ledger_roundtrip_soak = (
    pytest.mark.usefixtures("lab")(t) for t in _property("ledger_roundtrip", VERDICT_FIELDS, _check_roundtrip)
)


# --------------------------------------------------------------------------
# CLI arguments
# --------------------------------------------------------------------------


# Arguments that look like options give click usage errors (exit 2). NUL cannot be in
# argv, and --help is no mistake (it prints help and exits 0).
_OPTION_LIKE = st.one_of(
    st.sampled_from(["--json", "--url", "--suite", "--smiles", "--tiers", "--", "-", "--0", "-x"]),
    st.text(max_size=20).map(lambda s: "-" + s),
)
_cli_text = st.one_of(st.text(max_size=60), _OPTION_LIKE).filter(lambda s: "\x00" not in s and s != "--help")
CLI_CASE = st.one_of(
    st.tuples(st.just("runs show"), _cli_text),
    st.tuples(st.just("verify"), st.one_of(SMILES_LIKE, _cli_text)),
    st.tuples(st.just("verify --tiers"), _cli_text),
    st.tuples(st.just("tasks list"), _cli_text),
    st.tuples(st.just("db check"), _cli_text.filter(lambda s: "://" not in s)),
    # A ':' after the scheme may start a port that is not a number ("mysql://:").
    st.tuples(st.just("db check url"), st.tuples(st.sampled_from(["mysql", "oracle", "nosuchdb", "http"]), _cli_text)),
)


class _CliFixture:
    def __init__(self, directory: Path) -> None:
        self.url = f"sqlite:///{directory / 'cli.db'}"
        with Ledger(self.url) as ledger:
            self.run_id = ledger.create_run("fuzz", {"steps": 1}).id
        self.garbage = directory / "not-a-database.db"
        self.garbage.write_bytes(b"this is not an SQLite file\x00" * 100)


_CLI: dict[str, _CliFixture] = {}


@pytest.fixture
def cli(tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    monkeypatch.chdir(tmp_path)  # nothing a fuzzed argument names can land outside the test's folder
    _CLI[request.node.name] = _CliFixture(tmp_path)
    yield _CLI[request.node.name]
    del _CLI[request.node.name]
    # The fuzzed commands never corrupted the ledger they were pointed at.
    code, _, err = arl(["db", "check", "--url", f"sqlite:///{tmp_path / 'cli.db'}"])
    assert code == 0, err


def _check_cli(case: tuple[str, Any]) -> None:
    (fixture,) = _CLI.values()
    command, arg = case
    if command == "runs show":
        code, out, err = arl(["runs", "show", arg, "--url", fixture.url, "--json"])
        if code == 0:
            assert fixture.run_id.startswith(arg) and arg, (arg, out)
            assert fixture.run_id in out
        else:
            _assert_user_error(code, err)
    elif command == "verify":
        code, out, err = arl(["verify", "--suite", "molecules", "--smiles", arg, "--tiers", "fast", "--json"])
        if code == 0:
            import json

            (row,) = json.loads(out)
            assert row["status"] in ("ok", "invalid", "failed")
            assert row["status"] != "invalid" or row["feedback"]
        else:
            _assert_user_error(code, err)  # e.g. an argument that looks like an option, or empty
    elif command == "verify --tiers":
        code, out, err = arl(["verify", "--smiles", "CCO", "--tiers", arg, "--json"])
        if code != 0:
            _assert_user_error(code, err)
    elif command == "tasks list":
        code, out, err = arl(["tasks", "list", "--suite", arg, "--json"])
        assert (code == 0) == (arg == "code"), (arg, code, err)
        if code:
            _assert_user_error(code, err)
    else:
        url = f"{arg[0]}://{arg[1]}" if command == "db check url" else arg
        code, out, err = arl(["db", "check", "--url", url])
        _assert_user_error(code, err)
        # An empty --url means the default ledger under the test's ARL_HOME, which no command has created: a check
        # has nothing to read there, and creates nothing.
        assert url or "no ledger at" in err, err


test_cli_arguments, test_cli_arguments_soak = (
    pytest.mark.usefixtures("cli")(t) for t in _property("cli", CLI_CASE, _check_cli)
)


def test_db_check_on_a_file_that_is_not_a_database(cli: _CliFixture) -> None:
    code, _, err = arl(["db", "check", "--url", f"sqlite:///{cli.garbage}"])
    _assert_user_error(code, err, allowed=(1, 2))


# --------------------------------------------------------------------------
# The soak run's total
# --------------------------------------------------------------------------


@pytest.mark.soak
def test_soak_fuzz_total() -> None:
    """Runs last in this file: the soak twins above together tried >= 20,000 inputs."""
    soak = {k: n for k, n in TRIED.items() if k.startswith("soak:")}
    if set(soak) != {f"soak:{name}" for name in SOAK_EXAMPLES}:
        pytest.skip(f"not every soak fuzz test ran in this session ({sorted(soak)})")
    total = sum(soak.values())
    print(f"\nfuzzed inputs tried in the soak run: {total} ({soak})")
    assert total >= SOAK_TOTAL, soak


# --------------------------------------------------------------------------
# Inputs that once crashed (regressions; the properties above draw them too)
# --------------------------------------------------------------------------


@given(st.binary(min_size=1, max_size=40).map(lambda b: b.decode("utf-8", errors="surrogateescape")))
@example(b"C\xff".decode("utf-8", errors="surrogateescape"))
@settings(max_examples=20)
def test_smiles_with_lone_surrogates(text: str) -> None:
    _check_smiles(text)


@pytest.mark.parametrize("text", ["\x00C", "C\u0301"])
def test_smiles_with_invisible_junk_is_invalid(text: str) -> None:
    """RDKit skips these characters: they were keyed (and rewarded) as methane."""
    with pytest.raises(InvalidMolecule, match="at position"):
        check_molecule(text)


def test_deeply_nested_code_is_invalid() -> None:
    """ast.parse raises RecursionError on this (under the 4,000-character limit)."""
    text = "<think>t</think><code>" + "-" * 3900 + "1</code>"
    _check_code(text)
    assert check_trajectory(text) == "code nests too deeply to parse"


def test_code_with_lone_surrogates() -> None:
    _check_code("<think>t</think><code>x\udcff = 1</code>")


def test_lab_value_beyond_float_range(lab: _LabFixture) -> None:
    _check_lab(lab, ("pending", "", 10**400, ""))


@pytest.mark.parametrize("where", ["request id", "notes", "feedback", "candidate key"])
def test_ledger_text_with_lone_surrogates(lab: _LabFixture, where: str) -> None:
    """Free text is stored escaped ("\\udcff"); an id or key is refused with a LedgerError."""
    if where in ("feedback", "candidate key"):
        key, feedback = ("k", "\udcff") if where == "feedback" else ("k\udcff", "")
        _check_roundtrip({"candidate_key": key, "feedback": feedback, "values": {}, "status": Status.failed, "value": 0.0, "request_id": None})
        if where == "feedback":
            assert lab.ledger.lookup_verdicts(["k"], "fuzz", "1", "p")["k"].feedback == "\\udcff"
    else:
        _check_lab(lab, ("unknown", "\udcff", 1.0, "") if where == "request id" else ("pending", "", 1.0, "\udcff"))


@pytest.mark.parametrize("run_id", ["%", "_"])
def test_runs_show_wildcards_are_literal(cli: _CliFixture, run_id: str) -> None:
    _check_cli(("runs show", run_id))


@pytest.mark.parametrize("url", ["mysql://:", "postgresql://host:notaport/db"])
def test_db_check_with_a_bad_port(cli: _CliFixture, url: str) -> None:
    code, _, err = arl(["db", "check", "--url", url])
    _assert_user_error(code, err)


@pytest.mark.parametrize("args", [["runs", "show", "--0", "--url", "sqlite:///cli.db"], ["tasks", "list", "--source"], ["verify", "--no-such-option"]])
def test_usage_errors_are_one_line(cli: _CliFixture, args: list[str]) -> None:
    code, _, err = arl(args)
    _assert_user_error(code, err)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[CH128]", "lists 128 hydrogens"),  # RDKit: C++ pre-condition violation in DetectChemistryProblems
        ("C[CH200]C", "lists 200 hydrogens"),
        ("[CH260]", "lists 260 hydrogens"),  # RDKit wraps the count to 4: parsed as methane
        ("[99999CH4]", "isotope 99999"),  # RDKit wraps the isotope to 34463
        ("[C-128]", "charge beyond"),  # RDKit: "Atomic number not found" over several lines
        ("[CH3+128]", "charge beyond"),
        ("[C++++++++++++++++]", "charge beyond"),
    ],
)
def test_bracket_atoms_beyond_smiles_bounds_are_invalid(text: str, reason: str) -> None:
    """Numbers in a bracket atom past OpenSMILES' bounds are an invalid verdict with the reason, in every tier's path."""
    with pytest.raises(InvalidMolecule, match=reason):
        check_molecule(text)
    _check_smiles(text)


@pytest.mark.parametrize("text", ["[13CH4]", "[999CH4]", "C[13CH2]O", "c1cc[nH]c1", "C=[N+]=[N-]"])
def test_bracket_atoms_within_bounds_still_parse(text: str) -> None:
    _check_smiles(text)
    if re.search(r"\[\d", text):  # within the bounds, parsed, then refused: a space holds no isotopes
        with pytest.raises(InvalidMolecule, match="^isotope label"):
            check_molecule(text)
    else:
        check_molecule(text)
