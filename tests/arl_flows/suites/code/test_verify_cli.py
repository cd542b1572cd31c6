"""`arl verify --suite code` verifies one trajectory file from outside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arl_flows.suites.code import get_task
from tests.helpers.cli_runner import arl


def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code, out, err = arl(args)
    return code, out + err


def test_verify_a_code_answer_file_at_every_tier(tmp_path: Path, capsys) -> None:
    good = tmp_path / "good.txt"
    good.write_text(f"<think>add them up</think>\n<code>\n{get_task('sum-to-n').reference}\n</code>\n")
    code, out = _main(["verify", "--suite", "code", "--task", "sum-to-n", "--answer-file", str(good),
                       "--tiers", "fast,simulation,high_fidelity", "--json"], capsys)
    assert code == 0, out
    verdicts = json.loads(out)
    got = {v["verifier"]: v for v in verdicts}
    assert set(got) == {"code-format", "code-exec", "code-tests"}
    assert all(v["status"] == "ok" for v in verdicts)
    assert got["code-tests"]["value"] == 1.0 and got["code-exec"]["value"] == 1.0

    hack = tmp_path / "hack.txt"
    hack.write_text("<think>print it</think><code>print(5050)</code>")
    code, out = _main(["verify", "--suite", "code", "--task", "sum-to-n", "--answer-file", str(hack),
                       "--tiers", "code-tests", "--json"], capsys)
    assert code == 0
    [tests] = json.loads(out)
    assert tests["status"] == "ok" and tests["value"] == 0.0 and tests["feedback"]


def test_verify_code_user_mistakes(tmp_path: Path, capsys) -> None:
    answer = tmp_path / "a.txt"
    answer.write_text("<think>x</think><code>print(1)</code>")
    code, out = _main(["verify", "--suite", "code", "--task", "no-such-task", "--answer-file", str(answer)], capsys)
    assert code == 2 and "no-such-task" in out and "Traceback" not in out
    code, out = _main(["verify", "--suite", "code", "--task", "sum-to-n"], capsys)
    assert code == 2 and "--answer-file" in out
