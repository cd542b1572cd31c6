"""The contract kits fail a tier or a suite that breaks a promise (a kit that cannot fail checks nothing).

Each check of the kits is called directly on a deliberately broken plugin and must raise.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from arl_flows.config import build_config
from arl_flows.suites.molecules import make_candidate
from arl_flows.suites.molecules.suite import MoleculeSuite
from arl_flows.suites.testing import SuiteContract
from storage.records import Status, Tier, Verdict
from verifiers import Candidate, Verifier
from verifiers.testing import Case, VerifierContract

_calls = itertools.count()


class LaxParams(BaseModel):  # no extra="forbid": a typo in a run config would pass silently
    scale: float = 1.0


class SloppyTier(Verifier[LaxParams]):
    """Length of the payload, with the faults the kit looks for."""

    name: ClassVar[str] = "sloppy-length"
    tier: ClassVar[Tier] = Tier.fast
    version: ClassVar[str] = "1"
    Params: ClassVar[type[BaseModel]] = LaxParams

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        out = []
        for c in candidates:
            if not c.payload:
                raise ValueError("empty payload")  # bad input must be an invalid verdict, not an exception
            if c.payload == "CCCl":
                out.append(self.verdict(c, Status.invalid, feedback="chlorine"))
            else:  # a value that drifts on every call, and differs alone and in a batch
                out.append(self.verdict(c, Status.ok, value=len(c.payload) + next(_calls) + len(candidates)))
        return out


class SloppyTierKit(VerifierContract):  # not named Test*: pytest does not collect it, the tests below call it
    verifier_class = SloppyTier
    by_entry_point = False
    cases = [Case("CCO", "ok"), Case("CCCl", "invalid")]

    def make_candidate(self, case: Case) -> Candidate:
        return make_candidate(case.payload)


def test_the_tier_kit_fails_a_tier_that_breaks_its_promises() -> None:
    kit = SloppyTierKit()
    tier = SloppyTier()
    table = ([kit.make_candidate(c) for c in kit.cases], tier.verify_batch([kit.make_candidate(c) for c in kit.cases]))
    kit.test_metadata_is_what_the_registry_records()  # what it does keep passes
    kit.test_every_case_gives_one_verdict_with_its_status(tier, table)
    with pytest.raises(AssertionError, match="extra='forbid'"):
        kit.test_params_refuse_unknown_fields()
    with pytest.raises(ValueError, match="empty payload"):
        kit.test_bad_input_is_invalid_not_an_exception(tier)
    with pytest.raises(AssertionError):
        kit.test_a_repeat_gives_the_same_answers(tier, table)
    with pytest.raises(AssertionError):
        kit.test_a_batch_answers_as_its_candidates_one_by_one(tier, table)
    with pytest.raises(AssertionError, match="says why"):
        kit.test_only_ok_carries_a_value(
            (table[0], [table[1][0], table[1][1].model_copy(update={"feedback": ""})])
        )


class DriftingKeySuite(MoleculeSuite):
    """Keys with a counter in them (the verdict cache would never hit), and every candidate claimed valid."""

    def completion(self, prompt: Any, text: str) -> Any:
        candidate, answer, turns = super().completion(prompt, text)
        claim = {"valid": True} if "valid" in Candidate.model_fields else {"meta": candidate.meta | {"valid": True}}
        return candidate.model_copy(update={"key": f"{candidate.key}:{next(_calls)}", **claim}), answer, turns


class DriftingKeySuiteKit(SuiteContract):
    suite_class = DriftingKeySuite
    completions = [("O", True), ("N", True), ("C1CC", False)]


def test_the_suite_kit_fails_a_suite_whose_keys_drift() -> None:
    kit = DriftingKeySuiteKit()
    suite = DriftingKeySuite(build_config({"suite": "molecules"}))
    prompt = suite.prompts(0)[0]
    written = (prompt, [suite.completion(prompt, text) for text, _ in kit.completions])
    kit.test_prompts_are_non_empty(suite)  # what it does keep passes
    with pytest.raises(AssertionError):
        kit.test_keys_are_stable(suite, written)
    with pytest.raises(AssertionError):
        kit.test_a_completion_is_a_typed_candidate(suite, written)
