"""Strict trajectory parsing and candidate keys."""

import json

import pytest

from arl_flows.suites.code.format import FormatError, canonical_code, make_candidate, normalise_code, parse_answer
from arl_flows.suites.code.tasks import UnknownTask

GOOD = "<think>add</think>\n<code>\nprint(1)\n</code>\n"
MULTI = (
    "<think>try</think><code>print(0)</code>\n<observation>0</observation>\n"
    "<think>fix</think><code>print(1)</code>"
)

PARSE_TABLE = [
    (GOOD, None),
    (MULTI, None),
    ("", "empty answer"),
    ("   \n", "empty answer"),
    ("<code>print(1)</code>", "missing <think> before <code> in turn 1"),
    ("hello <think>a</think><code>x</code>", "text before <think>"),
    ("<think>a", "missing </think>"),
    ("<think>a</think>", "missing <code> after </think>"),
    ("<think>a</think> so <code>x</code>", "text between </think> and <code>"),
    ("<think>a</think><code>print(1)", "missing </code>"),
    ("<think>a</think><code>print(1)</code> done", "text after </code>"),
    ("<think>a</think><code>x=1</code><code>print(x)</code>", "two final code blocks"),
    ("<think>a</think><code>x</code><think>b</think><code>y</code>", "turn 2 starts without an <observation>"),
    ("<think>a</think><code>x</code><observation>1</observation>", "the trajectory ends with an <observation>"),
    ("<think>a</think><code>x</code><observation>1", "missing </observation>"),
    ("<think>a</think><code>x</code><observation>1</observation><code>y</code>", "missing <think> before <code> in turn 2"),
    ("<think>a<code>x</code></think><code>y</code>", "<code> inside <think>...</think>"),
    ("<think>a</think><code>x <think> y</code>", "<think> inside <code>...</code>"),
    ("<think>a</think><code>   </code>", "empty <code> block in turn 1"),
]


@pytest.mark.parametrize(("text", "reason"), PARSE_TABLE)
def test_parse_table(text, reason):
    result = parse_answer(text)
    if reason is None:
        assert not isinstance(result, FormatError), result
    else:
        assert isinstance(result, FormatError)
        assert result.reason.startswith(reason), result.reason


def test_multi_turn_structure():
    parsed = parse_answer(MULTI)
    assert [t.code for t in parsed.turns] == ["print(0)\n", "print(1)\n"]
    assert parsed.turns[0].observation == "0"
    assert parsed.turns[1].observation is None
    assert parsed.final_code == "print(1)\n"


def test_normalise_code():
    assert normalise_code("\r\n    x = 1   \r\n    print(x)\n\n") == "x = 1\nprint(x)\n"
    assert normalise_code("  \n") == ""


def test_candidate_key_depends_on_code_not_thinking():
    a = make_candidate("sum-to-n", "<think>one</think><code>print(5050)</code>")
    b = make_candidate("sum-to-n", "<think>two</think>\n<code>\nprint(5050)   \n</code>")
    c = make_candidate("sum-to-n", "<think>one</think><code>print(5051)</code>")
    d = make_candidate("factorial", "<think>one</think><code>print(5050)</code>")
    assert a.key == b.key
    assert a.key != c.key and a.key != d.key
    assert a.key.startswith("code:sum-to-n:c3-") and len(a.key.split(":")[-1]) == 3 + 17 + 64
    assert a.suite == "code" and a.task_id == "sum-to-n" and a.valid is True


def test_malformed_candidates_key_on_text():
    a = make_candidate("sum-to-n", "<think>x</think><code>print(1)")
    b = make_candidate("sum-to-n", "<think>y</think><code>print(1)")
    assert a.key != b.key and a.valid is False
    assert json.loads(canonical_code("<think>x</think><code>print(1)")) == {"malformed": "<think>x</think><code>print(1)"}


def test_unknown_task_is_a_clear_error():
    with pytest.raises(UnknownTask, match="unknown code task 'nope'"):
        make_candidate("nope", GOOD)
