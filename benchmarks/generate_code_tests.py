"""Generate hidden tests of the bundled code tasks from their reference solutions.

    python -m benchmarks.generate_code_tests [--check]

Hand-written hidden tests let near-misses through (a primality test that only divides by 2, 3, 5 and 7; an
integer square root through floats, wrong from about 2^52). For every task with a declared input domain
(``DOMAINS``: the arguments its prompt promises, edge cases first, then large values and seeded random ones), this
runs the task's reference on each input and adds the (arguments, result) pairs to the task's hidden tests in
``arl_flows/suites/code/tasks/tasks.json``, as the hand-written ones are recorded. Inputs come only from the
domain the prompt states (a test outside it would reject a correct program), and a case whose reference run takes
longer than ``CASE_S`` CPU-seconds is left out. Deterministic: one seeded ``random.Random`` per task, so running it
again adds nothing. ``--check`` exits 1 if the file lacks a generated case (CI can run it).

The references are the bundled, reviewed solutions and run in this process; nothing here runs at training time.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
from collections.abc import Callable
from typing import Any

from arl_flows.suites.code.tasks import TASKS_FILE

CASE_S = 0.2  # CPU seconds; the hidden-test run of a whole task must stay far inside the sandbox's CPU limit
Inputs = Callable[[random.Random], list[list[Any]]]

# Composites without a factor up to 7 (they pass a primality test dividing only by 2, 3, 5, 7), Carmichael numbers
# (they pass a Fermat test), squares of primes, and large primes.
_PRIME_NEAR_MISSES = [121, 143, 169, 221, 289, 323, 361, 437, 529, 10403, 1022117, 999966000289, 561, 1105, 1729,
                      41041, 825265, 11, 13, 2147483647, 1000000007, 999999937, 999999999989]  # fmt: skip
# Around perfect squares past 2^52, where int(n ** 0.5) is wrong, and small ones.
_ISQRT_EDGES = [n for r in (2**26 + 1, 10**8 + 1, 2**32 + 1, 94906267, 10**15 + 1, 2**53 + 1, 3 * 10**20 + 7)
                for n in (r * r - 1, r * r, r * r + 1)] + [2, 3, 4, 8, 9, 10**30, 2**64, 2**106]  # fmt: skip


def _ints(low: int, high: int, edges: list[int], n: int = 8) -> Inputs:
    """One int argument in [low, high]: the edges, then ``n`` seeded random values (log-uniform where wide)."""

    def gen(rng: random.Random) -> list[list[Any]]:
        out = [[e] for e in edges if low <= e <= high]
        for _ in range(n):
            digits = rng.randint(len(str(max(low, 1))), len(str(high)))
            out.append([min(high, max(low, rng.randint(10 ** (digits - 1), 10**digits - 1)))])
        return out

    return gen


def _pairs(low: int, high: int, edges: list[list[int]], n: int = 8, positive: bool = False) -> Inputs:
    def gen(rng: random.Random) -> list[list[Any]]:
        out = [list(e) for e in edges]
        for _ in range(n):
            a, b = rng.randint(low, high), rng.randint(low, high)
            if positive or (a, b) != (0, 0):
                out.append([a, b])
        return out

    return gen


def _power_mod(rng: random.Random) -> list[list[Any]]:
    out = [[0, 0, 1], [0, 0, 7], [0, 5, 7], [2**64, 2**64, 10**9 + 7], [12345678901234567890, 10**18, 998244353]]
    out += [[rng.randint(0, 10**20), rng.randint(0, 10**20), rng.randint(1, 10**12)] for _ in range(6)]
    return out


def _binary_strings(rng: random.Random) -> list[list[Any]]:
    out = [["00"], ["0001"], ["1" * 64], ["1" + "0" * 70], ["1" * 53 + "1"]]
    out += [["1" + "".join(rng.choice("01") for _ in range(rng.randint(1, 90)))] for _ in range(6)]
    return out


def _romans(rng: random.Random) -> list[list[Any]]:
    ns = [3888, 3999, 444, 949, 1666, 2, 3, 40, 90, 400, 900, 1000] + [rng.randint(1, 3999) for _ in range(6)]
    return [[_roman(n)] for n in ns]


def _roman(n: int) -> str:
    out = ""
    for value, sym in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"),
                       (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):  # fmt: skip
        while n >= value:
            out, n = out + sym, n - value
    return out


def _int_list(rng: random.Random, low: int, high: int, spread: int = 50) -> list[int]:
    return [rng.randint(-spread, spread) for _ in range(rng.randint(low, high))]


def _lists(low: int, extra: Callable[[random.Random], list[list[Any]]] | None = None, spread: int = 50) -> Inputs:
    """One int-list argument of at least ``low`` elements: long ones (past any small loop bound), then random."""

    def gen(rng: random.Random) -> list[list[Any]]:
        out = [[list(range(40))], [list(range(40, 0, -1))], [[7] * 30], [[-1] * 12 + [5]], [[3] + [-1] * 12 + [9]]]
        out += [[_int_list(rng, max(low, 7), 60, spread)] for _ in range(6)]
        out += extra(rng) if extra else []
        return [case for case in out if len(case[0]) >= low]

    return gen


def _sorted_distinct(rng: random.Random, n: int) -> list[int]:
    return sorted(rng.sample(range(-500, 500), n))


def _binary_search(rng: random.Random) -> list[list[Any]]:
    xs = list(range(1, 200, 2))
    out = [[xs, 1], [xs, 199], [xs, 101], [xs, 100], [xs, 0], [xs, 200], [xs, 151]]
    for _ in range(6):
        ys = _sorted_distinct(rng, rng.randint(7, 80))
        out.append([ys, rng.choice(ys) if rng.random() < 0.7 else rng.randint(-500, 500)])
    return out


def _merge_sorted(rng: random.Random) -> list[list[Any]]:
    out = [[list(range(0, 40, 2)), list(range(1, 41, 2))], [list(range(20)), []], [[5] * 9, [5] * 8]]
    for _ in range(6):
        out.append([sorted(_int_list(rng, 0, 30)), sorted(_int_list(rng, 0, 30))])
    return out


def _strings(alphabet: str, low: int, cases: list[str]) -> Inputs:
    def gen(rng: random.Random) -> list[list[Any]]:
        out = [[c] for c in cases]
        out += [["".join(rng.choice(alphabet) for _ in range(rng.randint(max(low, 7), 60)))] for _ in range(6)]
        return out

    return gen


# Task id -> the inputs its prompt allows. Tasks not listed keep their hand-written tests only.
DOMAINS: dict[str, Inputs] = {
    "sum-to-n": _ints(0, 10**30, [2, 3, 2**53, 2**53 + 1, 10**18 + 1]),
    "factorial": _ints(0, 60, [2, 3, 21, 22, 23, 30, 60], n=4),
    "fibonacci": _ints(0, 500, [3, 70, 78, 79, 92, 93, 100, 300], n=4),
    "gcd": _pairs(0, 10**18, [[0, 1], [1, 0], [5, 0], [2**60, 2**40], [10**18, 10**18 - 1], [2**53 + 2, 2**53]]),
    "lcm": _pairs(1, 10**12, [[2**40, 3**20], [10**12, 10**12 - 1], [2**53, 2**53 + 1]], positive=True),
    "is-prime": _ints(0, 10**12, [3, 4, 9, 25, 49, *_PRIME_NEAR_MISSES]),
    "digit-sum": _ints(0, 10**40, [9, 10, 2**64, 10**30 - 1]),
    "count-divisors": _ints(1, 10**9, [3, 4, 121, 720720, 735134400, 999999937, 2**29]),
    "power-mod": _power_mod,
    "collatz-steps": _ints(1, 10**12, [3, 7, 871, 77031, 837799, 8400511, 2**40]),
    "perfect-number": _ints(1, 10**8, [2, 8128, 8127, 8129, 33550336, 33550337, 120, 945]),
    "int-sqrt": _ints(0, 2**106, _ISQRT_EDGES),
    "binary-string": _ints(0, 2**90, [3, 2**53, 2**53 + 1, 2**64 - 1, 2**64]),
    "from-binary": _binary_strings,
    "roman-numeral": _ints(1, 3999, [2, 3, 5, 40, 44, 90, 400, 444, 900, 949, 1000, 3888]),
    "from-roman": _romans,
    "triangle-number-index": _ints(1, 10**30, [4, 5, 6, 7, 5050, 5049, 10**18, 2**53 * (2**53 + 1) // 2 + 1]),
    "sum-of-squares": _ints(0, 10**20, [2, 2**53, 10**18]),
    "armstrong": _ints(0, 10**12, [1, 9, 407, 1634, 8208, 54748, 92727, 93084, 548834, 9926315, 4679307774]),
    # Lists and strings longer than any small loop bound (a loop that stops after a few rounds is a near-miss).
    "list-max": _lists(1),
    "running-sum": _lists(0),
    "dedupe-list": _lists(0, spread=8),
    "max-subarray": _lists(1),
    "mode": _lists(1, spread=6),
    "binary-search": _binary_search,
    "merge-sorted": _merge_sorted,
    "power-set-sums": lambda rng: [[list(range(1, 13))], [[1, 2, 4, 8, 16, 32, 64, 128, 256]], [[5] * 11]]
    + [[[rng.randint(1, 30) for _ in range(rng.randint(7, 12))]] for _ in range(4)],
    "next-permutation": lambda rng: [[list(range(10))], [list(range(10, 0, -1))], [[1, 2, 3, 4, 5, 6, 7, 9, 8]],
                                     [[1] * 8 + [2]], [[2] + [1] * 8]]
    + [[[rng.randint(0, 5) for _ in range(rng.randint(7, 12))]] for _ in range(4)],
    "longest-word": _strings("ab c  d\tefg ", 0, ["a bb ccc dddd eeeee ffffff ggggggg hhhhhhhh", "x " * 20 + "yy"]),
    "first-unique-char": _strings("abcdefg", 0, ["aabbccddeeffgghhiijjk", "abcdefghij" * 3 + "z", "ab" * 20]),
    "balanced-brackets": _strings("()[]{}x", 0, ["(" * 20 + ")" * 20, "([{" * 10 + "}])" * 10, "()" * 20 + ")",
                                                "([{" * 10 + "}])" * 9 + "])"]),
}


class _SlowCase(Exception):
    pass


def _on_alarm(_signum: int, _frame: object) -> None:
    raise _SlowCase


def _reference_fn(task: dict[str, Any]) -> Callable[..., Any]:
    ns: dict[str, Any] = {"__name__": "reference"}
    source = "\n".join(line for line in task["reference"].splitlines() if not line.startswith("print("))
    exec(compile(source, f"{task['id']}.py", "exec"), ns)  # the bundled, reviewed reference
    return ns[task.get("function", "solve")]


def generate(tasks: list[dict[str, Any]]) -> dict[str, int]:
    """Add the generated cases to ``tasks`` in place; how many each task gained."""
    added: dict[str, int] = {}
    old = signal.signal(signal.SIGPROF, _on_alarm)
    try:
        for task in tasks:
            inputs = DOMAINS.get(task["id"])
            if inputs is None:
                continue
            fn = _reference_fn(task)
            seen = {json.dumps(t["args"]) for t in task["tests"]}
            added[task["id"]] = 0
            for args in inputs(random.Random(f"{task['id']}-0")):
                key = json.dumps(args)
                if key in seen:
                    continue
                signal.setitimer(signal.ITIMER_PROF, CASE_S)
                try:
                    expected = fn(*json.loads(key))
                except _SlowCase:
                    continue
                finally:
                    signal.setitimer(signal.ITIMER_PROF, 0)
                seen.add(key)
                task["tests"].append({"args": json.loads(key), "expected": json.loads(json.dumps(expected))})
                added[task["id"]] += 1
    finally:
        signal.signal(signal.SIGPROF, old)
    return added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if tasks.json lacks a generated case")
    args = parser.parse_args()
    raw = json.loads(TASKS_FILE.read_text(encoding="utf-8"))
    added = generate(raw["tasks"])
    total = sum(added.values())
    if args.check:
        if total:
            print(f"{total} generated cases are missing from {TASKS_FILE}; run python -m benchmarks.generate_code_tests")
            sys.exit(1)
        print(f"{TASKS_FILE}: every generated case is present ({len(added)} tasks)")
        return
    TASKS_FILE.write_text(json.dumps(raw, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"added {total} cases to {len(added)} tasks: " + ", ".join(f"{k} +{v}" for k, v in added.items()))


if __name__ == "__main__":
    main()
