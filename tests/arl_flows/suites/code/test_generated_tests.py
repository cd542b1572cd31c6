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
    assert set(gen.DOMAINS) == set(by_id)  # every bundled task has a generator
    for tid in gen.DOMAINS:
        assert len(by_id[tid].tests) >= 10, tid


def test_every_stdout_task_checks_the_call_its_print_statement_makes():
    for task in load_tasks():
        (visible,) = task.visible_tests
        assert visible.args == gen.visible_call(task.model_dump()), task.id
        assert f"({', '.join(repr(a) for a in visible.args)})" in task.prompt.replace('"', "'"), task.id


# Correct programs written differently from the references (another method, another library call): the generated
# inputs must stay inside what each prompt promises, or one of these is rejected for a case the task never asked.
OTHER_SOLUTIONS = {
    "capitalize-words": "def solve(s):\n    return ' '.join(w.capitalize() for w in s.split(' '))",
    "is-palindrome": "def solve(s):\n    t = ''.join(c for c in s.lower() if c.isalnum())\n    i, j = 0, len(t) - 1\n"
                     "    while i < j:\n        if t[i] != t[j]:\n            return False\n        i, j = i + 1, j - 1\n"
                     "    return True",
    "anagram": "from collections import Counter\ndef solve(a, b):\n    return Counter(a) == Counter(b)",
    "median": "import statistics\ndef solve(xs):\n    return statistics.median(xs)",
    "count-substring": "import re\ndef solve(s, sub):\n    return len(re.findall('(?=' + re.escape(sub) + ')', s))",
    "rotate-list": "from collections import deque\ndef solve(xs, k):\n    d = deque(xs)\n    d.rotate(k % len(xs) if xs else 0)\n"
                   "    return list(d)",
    "snake-to-camel": "def solve(s):\n    head, *rest = s.split('_')\n    return head + ''.join(p[:1].upper() + p[1:] for p in rest)",
    "string-compress-check": "def solve(s):\n    return s != '' and all(c in '0123456789' for c in s) and list(s) == sorted(s)",
    "second-largest": "def solve(xs):\n    top = second = None\n    for x in xs:\n        if top is None or x > top:\n"
                      "            top, second = x, top\n        elif x != top and (second is None or x > second):\n"
                      "            second = x\n    return second",
    "caesar-shift": "import string\ndef solve(s, k):\n    a = string.ascii_lowercase\n    k %= 26\n"
                    "    return s.translate(str.maketrans(a, a[k:] + a[:k]))",
    "is-pangram": "import string\ndef solve(s):\n    return all(c in s.lower() for c in string.ascii_lowercase)",
    "word-count": "import re\ndef solve(s):\n    return len(re.findall(r'\\S+', s))",
    "hamming-distance": "def solve(a, b):\n    return sum(x != y for x, y in zip(a, b))",
    "pascal-row": "from math import comb\ndef solve(n):\n    return [comb(n, k) for k in range(n + 1)]",
    "gray-code": "def solve(n):\n    out = [0]\n    for i in range(n):\n        out += [x | 1 << i for x in reversed(out)]\n    return out",
    "lis-length": "from bisect import bisect_left\ndef solve(xs):\n    tails = []\n    for x in xs:\n        i = bisect_left(tails, x)\n"
                  "        tails[i:i + 1] = [x]\n    return len(tails)",
    "interval-merge": "def solve(intervals):\n    out = []\n    for s, e in sorted(intervals, key=lambda iv: iv[0]):\n"
                      "        if out and s <= out[-1][1]:\n            out[-1][1] = max(out[-1][1], e)\n"
                      "        else:\n            out.append([s, e])\n    return out",
    "topological-order": "def solve(n, edges):\n    indeg = [0] * n\n    for u, v in edges:\n        indeg[v] += 1\n"
                         "    order, done = [], [False] * n\n    for _ in range(n):\n"
                         "        free = [i for i in range(n) if not done[i] and indeg[i] == 0]\n        if not free:\n"
                         "            return None\n        u = free[0]\n        done[u] = True\n        order.append(u)\n"
                         "        for a, b in edges:\n            if a == u:\n                indeg[b] -= 1\n    return order",
    "coin-change": "def solve(coins, amount):\n    seen, frontier, steps = {0}, [0], 0\n    while frontier:\n"
                   "        if amount in frontier:\n            return steps\n"
                   "        frontier = [a + c for a in frontier for c in coins if a + c <= amount and a + c not in seen]\n"
                   "        seen.update(frontier)\n        frontier = list(set(frontier))\n        steps += 1\n    return -1",
    "knapsack": "def solve(weights, values, capacity):\n    best = [[0] * (capacity + 1) for _ in range(len(weights) + 1)]\n"
                "    for i, (w, v) in enumerate(zip(weights, values), 1):\n        for c in range(capacity + 1):\n"
                "            best[i][c] = max(best[i - 1][c], best[i - 1][c - w] + v if w <= c else 0)\n"
                "    return best[-1][-1]",
    "permutations-count": "def solve(s):\n    if len(s) <= 1:\n        return [s]\n"
                          "    return sorted({c + p for i, c in enumerate(s) for p in solve(s[:i] + s[i + 1:])})",
    "flatten": "def solve(xs):\n    return sum(xs, [])",
    "transpose": "def solve(m):\n    return [[row[j] for row in m] for j in range(len(m[0]))]",
    "prime-factors": "def solve(n):\n    out = []\n    while n % 2 == 0:\n        out.append(2)\n        n //= 2\n    d = 3\n"
                     "    while d * d <= n:\n        if n % d:\n            d += 2\n        else:\n            out.append(d)\n"
                     "            n //= d\n    return out + ([n] if n > 1 else [])",
    "run-length": "from itertools import groupby\ndef solve(s):\n    return ''.join(k + str(len(list(g))) for k, g in groupby(s))",
}


