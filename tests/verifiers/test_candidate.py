"""Candidate's typed fields: what the core reads is a field; meta holds only a suite's extras."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from verifiers import Candidate, CostModel


def test_a_candidate_written_with_valid_and_size_in_meta_reads_back_typed() -> None:
    old = Candidate.model_validate({"key": "k", "suite": "s", "payload": "p", "meta": {"valid": False, "size": 7, "canonical": "C"}})
    assert (old.valid, old.size, old.meta) == (False, 7.0, {"canonical": "C"})
    both = Candidate.model_validate({"key": "k", "suite": "s", "payload": "p", "valid": True, "meta": {"valid": False}})
    assert both.valid is True and both.meta == {}  # the field wins over a leftover key
    assert Candidate.model_validate(old.model_dump()) == old


def test_defaults_and_types() -> None:
    bare = Candidate(key="k", suite="s", payload="p")
    assert bare.valid is True and bare.size is None
    with pytest.raises(ValidationError, match="valid"):
        Candidate(key="k", suite="s", payload="p", valid="maybe")


def test_the_cost_model_and_the_size_feature_read_the_size_field() -> None:
    from arl_flows.suites.molecules import EHTGapVerifier
    from verifiers.scheduler import size_features

    verifier = EHTGapVerifier()
    verifier.costs = CostModel(base=1.0, per_unit=0.5)
    sized, unsized = Candidate(key="a", suite="s", payload="p", size=4), Candidate(key="b", suite="s", payload="p")
    assert verifier.expected_cost(sized) == 3.0 and verifier.expected_cost(unsized) == 1.0
    assert size_features(sized).tolist() == [0.4] and size_features(unsized).tolist() == [0.0]
