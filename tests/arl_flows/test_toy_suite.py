"""The core's own test suite (``tests/helpers/toy_suite.py``) keeps the suite and tier contracts it stands in for."""

from __future__ import annotations

from tests.helpers.toy_suite import ToyLength, ToySuite, ToyVowels, make_candidate

from arl_flows.suites.testing import SuiteContract
from verifiers import Candidate
from verifiers.testing import Case, VerifierContract

BAD = ("", "Hello", "a1", "x" * 25, "\u00e9t\u00e9")


class TestToySuite(SuiteContract):
    suite_class = ToySuite
    by_entry_point = False
    completions = [("banana", True), ("s k y", True), ("Sky", False), ("", False)]


class _ToyTier(VerifierContract):
    by_entry_point = False
    bad_payloads = BAD

    def make_candidate(self, case: Case) -> Candidate:
        return make_candidate(case.payload)


class TestToyLength(_ToyTier):
    verifier_class = ToyLength
    cases = [Case("banana", "ok", 6, 6), Case("sky", "ok", 3, 3), Case("Sky", "invalid")]


class TestToyVowels(_ToyTier):
    verifier_class = ToyVowels
    cases = [Case("banana", "ok", 3, 3), Case("sky", "ok", 0, 0), Case("sky2", "invalid")]
