"""``--space`` on ``arl verify`` and ``arl rerank``: the chemistry space reaches the tiers; bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.cli_runner import arl, assert_no_traceback, assert_user_error


def _verify(*extra: str) -> list[dict]:
    code, out, err = arl(["verify", "--suite", "molecules", "--tiers", "fast", "--json", *extra])
    assert_no_traceback(code, out, err)
    assert code == 0, err[-2000:]
    return json.loads(out)


def test_verify_checks_the_space_it_is_given() -> None:
    qm9 = _verify("--answer", "CCCl")
    druglike = _verify("--space", "druglike", "--answer", "CCCl", "--answer", "CC[O-]")
    assert qm9[0]["status"] == "invalid" and "Cl not in the qm9 space" in qm9[0]["feedback"]
    assert druglike[0]["status"] == "ok" and druglike[0]["values"]["novel"] in (0.0, 1.0)
    assert druglike[1]["status"] == "invalid" and "charged" in druglike[1]["feedback"]
    assert set(qm9[0]) == set(druglike[1])  # the same JSON shape in every space


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["verify", "--suite", "molecules", "--space", "zinc", "--answer", "CCO"], "known spaces: druglike, qm9"),
        (["verify", "--suite", "code", "--space", "druglike", "--answer", "x"], "has no chemistry spaces"),
    ],
)
def test_a_bad_space_is_one_line(args: list[str], message: str) -> None:
    code, out, err = arl(args)
    assert_user_error(code, err, out=out)
    assert message in err


def test_rerank_checks_the_space_it_is_given(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"window": [3.0, 9.0], "candidates": ["CCCl", "CC[O-]"]}) + "\n", encoding="utf-8")
    base = ["rerank", "--suite", "molecules", "--input", str(path), "--n", "2", "--k", "2", "--budget", "5", "--json",
            "--ledger", f"sqlite:///{tmp_path / 'l.db'}", "--tiers", "rdkit-eht,gfn2-xtb"]
    code, out, err = arl([*base, "--space", "druglike"])
    assert_no_traceback(code, out, err)
    assert code == 0, err[-2000:]
    [result] = json.loads(out)
    status = {t["completion"]: t["status"] for t in result["top"]}
    assert status["CC[O-]"] == "invalid" and status["CCCl"] != "invalid"
    code, out, err = arl([*base, "--space", "zinc"])
    assert_user_error(code, err, out=out)
    assert "known spaces: druglike, qm9" in err
