"""The example tiers pass the tier contract kit (``verifiers.testing``), as a plugin author's would.

The examples are not installed in the test environment (``test_math_suite.py`` and
``tests/verifiers/test_verifier_registry.py`` install them), so the kit's entry-point check is off and
each class is imported once its folder is on ``sys.path``.
"""

from __future__ import annotations

from typing import Any

import pytest

from verifiers import Candidate
from verifiers.testing import Case, VerifierContract

pytestmark = pytest.mark.usefixtures("math_suite_on_path", "custom_tier_on_path")

D, I = "derivative", "antiderivative"
DX = {"kind": D, "expr": "x**2*sin(x)"}
INT = {"kind": I, "expr": "cos(x)"}
# Right, rewritten, wrong, and unparsable answers to two tasks; each tier's expected answer per row.
MATH_ROWS = [
    ("2*x*sin(x)+x**2*cos(x)", DX, ("ok", 1.0), ("ok", 1.0), ("ok", 1.0)),
    ("x*(2*sin(x)+x*cos(x))", DX, ("ok", 1.0), ("ok", 1.0), ("ok", 1.0)),
    ("2*x*sin(x)", DX, ("ok", 1.0), ("ok", 0.0), ("ok", 0.0)),
    ("sin(x)+7", INT, ("ok", 1.0), ("ok", 1.0), ("ok", 1.0)),
    ("2*log(x)+2", {"kind": D, "expr": "x*log(x**2)"}, ("ok", 1.0), ("ok", 0.0), ("ok", 1.0)),  # simplify cannot prove it
    ("2*x*sin(x", DX, ("invalid",), ("invalid",), ("invalid",)),
    ("__import__('os').system('true')", DX, ("invalid",), ("invalid",), ("invalid",)),
]
BAD_MATH = ("", "\u2603\x00", "9**9**9", "x" * 300, "y+1")


def _math_cases(column: int) -> list[Case]:
    out = []
    for answer, goal, *expected in MATH_ROWS:
        status, *value = expected[column]
        out.append(Case(answer, status, *(value * 2), goal=goal))
    return out


class _MathTier(VerifierContract):
    by_entry_point = False
    bad_payloads = BAD_MATH
    module, attr = "", ""

    @property
    def verifier_class(self) -> Any:  # imported once the example is on sys.path
        import importlib

        return getattr(importlib.import_module(self.module), self.attr)

    def make_candidate(self, case: Case) -> Candidate:
        from arl_math.candidates import make_candidate

        return make_candidate(case.payload, case.goal or DX)


class TestMathFormat(_MathTier):
    module, attr = "arl_math.fast", "MathFormat"
    cases = _math_cases(0)


@pytest.mark.slow(seconds=1)  # per test; the class starts a worker pool that imports sympy: about 6 s
class TestSympySimplify(_MathTier):
    module, attr = "arl_math.symbolic", "SymbolicEquivalence"
    cases = _math_cases(1)


@pytest.mark.slow(seconds=1)  # per test; the class starts a worker pool that imports sympy and mpmath: about 6 s
class TestMpmathPoints(_MathTier):
    module, attr = "arl_math.numeric", "NumericAgreement"
    cases = _math_cases(2)


class TestCrippenLogP(VerifierContract):
    """examples/custom_tier: Crippen logP (ethanol -0.0014, benzene 1.6866 by RDKit's Crippen table)."""

    by_entry_point = False
    cases = [Case("CCO", "ok", -0.1, 0.1), Case("c1ccccc1", "ok", 1.6, 1.8), Case("CCCl", "invalid"), Case("CC.O", "invalid")]
    bad_payloads = ("", "\u2603\x00", "C" * 10_000)

    @property
    def verifier_class(self) -> Any:
        from arl_custom_tier.logp import CrippenLogPVerifier

        return CrippenLogPVerifier

    def make_candidate(self, case: Case) -> Candidate:
        from arl_flows.suites.molecules import make_candidate

        return make_candidate(case.payload, case.goal)
