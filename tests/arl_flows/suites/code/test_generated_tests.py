"""Hidden tests generated from the references catch the near-misses hand-written tests let through.

The red team's two near-misses (a primality test dividing only by 2, 3, 5 and 7; an integer square root through
floats) got full reward; with the generated tests they fail the hidden-test tier. The generated cases are in
tasks.json (``benchmarks/generate_code_tests.py --check`` finds none missing), match the references, and stay in
the domain the prompts state.
"""

from __future__ import annotations

import json

import pytest

from arl_flows.suites.code import CodeTests, get_task, load_tasks, make_candidate
from arl_flows.suites.code.tasks import TASKS_FILE
from benchmarks import code_tasks as bench
from benchmarks import generate_code_tests as gen

LIMITS = {"cpu_s": 4, "wall_s": 20}

NEAR_MISSES = [
    ("is-prime", "def solve(n):\n    if n < 2:\n        return False\n"
                 "    return all(n % p for p in (2, 3, 5, 7) if p < n)\nprint(solve(97))\n"),
    ("int-sqrt", "def solve(n):\n    return int(n ** 0.5)\nprint(solve(1000))\n"),
    ("int-sqrt", "import math\ndef solve(n):\n    return int(math.sqrt(n))\nprint(solve(1000))\n"),
    ("sum-to-n", "def solve(n):\n    return int(n * (n + 1) / 2)\nprint(solve(100))\n"),
]


@pytest.mark.parametrize(("task", "code"), NEAR_MISSES, ids=[f"{t}-{i}" for i, (t, _) in enumerate(NEAR_MISSES)])
def test_near_misses_fail_the_hidden_tests(task: str, code: str):
    hand_written = [t for t in get_task(task).tests][:5]
    ns: dict = {}
    exec(compile(code, "m.py", "exec"), ns)  # the near-miss passes the first hand-written cases
    assert sum(ns["solve"](*t.args) == t.expected for t in hand_written) >= 4
    (v,) = CodeTests({"limits": LIMITS, "own_run": False}).verify_batch([make_candidate(task, f"<think>t</think><code>{code}</code>")])
    assert (v.status, v.value) == ("ok", 0.0), v.feedback


def test_generated_cases_are_recorded_and_reproducible():
    raw = json.loads(TASKS_FILE.read_text(encoding="utf-8"))
    assert gen.generate(raw["tasks"]) == {tid: 0 for tid in gen.DOMAINS}  # nothing missing: the file is up to date
    by_id = {t.id: t for t in load_tasks()}
    assert set(gen.DOMAINS) <= set(by_id)
    for tid in gen.DOMAINS:
        assert len(by_id[tid].tests) >= 10, tid


def test_generated_cases_match_the_references_and_the_stated_domain():
    for tid in gen.DOMAINS:
        task = get_task(tid)
        fn = gen._reference_fn(task.model_dump())
        for case in task.tests:
            assert fn(*json.loads(json.dumps(case.args))) == case.expected, (tid, case.args)
    # The prompts state the sizes the generated cases reach, so a correct but slow program is told what is asked.
    assert "10^12" in get_task("is-prime").prompt and "2^106" in get_task("int-sqrt").prompt
    assert all(1 <= case.args[0] <= 3999 for case in get_task("roman-numeral").tests)


def test_no_task_asks_for_what_its_judge_cannot_check():
    for task in load_tasks():
        lowered = task.prompt.lower()
        assert "do not use" not in lowered and "without using" not in lowered, task.id


def test_near_miss_mutants_apply_where_they_should():
    partial = bench.mutant(get_task("is-prime"), "partial-loop")
    assert f"_rounds_0 > {bench.PARTIAL_ROUNDS}" in partial and "break" in partial
    assert "int(n / r)" in bench.mutant(get_task("int-sqrt"), "float-shortcut")
    assert "int(n * (n + 1) / 2)" in bench.mutant(get_task("sum-to-n"), "float-shortcut")
    assert bench.mutant(get_task("reverse-string"), "float-shortcut") is None  # no integer arithmetic
    res = bench.check_tasks([get_task("is-prime"), get_task("int-sqrt")], kinds=("partial-loop", "float-shortcut"), visible=False)
    assert res["reference_failures"] == []
    for kind in ("partial-loop", "float-shortcut"):
        row = res["mutants"][kind]
        assert row["applicable"] >= 1 and row["killed"] == row["applicable"], (kind, row)
