"""The domain records: what a verdict, turn or number may hold, before any ledger sees it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from storage.records import Turn, TurnKind, Verdict


def test_non_ok_verdict_cannot_carry_a_value() -> None:
    with pytest.raises(ValidationError, match="could not verify"):
        Verdict(candidate_key="k", verifier="v", version="1", params_hash="p", tier="fast", status="failed", value=0.0)


def test_turn_trainable_marks_policy_tokens() -> None:
    assert Turn(role="assistant", content="x").trainable
    assert not Turn(role="tool", content="x", kind=TurnKind.observation).trainable
    assert not Turn(role="user", content="x").trainable


@pytest.mark.parametrize("field", ["value", "uncertainty"])
@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_verdict_numbers_must_be_finite(field: str, number: float) -> None:
    """NaN is "could not verify" (a failed verdict), and SQLite would read it back as NULL."""
    with pytest.raises(ValidationError, match="finite number"):
        Verdict(candidate_key="k", verifier="v", version="1", params_hash="p", tier="fast", status="ok", **{field: number})
