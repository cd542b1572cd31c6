"""The code suite passes the suite contract kit (``arl_flows.suites.testing``)."""

from __future__ import annotations

import pytest

from arl_flows.suites.code.suite import CodeSuite
from arl_flows.suites.testing import SuiteContract
from verifiers import Candidate

GOOD = "def solve(n):\n    return n * (n + 1) // 2\nprint(solve(100))"


class TestCodeSuite(SuiteContract):
    suite_class = CodeSuite
    completions = [
        (f"<think>plan</think>\n<code>\n{GOOD}\n</code>", True),
        ("<think>plan</think>\n<code>\nprint(5051)\n</code>", True),
        ("<code>print(1)</code>", False),  # no <think>: the format tier refuses it
    ]

    @pytest.mark.xfail(
        "valid" not in Candidate.model_fields,
        strict=True,
        reason="before Candidate has a typed 'valid', the code suite's candidates carry no validity "
        "(meta['valid'] unset): a training run reports 0% validity",
    )
    def test_a_completion_is_a_typed_candidate(self, suite, written) -> None:  # noqa: ANN001
        super().test_a_completion_is_a_typed_candidate(suite, written)