@pytest.mark.parametrize("tid", sorted(OTHER_SOLUTIONS))
def test_other_correct_solutions_pass_every_generated_case(tid: str):
    from arl_flows.suites.code.tests_tier import values_equal

    task = get_task(tid)
    ns: dict = {}
    exec(compile(OTHER_SOLUTIONS[tid], f"{tid}.py", "exec"), ns)
    for case in [*task.visible_tests, *task.tests]:
        got = json.loads(json.dumps(ns["solve"](*json.loads(json.dumps(case.args)))))
        assert values_equal(got, case.expected, float_tolerance=task.float_tolerance, int_for_float=task.int_for_float), (
            tid, case.args)


def test_generated_cases_match_the_references_and_the_stated_domain():
    for tid in gen.DOMAINS:
        task = get_task(tid)
        fn = gen._reference_fn(task.model_dump())
        for case in task.tests:
            assert fn(*json.loads(json.dumps(case.args))) == case.expected, (tid, case.args)
    # The prompts state the sizes the generated cases reach, so a correct but slow program is told what is asked.
    assert "10^12" in get_task("is-prime").prompt and "2^106" in get_task("int-sqrt").prompt
    assert all(1 <= case.args[0] <= 3999 for case in get_task("roman-numeral").tests)


# What no judge of return values and stdout can check: how the answer was computed, or what happened to the input.
UNCHECKABLE = ("do not use", "don't use", "without using", "must use", "a new list", "in place", "in-place", "efficient",
               "o(n", "recursion", "recursive", "iterative", "one line", "one pass", "single pass")  # fmt: skip


def test_no_task_asks_for_what_its_judge_cannot_check():
    for task in load_tasks():
        lowered = task.prompt.lower()
        assert not [w for w in UNCHECKABLE if w in lowered], task.id
    # "as a float" is asked where the stdout check sees it (5.0, not 5); the hidden tests accept an int for a float.
    median = get_task("median")
    assert median.int_for_float and median.expected_stdout == "5.0\n" and "an int or a float" in median.prompt


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
