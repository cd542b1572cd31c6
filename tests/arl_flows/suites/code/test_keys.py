"""Keys name what was judged: the program as written and the task's judged content; bad task files are one line.

A verdict is reused for a candidate key, so the key must change whenever the judged program or the task's
function, checks, tests or tolerance change; and the program the sandbox runs must be the written one.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from arl_flows.suites.code import tasks as task_registry
from arl_flows.suites.code import TaskSource, get_task, load_source, make_candidate
from arl_flows.suites.code.format import normalise_code, parse_answer

DATA = Path(__file__).with_name("data")
HUMANEVAL_FORMAT = DATA / "humaneval_sample.jsonl"


def _answer(code: str) -> str:
    return f"<think>t</think>\n<code>\n{code}</code>"


def _run(code: str) -> dict:
    ns: dict = {}
    exec(compile(code, "m.py", "exec"), ns)  # trusted test programs
    return {k: v for k, v in ns.items() if not k.startswith("__")}


@pytest.mark.parametrize(
    "code",
    [
        'x = "a   "\ny = 1   \n',  # trailing spaces inside a one-line literal
        's = """first   \n  second  \n"""   \n',  # and inside a multi-line literal
        '    s = """one\n    two"""\n    n = 2\n',  # an indented block whose literal spans lines: not dedented
        "x = 'tab\t'\t\n",
        'f = f"{1}  "  \n',
    ],
)
def test_judged_program_means_what_was_written(code: str):
    judged = parse_answer(_answer(code)).final_code
    try:
        written = _run(code)
    except IndentationError:
        # Written indented with a multi-line literal: it runs (and fails) as written.
        assert judged.strip("\n") == code.strip("\n")
        return
    assert _run(judged) == written


def test_meaning_preserving_canonicalisation_still_shares_keys():
    # Newlines, blank edge lines, blanks after code and a whole-block indent change nothing Python sees.
    assert normalise_code("\r\n    x = 1   \r\n    print(x)\n\n") == "x = 1\nprint(x)\n"
    a = make_candidate("sum-to-n", _answer("print(5050)"))
    b = make_candidate("sum-to-n", _answer("\n    print(5050)   \r\n"))
    assert a.key == b.key
    # A trailing space inside a literal is a different program, with a different key.
    c = make_candidate("sum-to-n", _answer('print("5050 ")'))
    d = make_candidate("sum-to-n", _answer('print("5050")'))
    assert c.key != d.key


@pytest.mark.parametrize(
    "update",
    [
        {"tests": [{"args": [3], "expected": 6}]},
        {"expected_stdout": "5051\n"},
        {"function": "total"},
        {"float_tolerance": 1e-6},
        {"int_for_float": True},
    ],
    ids=["tests", "stdout", "function", "tolerance", "int-for-float"],
)
def test_a_changed_task_with_the_same_id_does_not_reuse_verdicts(monkeypatch, update):
    original = get_task("sum-to-n")
    text = _answer(original.reference)
    before = make_candidate("sum-to-n", text).key
    changed = original.model_validate(original.model_dump() | update)
    assert changed.id == original.id and changed.judged_digest() != original.judged_digest()
    monkeypatch.setitem(task_registry._tasks_by_id(), "sum-to-n", changed)
    assert make_candidate("sum-to-n", text).key != before
    # The prompt is not judged: rewording it keeps the verdicts.
    monkeypatch.setitem(task_registry._tasks_by_id(), "sum-to-n", original.model_copy(update={"prompt": "reworded"}))
    assert make_candidate("sum-to-n", text).key == before


def test_a_stricter_file_reusing_an_id_gets_its_own_keys(tmp_path: Path, monkeypatch):
    record = json.loads(HUMANEVAL_FORMAT.read_text().splitlines()[0])
    loose = load_source(TaskSource(source="jsonl", path=str(HUMANEVAL_FORMAT)))
    tid = record["task_id"]
    key_loose = make_candidate(tid, _answer("def add_digits(n):\n    return 6\n")).key
    stricter = dict(record, test=record["test"] + "    assert candidate(5) == 5\n")
    path = tmp_path / "strict.jsonl"
    path.write_text(json.dumps(stricter) + "\n")
    # Another process loads the stricter file under the same id; here, swap the registration to stand for it.
    monkeypatch.delitem(task_registry._registered, tid)
    strict = load_source(TaskSource(source="jsonl", path=str(path)))
    assert len(strict.tasks[0].tests) == len(loose.tasks[0].tests) + 1
    assert make_candidate(tid, _answer("def add_digits(n):\n    return 6\n")).key != key_loose


def test_damaged_or_truncated_gz_task_file_is_one_line_naming_the_fix(tmp_path: Path, monkeypatch):
    from typer.testing import CliRunner

    from arl_flows.cli import app
    from arl_flows.cli._common import UserError

    whole = gzip.compress(HUMANEVAL_FORMAT.read_bytes())
    for name, data in (("truncated.jsonl.gz", whole[: len(whole) // 2]), ("junk.jsonl.gz", b"\x1f\x8bjunk" * 20)):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(ValueError, match="damaged or truncated.*compress it again"):
            load_source(TaskSource(source="jsonl", path=str(path)))
        result = CliRunner().invoke(app, ["tasks", "list", "--suite", "code", "--source", "jsonl", "--path", str(path)])
        assert isinstance(result.exception, UserError), result.output
        assert "damaged or truncated" in str(result.exception) and "\n" not in str(result.exception)
        assert result.exit_code not in (0, 130)
    # The whole file still loads (its tasks in a registry of their own: the fixture's ids are taken by the .jsonl).
    monkeypatch.setattr(task_registry, "_registered", {})
    good = tmp_path / "good.jsonl.gz"
    good.write_bytes(whole)
    assert len(load_source(TaskSource(source="jsonl", path=str(good))).tasks) == len(HUMANEVAL_FORMAT.read_text().splitlines())


def test_duplicate_task_ids_in_one_file_are_an_error_naming_both_lines(tmp_path: Path):
    lines = HUMANEVAL_FORMAT.read_text().splitlines()
    path = tmp_path / "dup.jsonl"
    path.write_text("\n".join([lines[0], lines[1], lines[0]]) + "\n")
    tid = json.loads(lines[0])["task_id"]
    with pytest.raises(ValueError, match=f"line 3 repeats task_id '{tid}' of line 1; give each task its own id"):
        load_source(TaskSource(source="jsonl", path=str(path)))
