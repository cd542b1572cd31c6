"""The code suite's three tiers pass the tier contract kit (``verifiers.testing``); task 'sum-to-n' prints 5050."""

from __future__ import annotations

from arl_flows.suites.code import CodeExecution, CodeFormat, CodeTests, make_candidate
from verifiers import Candidate
from verifiers.testing import Case, VerifierContract

LIMITS = {"cpu_s": 1, "wall_s": 3}
GOOD = "def solve(n):\n    return n * (n + 1) // 2\nprint(solve(100))"


def answer(code: str) -> str:
    return f"<think>plan</think>\n<code>\n{code}\n</code>"


# Right, wrong, crashing, and refused before running: the same table for every tier.
CASES_BY_TIER = {
    "code-format": [Case(answer(GOOD), "ok", 1.0, 1.0), Case(answer("print(5051)"), "ok", 1.0, 1.0)],
    "code-exec": [Case(answer(GOOD), "ok", 1.0, 1.0), Case(answer("print(5051)"), "ok", 0.0, 0.0)],
    "code-tests": [Case(answer(GOOD), "ok", 1.0, 1.0), Case(answer("def solve(n):\n    return n * n\nprint(5050)"), "ok", 0.0, 0.0)],
}
REFUSED = [Case(answer("import os\nprint(5050)"), "invalid"), Case("<code>print(1)</code>", "invalid"), Case(answer("print(1"), "invalid")]
BAD = ("", "\u2603\x00<code>", "<think>x</think><code>" + "x = 1\n" * 1000 + "</code>")


class _CodeTier(VerifierContract):
    bad_payloads = BAD

    def make_candidate(self, case: Case) -> Candidate:
        return make_candidate("sum-to-n", case.payload)


class TestCodeFormat(_CodeTier):
    verifier_class = CodeFormat
    cases = [*CASES_BY_TIER["code-format"], *REFUSED]


class TestCodeExecution(_CodeTier):
    verifier_class = CodeExecution
    params = {"limits": LIMITS}
    cases = [*CASES_BY_TIER["code-exec"], Case(answer("print(1 / 0)"), "ok", 0.0, 0.0), *REFUSED]


class TestCodeTests(_CodeTier):
    verifier_class = CodeTests
    params = {"limits": LIMITS}
    cases = [*CASES_BY_TIER["code-tests"], Case(answer("print(5050)"), "ok", 0.0, 0.0), *REFUSED]
