"""``arl tiers`` and ``arl verify`` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arl_flows.cli import UserError, app

runner = CliRunner()


def _json(args: list[str]):  # noqa: ANN202
    result = runner.invoke(app, args)
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def test_tiers_list_json() -> None:
    rows = {row["name"]: row for row in _json(["tiers", "list", "--json"])}
    assert rows["pyscf-b3lyp"]["tier"] == "high_fidelity"
    assert rows["pyscf-b3lyp"]["cost_model"]["exponent"] == 3.0
    assert rows["gfn2-xtb"]["suite"] == "molecules"
    assert {"name", "suite", "tier", "version", "cost_model", "origin"} <= set(rows["lab"])


def test_tiers_list_table() -> None:
    result = runner.invoke(app, ["tiers", "list", "--suite", "molecules"])
    assert result.exit_code == 0
    assert "reference-table" in result.stdout and "rdkit-eht" in result.stdout


def test_tiers_show_params_schema() -> None:
    data = _json(["tiers", "show", "pyscf-b3lyp", "--json"])
    assert data["params_schema"]["properties"]["basis"]["default"] == "6-31G*"
    assert "description" in data["params_schema"]["properties"]["threads"]
    assert data["default_params"]["xc"] == "B3LYPG"


def test_tiers_show_unknown_is_a_user_error() -> None:
    result = runner.invoke(app, ["tiers", "show", "no-such-tier"])
    assert isinstance(result.exception, UserError)
    assert "no verifier named 'no-such-tier'" in str(result.exception)


def test_verify_molecules_json() -> None:
    rows = _json([
        "verify", "--smiles", "c1ccncc1", "--smiles", "CN(C)(C)(C)C", "--tiers", "fast,simulation",
        "--goal-low", "2", "--goal-high", "4", "--json",
    ])
    by = {(r["verifier"], r["input"]): r for r in rows}
    assert by[("rdkit-eht", "c1ccncc1")]["status"] == "ok"
    assert by[("gfn2-xtb", "c1ccncc1")]["status"] == "ok"
    assert 1.0 < by[("gfn2-xtb", "c1ccncc1")]["value"] < 10.0 and "score" not in by[("gfn2-xtb", "c1ccncc1")]
    assert by[("rdkit-eht", "CN(C)(C)(C)C")]["status"] == "invalid"
    assert "valence error" in by[("gfn2-xtb", "CN(C)(C)(C)C")]["feedback"]


def test_verify_input_file_and_table(tmp_path: Path) -> None:
    path = tmp_path / "mols.smi"
    path.write_text("# two molecules\nCCO\n\nO\n")
    result = runner.invoke(app, ["verify", "--input", str(path), "--tiers", "rdkit-eht,reference-table"])
    assert result.exit_code == 0, result.output
    assert "rdkit-eht" in result.stdout and "reference-table" in result.stdout
    assert result.stdout.count("ok") >= 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["verify", "--tiers", "fast"], "nothing to verify"),
        (["verify", "--smiles", "C", "--tiers", "no-such"], "no verifier named"),
        (["verify", "--smiles", "C", "--tiers", "fast", "--goal-low", "3"], "both --goal-low and --goal-high"),
        (["verify", "--smiles", "C", "--suite", "proteins"], "unknown suite"),
        (["verify", "--suite", "code", "--task", "x"], "--answer-file"),
    ],
)
def test_verify_user_errors(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert isinstance(result.exception, UserError), result.output
    assert message in str(result.exception)


def test_verify_input_files_that_hold_no_candidate_text_are_one_line(tmp_path: Path) -> None:
    """A file in another encoding was decoded with U+FFFD and verified: the user saw a character they never wrote."""
    files = {"latin1.smi": b"CCO\n\xff\xfeCC\n", "comments.smi": b"# nothing here\n\n", "blank.py": b"  \n"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    cases = [
        (["--input", "latin1.smi"], "--input {}/latin1.smi is not UTF-8 text (line 2); save it as UTF-8"),
        (["--input", "comments.smi"], "--input {}/comments.smi has no candidates (only blank lines and '#' comments)"),
        (["--suite", "code", "--task", "sum-to-n", "--answer-file", "blank.py"], "--answer-file {}/blank.py is empty"),
        (["--suite", "code", "--task", "sum-to-n", "--answer-file", "latin1.smi"], "is not UTF-8 text (line 2)"),
        (["--answer", "CCO", "--goal", "low"], "--goal 'low': write it as KEY=VALUE; `arl suites show SUITE` lists"),
    ]
    for args, message in cases:
        args = [str(tmp_path / a) if a in files else a for a in args]
        result = runner.invoke(app, ["verify", "--tiers", "fast", *args])
        assert isinstance(result.exception, UserError), result.output
        assert message.format(tmp_path) in str(result.exception), str(result.exception)
    # A byte-order mark (Windows editors write one) is not part of the first candidate.
    (tmp_path / "bom.smi").write_bytes("\ufeffCCO\n".encode())
    rows = _json(["verify", "--tiers", "fast", "--input", str(tmp_path / "bom.smi"), "--json"])
    assert [(r["candidate_key"], r["status"]) for r in rows] == [("molecules:CCO", "ok")]


def test_verify_stores_verdicts_and_lab_requests(sqlite_url: str) -> None:
    from storage.ledger import Ledger

    rows = _json(["verify", "--smiles", "CCO", "--tiers", "fast,lab", "--ledger", sqlite_url, "--json"])
    assert {r["status"] for r in rows} == {"ok", "pending"}
    ledger = Ledger(sqlite_url)
    try:
        stored = ledger.verdicts_for(["molecules:CCO"])
        # The tier name "lab" selects every lab-tier verifier (both built-in ones, and any other the
        # process registered earlier, e.g. a config reference loaded by another test).
        assert {"rdkit-eht", "lab", "reference-table"} <= {v.verifier for v in stored}
        assert {v.tier.value for v in stored} <= {"fast", "lab"}
        requests = ledger.lab_requests()
        assert [r.candidate_key for r in requests] == ["molecules:CCO"]
    finally:
        ledger.close()


def test_verify_code_suite(tmp_path: Path) -> None:
    code = pytest.importorskip("arl_flows.suites.code")
    task = code.load_tasks()[0]
    answer = tmp_path / "answer.txt"
    answer.write_text("not even code")
    rows = _json(["verify", "--suite", "code", "--task", task.id, "--answer-file", str(answer), "--tiers", "fast", "--json"])
    assert rows and rows[0]["candidate_key"].startswith(f"code:{task.id}:")


def test_verify_twice_reuses_the_pending_lab_request(sqlite_url: str) -> None:
    from storage.ledger import Ledger

    first = _json(["verify", "--smiles", "CCN", "--tiers", "lab", "--ledger", sqlite_url, "--json"])
    second = _json(["verify", "--smiles", "CCN", "--tiers", "lab", "--ledger", sqlite_url, "--json"])
    pick = lambda rows: next(r for r in rows if r["verifier"] == "lab")  # noqa: E731
    assert pick(first)["status"] == "pending" and pick(first)["request_id"]
    assert pick(second)["request_id"] == pick(first)["request_id"]  # the ledger's request, not a new one
    ledger = Ledger(sqlite_url)
    try:
        assert [r.id for r in ledger.lab_requests()] == [pick(first)["request_id"]]
    finally:
        ledger.close()
