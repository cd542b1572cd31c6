"""The example suite (examples/math_suite) passes the suite contract kit, as a plugin author's would.

It is not installed in the test environment (``test_math_suite.py`` installs it), so the kit names it by
``module:Class`` and registers its three tiers itself.
"""

from __future__ import annotations

from typing import Any

import pytest

from arl_flows.suites.testing import SuiteContract

pytestmark = pytest.mark.usefixtures("math_suite_on_path")


class TestMathSuite(SuiteContract):
    by_entry_point = False
    options = {"tasks": 4}
    # The first prompt's task is drawn by the suite; any parsable expression is a well-formed answer to it.
    completions = [("2*x*sin(x)+x**2*cos(x)", True), ("2 * x", True), ("2*x*sin(x", False), ("y+1", False)]

    @property
    def suite_class(self) -> Any:  # imported once the example is on sys.path
        from arl_math.suite import MathSuite

        return MathSuite

    def tier_classes(self) -> list[Any]:
        from arl_math.fast import MathFormat
        from arl_math.numeric import NumericAgreement
        from arl_math.symbolic import SymbolicEquivalence

        return [MathFormat, SymbolicEquivalence, NumericAgreement]
