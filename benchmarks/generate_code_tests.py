"""Generate hidden tests of the bundled code tasks from their reference solutions.

    python -m benchmarks.generate_code_tests [--check]

Hand-written hidden tests let near-misses through (a primality test that only divides by 2, 3, 5 and 7; an
integer square root through floats, wrong from about 2^52). For every task with a declared input domain
(``DOMAINS``: the arguments its prompt promises, edge cases first, then large values and seeded random ones), this
runs the task's reference on each input and adds the (arguments, result) pairs to the task's hidden tests in
``arl_flows/suites/code/tasks/tasks.json``, as the hand-written ones are recorded. Inputs come only from the
domain the prompt states (a test outside it would reject a correct program), and a case whose reference run takes
longer than ``CASE_S`` CPU-seconds is left out. Deterministic: one seeded ``random.Random`` per task, so running it
again adds nothing. Every bundled task has a domain (a test checks it). A task with an expected stdout also gets, as
its ``visible_tests``, the call of the print statement its prompt asks for (``print(solve(100))``: ``solve(100)``
and the reference's value), which the execution tier checks next to the stdout. ``--check`` exits 1 if the file
lacks a generated case or a visible call (CI can run it).

The references are the bundled, reviewed solutions and run in this process; nothing here runs at training time.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
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


# Starting values up to 10^12 whose Collatz trajectories climb past 2^53 (path records, OEIS A006884), where a
# halving through a float is no longer exact.
_COLLATZ_PAST_2_53 = [319804831, 1410123943, 8528817511, 12327829503, 23035537407, 45871962271, 77566362559,
                      204430613247, 446559217279, 871673828443]  # fmt: skip


def _union(*gens: Inputs) -> Inputs:
    """The cases of each generator in turn, one seeded stream (adding a generator leaves the earlier cases as they were)."""
    return lambda rng: [case for gen in gens for case in gen(rng)]


def _near_triangles(rng: random.Random) -> list[list[Any]]:
    """T(k) and T(k) + 1 for seeded k past 2^47 (T(k) up to 10^30), where k(k+1)/2 through a float is off."""
    out = []
    for _ in range(6):
        k = rng.randint(2**47, 1414213562373095)
        out += [[k * (k + 1) // 2], [k * (k + 1) // 2 + 1]]
    return out


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


def _text(alphabet: str, cases: list[str], n: int = 6, low: int = 7, high: int = 60) -> Inputs:
    """One string argument over ``alphabet``: the listed cases, then ``n`` seeded random ones of ``low``..``high`` chars."""

    def gen(rng: random.Random) -> list[list[Any]]:
        out = [[c] for c in cases]
        out += [["".join(rng.choice(alphabet) for _ in range(rng.randint(low, high)))] for _ in range(n)]
        return out

    return gen


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_PRINTABLE = _LETTERS + "0123456789 .,;:!?'-_()[]{}#@"


def _palindromes(rng: random.Random) -> list[list[Any]]:
    out = [["Was it a car or a cat I saw?"], ["ab" * 20 + "a"], ["ab" * 20 + "c"], ["0P"], ["1a2, 2A1"], ["!!!"]]
    for i in range(8):
        half = [rng.choice("abcdeXYZ019") for _ in range(rng.randint(3, 20))]
        word = half + ([rng.choice("abc")] if i % 2 else []) + half[::-1]
        if i % 4 == 3:  # one letter changed: no longer a palindrome
            word[rng.randrange(len(half))] = "q"
        chars = []
        for ch in word:  # random case and punctuation, which the check ignores
            chars += [ch.upper() if rng.random() < 0.3 else ch, rng.choice(["", "", " ", ",", "!"])]
        out.append(["".join(chars)])
    return out


def _anagrams(rng: random.Random) -> list[list[Any]]:
    out = [["a" * 20 + "b", "b" + "a" * 20], ["a" * 20 + "b", "a" * 21], ["abc", "abcc"], ["Ab", "ab"], ["", "a"]]
    for i in range(8):
        a = [rng.choice("abcdeA ") for _ in range(rng.randint(7, 40))]
        b = a[:]
        rng.shuffle(b)
        if i % 2:  # one letter swapped for another: same length, not an anagram
            b[rng.randrange(len(b))] = "z"
        out.append(["".join(a), "".join(b)])
    return out


def _caesar(rng: random.Random) -> list[list[Any]]:
    s = "the quick brown fox, JUMPS over 13 lazy dogs!"
    out = [[s, 0], [s, 25], [s, 26], [s, 27], [s, 52], [s, 999], [s, 1000], ["xyz" * 10, 3], ["", 1000]]
    out += [["".join(rng.choice(_PRINTABLE) for _ in range(rng.randint(7, 40))), rng.randint(0, 1000)] for _ in range(5)]
    return out


def _runs(rng: random.Random) -> list[list[Any]]:
    out = [["a" * 10], ["a" * 100 + "b"], ["ab" * 10], ["aabbaa" * 4], ["zzzzzzzzzzzzyyyyyyyyyyyyyyyyyyyy"]]
    for _ in range(6):
        out.append(["".join(rng.choice("abcAB") * rng.choice([1, 1, 2, 3, 9, 10, 11, 25]) for _ in range(rng.randint(4, 12)))])
    return out


def _pangrams(rng: random.Random) -> list[list[Any]]:
    abc = "abcdefghijklmnopqrstuvwxyz"
    out = [[abc], [abc.upper()], [abc[:-1]], [abc[1:] * 3], ["The five boxing wizards jump quickly."], [abc.replace("m", "") * 2]]
    for i in range(6):
        letters = list(abc * 2)
        rng.shuffle(letters)
        if i % 2:  # one letter missing everywhere
            gone = rng.choice(abc)
            letters = [c for c in letters if c != gone]
        out.append(["".join(c.upper() if rng.random() < 0.4 else c for c in letters) + " 42!"])
    return out


def _substrings(rng: random.Random) -> list[list[Any]]:
    out = [["a" * 30, "a"], ["a" * 30, "aaa"], ["ab" * 15, "aba"], ["abc", "abcd"], ["", "a"], ["aaa", "aaa"],
           ["mississippi", "issi"]]  # fmt: skip
    for _ in range(6):
        s = "".join(rng.choice("ab") for _ in range(rng.randint(7, 50)))
        out.append([s, "".join(rng.choice("ab") for _ in range(rng.randint(1, 4)))])
    return out


def _snake(rng: random.Random) -> list[list[Any]]:
    out = [["a_b_c_d_e_f_g_h_i_j"], ["x"], ["already"], ["http_status_404"], ["a1_b2_c3"]]
    for _ in range(6):
        words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 6))) for _ in range(rng.randint(1, 9))]
        out.append(["_".join(words)])
    return out


def _equal_strings(rng: random.Random) -> list[list[Any]]:
    out = [["a" * 30, "b" * 30], ["a" * 30, "a" * 29 + "b"], ["b" + "a" * 29, "a" * 30], ["Aa", "aA"]]
    for _ in range(6):
        a = "".join(rng.choice("01ab") for _ in range(rng.randint(7, 50)))
        out.append([a, "".join(c if rng.random() < 0.6 else rng.choice("01ab") for c in a)])
    return out


def _digit_strings(rng: random.Random) -> list[list[Any]]:
    out = [["0"], ["0" * 20], ["0123456789"], ["1234567890"], ["1" * 20 + "0"], ["123 456"], ["-123"], ["12.3"]]
    for i in range(8):
        digits = sorted(rng.choice("0123456789") for _ in range(rng.randint(7, 40)))
        if i % 4 == 1:
            j = rng.randrange(len(digits) - 1)
            digits[j], digits[j + 1] = digits[j + 1], digits[j]  # may break the order (or swap equal digits)
        if i % 4 == 3:
            digits[rng.randrange(len(digits))] = rng.choice("ax ")
        out.append(["".join(digits)])
    return out


def _list_of_lists(rng: random.Random) -> list[list[Any]]:
    out = [[[[i] for i in range(30)]], [[[], [], []]], [[list(range(20)), [], list(range(20, 40))]], [[[[1, 2]], [[3]]]]]
    out += [[[_int_list(rng, 0, 6) for _ in range(rng.randint(0, 12))]] for _ in range(6)]
    return out


def _list_and_k(low_k: int, high_k: int, edges: list[list[Any]]) -> Inputs:
    def gen(rng: random.Random) -> list[list[Any]]:
        xs = list(range(1, 31))
        out = [list(e) for e in edges] + [[xs, k] for k in (1, 7, 29, 30, 31, 60, 61, high_k) if low_k <= k <= high_k]
        for _ in range(6):
            out.append([_int_list(rng, 0, 40), rng.randint(low_k, 100 if rng.random() < 0.7 else high_k)])
        return out

    return gen


def _two_sum(rng: random.Random) -> list[list[Any]]:
    far = list(range(0, 400, 10))
    out = [[far, 770], [far, 10], [far, 1], [[5] * 30, 10], [[1] * 29 + [3, 3], 6], [far + [-390], 0], [[0] * 20 + [-7, 7], 0]]
    for i in range(8):
        xs = [rng.randint(-100, 100) for _ in range(rng.randint(8, 40))]
        if i % 2:  # a pair far past the start
            a, b = sorted(rng.sample(range(6, len(xs)), 2))
            target = xs[a] + xs[b]
        else:
            target = rng.randint(-300, 300)
        out.append([xs, target])
    return out


def _matrix(rng: random.Random, rows: int, cols: int, spread: int = 9) -> list[list[int]]:
    return [[rng.randint(-spread, spread) for _ in range(cols)] for _ in range(rows)]


def _matrices(rng: random.Random) -> list[list[Any]]:
    out = [[[list(range(12))]], [[[i] for i in range(12)]], [_matrix(rng, 9, 8)], [[[2**70, -1], [3, 2**64]]]]
    out += [[_matrix(rng, rng.randint(1, 9), rng.randint(1, 9))] for _ in range(6)]
    return out


def _matrix_pairs(rng: random.Random) -> list[list[Any]]:
    out = [[[list(range(10))], [[i] for i in range(10)]], [[[i] for i in range(8)], [list(range(8))]],
           [_matrix(rng, 8, 8), _matrix(rng, 8, 8)], [[[2**40, 1]], [[2**40], [-(2**70)]]]]  # fmt: skip
    for _ in range(6):
        n, k, m = rng.randint(1, 8), rng.randint(1, 8), rng.randint(1, 8)
        out.append([_matrix(rng, n, k), _matrix(rng, k, m)])
    return out


def _coins(rng: random.Random) -> list[list[Any]]:
    out = [[[1, 3, 4], 6], [[25, 10, 1], 30], [[7, 3], 1000], [[2], 999], [[2], 1000], [[1], 1000], [[5, 10], 3],
           [[186, 419, 83, 408], 1000], [[9, 6, 5, 1], 11], [[3, 7], 0]]  # fmt: skip
    for _ in range(6):
        coins = rng.sample(range(1, 60), rng.randint(1, 5))
        out.append([coins, rng.randint(0, 1000)])
    return out


def _knapsack(rng: random.Random) -> list[list[Any]]:
    out = [[list(range(1, 13)), list(range(12, 0, -1)), 30], [[10, 20, 30], [60, 100, 120], 50],
           [[5, 4, 6, 3], [10, 40, 30, 50], 10], [[3] * 10, [1, 9, 2, 8, 3, 7, 4, 6, 5, 5], 15], [[1, 2], [5, 5], 0]]  # fmt: skip
    for _ in range(6):
        n = rng.randint(7, 14)
        out.append([[rng.randint(1, 30) for _ in range(n)], [rng.randint(0, 100) for _ in range(n)], rng.randint(0, 120)])
    return out


def _grid(rng: random.Random, rows: int, cols: int, p: float, on: str, off: str) -> list[str]:
    return ["".join(on if rng.random() < p else off for _ in range(cols)) for _ in range(rows)]


def _islands(rng: random.Random) -> list[list[Any]]:
    snake = ["1" * 15] + ["0" * 14 + "1", "1" * 15, "1" + "0" * 14] * 4 + ["1" * 15]
    out = [[["1" * 20] * 20], [["10" * 10, "01" * 10] * 5], [snake], [["1"]], [["0" * 30]], [["1", "0", "1", "1", "0", "1"]]]
    out += [[_grid(rng, rng.randint(1, 14), rng.randint(1, 14), rng.choice([0.3, 0.5, 0.6]), "1", "0")] for _ in range(6)]
    return out


def _paths(rng: random.Random) -> list[list[Any]]:
    maze = ["." * 12] + ["#" * 11 + ".", "." * 12, "." + "#" * 11, "." * 12] * 3
    out = [[maze], [["." * 20] * 15], [["#."] + [".."]], [[".."] + [".#"]], [["." * 30]], [["."] * 30],
           [["....", "###.", "#...", "#.##", "#..."]]]  # fmt: skip
    for _ in range(7):
        grid = _grid(rng, rng.randint(1, 14), rng.randint(1, 14), rng.choice([0.1, 0.25, 0.35]), "#", ".")
        out.append([grid])
    return out


def _dags(rng: random.Random) -> list[list[Any]]:
    chain = [[i + 1, i] for i in range(11)]
    out = [[12, chain], [12, []], [10, [[0, 9], [9, 1], [1, 8], [8, 2]]], [8, [[i, i + 1] for i in range(7)] + [[7, 3]]],
           [3, [[1, 1]]], [9, [[8, 0], [7, 0], [6, 0], [5, 1]]]]  # fmt: skip
    for i in range(8):
        n = rng.randint(7, 25)
        perm = list(range(n))
        rng.shuffle(perm)
        pairs = sorted({tuple(sorted(rng.sample(range(n), 2))) for _ in range(rng.randint(0, 2 * n))})
        edges = [[perm[a], perm[b]] for a, b in pairs]
        if i % 3 == 2 and edges:  # close a cycle
            u, v = edges[rng.randrange(len(edges))]
            edges.append([v, u])
        rng.shuffle(edges)
        out.append([n, edges])
    return out


def _intervals(rng: random.Random) -> list[list[Any]]:
    out = [[[[i, i + 1] for i in range(0, 40, 2)]], [[[i, i] for i in range(30, 0, -1)]], [[[i, i + 1] for i in range(20)]],
           [[[0, 100]] + [[i, i + 3] for i in range(1, 90, 7)]], [[[5, 5], [5, 5], [1, 2]]], [[[-10, -5], [-6, 0], [1, 1]]]]  # fmt: skip
    for _ in range(7):
        iv = []
        for _ in range(rng.randint(7, 25)):
            s = rng.randint(-50, 50)
            iv.append([s, s + rng.choice([0, 1, 2, 5, 10])])
        out.append([iv])
    return out


def _perm_strings(rng: random.Random) -> list[list[Any]]:
    out = [["abcdef"], ["aaaaaa"], ["aabbcc"], ["fedcba"], ["aaaaab"], ["abab"], ["zyx"], ["baaaaa"]]
    out += [["".join(rng.choice("abcd") for _ in range(rng.randint(4, 6)))] for _ in range(4)]
    return out


def _string_pairs(alphabet: str, cases: list[list[str]]) -> Inputs:
    def gen(rng: random.Random) -> list[list[Any]]:
        out = [list(c) for c in cases]
        for _ in range(6):
            out.append(["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(2)])
        return out

    return gen


# Task id -> the inputs its prompt allows; every bundled task has one (a test checks it).
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
    "collatz-steps": _ints(1, 10**12, [3, 7, 871, 77031, 837799, 8400511, 2**40, *_COLLATZ_PAST_2_53]),
    "perfect-number": _ints(1, 10**8, [2, 8128, 8127, 8129, 33550336, 33550337, 120, 945]),
    "int-sqrt": _ints(0, 2**106, _ISQRT_EDGES),
    "binary-string": _ints(0, 2**90, [3, 2**53, 2**53 + 1, 2**64 - 1, 2**64]),
    "from-binary": _binary_strings,
    "roman-numeral": _ints(1, 3999, [2, 3, 5, 40, 44, 90, 400, 444, 900, 949, 1000, 3888]),
    "from-roman": _romans,
    "triangle-number-index": _union(_ints(1, 10**30, [4, 5, 6, 7, 5050, 5049, 10**18, 2**53 * (2**53 + 1) // 2 + 1]),
                                    _near_triangles),
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
    # Strings: the cases a loop or a shortcut gets wrong, then seeded random ones over the alphabet the prompt allows.
    "first-primes": _ints(0, 300, [0, 1, 2, 7, 8, 100, 300], n=4),
    "reverse-string": _text(_PRINTABLE, ["", " ", "ab" * 20 + "c", "a\tb\nc", "h\u00e9llo w\u00f6rld"]),
    "is-palindrome": _palindromes,
    "count-vowels": _text(_PRINTABLE, ["aeiouAEIOU" * 4, "y" * 10, "bcdfg"]),
    "word-count": _text("ab c\t\n  ", ["a " * 30, " \t\n ", "one\ttwo\nthree"]),
    "capitalize-words": _text("abcXYZ   ", ["a " * 20, "  double  spaced  ", "ALL CAPS HERE", "x"]),
    "char-frequency": _text("abcab 1!", ["a" * 40, "abcdefghij" * 3]),
    "anagram": _anagrams,
    "caesar-shift": _caesar,
    "run-length": _runs,
    "remove-duplicates-chars": _text("abcdefAB 1", ["a" * 30, "abcdefghij" * 3, "  "]),
    "is-pangram": _pangrams,
    "count-substring": _substrings,
    "snake-to-camel": _snake,
    "reverse-words": _text("ab c\t\n  ", ["  lead and trail  ", "x\ty\nz", "w " * 20]),
    "hamming-distance": _equal_strings,
    "vowel-positions": _text(_PRINTABLE, ["AEIOUaeiou" * 3, "queue" * 6]),
    "string-compress-check": _digit_strings,
    "edit-distance": _string_pairs("abc", [["a" * 30, ""], ["", "b" * 30], ["abc" * 10, "bca" * 10], ["ab" * 15, "ba" * 15]]),
    "lcs-length": _string_pairs("abc", [["a" * 30, "a" * 20], ["abc" * 10, "cba" * 10], ["ab" * 15, ""]]),
    "permutations-count": _perm_strings,
    # Lists, matrices, grids and graphs past any small loop bound, in the shapes the prompts promise.
    "second-largest": _lists(0, lambda rng: [[[]], [[3] * 20], [[-5, -5, -7]], [[2**70, 2**70 - 1]]], spread=10),
    "flatten": _list_of_lists,
    "rotate-list": _list_and_k(0, 10**9, [[[], 0], [[], 10**9], [[1], 10**9], [[1, 2], 10**9 + 1]]),
    "chunk-list": _list_and_k(1, 100, [[[], 1], [[1, 2, 3], 1], [[1, 2, 3], 3], [[1, 2, 3], 100]]),
    "count-evens": _lists(0, lambda rng: [[[]], [[2**64, -(2**64) - 1, 0]]]),
    "pairwise-diff": _lists(0, lambda rng: [[[]], [[2**64, -(2**64)]]]),
    "two-sum": _two_sum,
    "median": _lists(1, lambda rng: [[[1, 2]], [[-3, -4]], [[10**6, -(10**6), 7]]], spread=10**6),
    "transpose": _matrices,
    "matrix-multiply": _matrix_pairs,
    "bubble-sort": _lists(0, lambda rng: [[[]], [list(range(60, 0, -1))], [[0, 5, 5, -5, 2**70]]]),
    "lis-length": _lists(0, lambda rng: [[[]], [list(range(50))], [list(range(50, 0, -1))], [[1, 3, 2] * 15]]),
    "coin-change": _coins,
    "knapsack": _knapsack,
    "count-islands": _islands,
    "shortest-path-grid": _paths,
    "topological-order": _dags,
    "interval-merge": _intervals,
    "sieve-count": _ints(0, 10**5, [2, 3, 4, 24, 25, 48, 49, 121, 7919, 7920, 99991, 10**5], n=3),
    "prime-factors": _ints(2, 10**9, [3, 4, 2**29, 3**18, 999999937, 99991 * 9973, 31607 * 31627, 10**9], n=6),
    "climb-stairs": _ints(0, 500, [3, 4, 40, 91, 92, 93, 500], n=3),
    "pascal-row": _ints(0, 200, [2, 3, 7, 50, 67, 68, 200], n=3),
    "gray-code": _ints(0, 10, list(range(11)), n=0),
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


def visible_call(task: dict[str, Any]) -> list[Any]:
    """The arguments of the one call to the task's function in the print statement its prompt asks for.

    The prompt says "print the output of `print(solve(100))`"; the execution tier then checks that ``solve(100)``
    itself returns what the reference's does, so a program that prints the expected text without computing it
    fails the visible check (it used to pass it and tie with a real solution whenever the hidden tests were not run).
    """
    fn = task.get("function", "solve")
    match = re.search(r"print the output of `(print\(.*\))`", task["prompt"])
    if match is None:
        raise ValueError(f"task {task['id']}: the prompt states no `print(...)` to check")
    calls = [node for node in ast.walk(ast.parse(match.group(1)))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == fn]  # fmt: skip
    if len(calls) != 1 or calls[0].keywords:
        raise ValueError(f"task {task['id']}: the prompt's print statement must call {fn}() once, by position")
    return [ast.literal_eval(arg) for arg in calls[0].args]


def generate(tasks: list[dict[str, Any]]) -> dict[str, int]:
    """Add the generated cases (and the visible call) to ``tasks`` in place; how many each task gained."""
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
            if task.get("expected_stdout") is not None and not task.get("visible_tests"):
                args = visible_call(task)
                task["visible_tests"] = [{"args": args, "expected": json.loads(json.dumps(fn(*args)))}]
                added[task["id"]] += 1
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
