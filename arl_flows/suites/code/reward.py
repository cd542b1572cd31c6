"""Reward composition for the code suite.

The shape follows the usual agentic-RL reward engine: a format gate, then
additive parts for running and for being right, then shaping penalties.

    format failure                          -> format_failure (-1), stop
    valid format                            +format_ok       (+0.2)
    final turn ran cleanly / crashed        +exec_success (+0.3) / +exec_error (-0.5)
    outcome correct / wrong                 +correct (+1.0) / +wrong (-0.2)
    length past a token budget              cosine penalty, 0 .. -length_penalty_max
    k-th repeat of the same code turn       -k * repeat_penalty (growing)
    process                                 +process_lambda * mean(per-turn process rewards)

The outcome comes from the hidden tests when they answered ``ok``. When no
hidden-test verdict was asked for, a passed visible check (stdout or visible
calls) is not taken as a pass: the outcome part is the expectation under
``unverified_pass_rate`` and the reward carries the std of what was not run
(``CodeReward.std``), so a program that only prints the expected output never
ranks with a verified one; a failed visible check is ``wrong``. A tier
that could not verify (``failed``, ``timeout``, ``pending``) contributes
nothing and marks the reward ``complete=False``: "could not verify" is not a
score of 0. When the hidden tests could not verify, the stdout comparison
never stands in for them with credit (a program that only prints the expected
output must not earn the hidden-test reward): the outcome part is ``wrong``
if the stdout was wrong and absent otherwise. A program that
loops or crashes is an ``ok`` verdict with the ``exec_error`` part, so
looping never escapes a penalty.

Process rewards: the execution tier runs every code turn; turn t earns
``exec_success`` if it ran cleanly and ``exec_error`` otherwise. They are
returned per turn (``per_turn``) so training can give each turn its own
advantage, and their mean enters every trajectory's total, single-turn ones
included. Two choices here came out of the scripted training test: a
process term only for multi-turn answers let "crash, then fix" outscore a
clean first answer, and crediting a turn's stdout match again in its process
reward paid twice for correctness (the outcome term already does) and
raised hard-coded prints that the hidden tests reject.

The cosine length schedule is the one of Yeo et al. 2025, "Demystifying Long
Chain-of-Thought Reasoning in LLMs" (arXiv:2502.03373), used here only as a
penalty past the budget.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from storage.records import Status, Tier, Verdict
from arl_flows.suites.code.format import FormatError, parse_answer

__all__ = ["CodeReward", "RewardWeights", "code_reward", "cosine_length_penalty", "repeat_penalty"]


class RewardWeights(BaseModel):
    """Weights of the code reward; a weight of 0 turns a part into a logged metric."""

    model_config = ConfigDict(extra="forbid")

    format_failure: float = Field(default=-1.0, description="Total reward of a malformed or policy-breaking answer.")
    format_ok: float = Field(default=0.2, description="Added for a well-formed answer.")
    exec_success: float = Field(default=0.3, description="Added when the final program exits cleanly.")
    exec_error: float = Field(default=-0.5, description="Added when it crashes, times out or floods output.")
    correct: float = Field(default=1.0, description="Added when the outcome is correct.")
    wrong: float = Field(default=-0.2, description="Added when the outcome is wrong.")
    length_budget_tokens: int = Field(default=512, ge=0, description="Completion tokens allowed before any penalty.")
    length_max_tokens: int = Field(default=1024, ge=1, description="Tokens at which the length penalty is full.")
    length_penalty_max: float = Field(default=0.5, ge=0.0, description="Largest length penalty (its magnitude).")
    repeat_penalty: float = Field(default=0.1, ge=0.0, description="The k-th repeat of an identical code turn costs k times this.")
    process_lambda: float = Field(default=0.5, ge=0.0, description="Weight of the mean per-turn process reward.")
    unverified_pass_rate: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Chance that the hidden tests pass a program whose visible check passed, used while the hidden "
        "tests have not run: the outcome part is then its expectation and the reward carries its std.",
    )

    @model_validator(mode="after")
    def _budget_order(self) -> RewardWeights:
        if self.length_max_tokens <= self.length_budget_tokens:
            raise ValueError(
                f"length_max_tokens ({self.length_max_tokens}) must exceed length_budget_tokens "
                f"({self.length_budget_tokens}); raise length_max_tokens"
            )
        return self


class CodeReward(BaseModel):
    """One trajectory's reward, its parts and its per-turn process rewards."""

    total: float
    components: dict[str, float] = Field(description="Named parts; they sum to ``total``.")
    per_turn: list[float] = Field(default_factory=list, description="Process reward of each code turn, in order.")
    stopped: bool = Field(default=False, description="The format gate failed; nothing else was added.")
    complete: bool = Field(default=True, description="False when a needed tier could not verify.")
    fidelity: Tier | None = Field(default=None, description="Tier the outcome came from.")
    std: float = Field(default=0.0, ge=0.0, description="Uncertainty of ``total`` from the hidden tests not yet run.")


def cosine_length_penalty(tokens: int, budget: int, max_tokens: int, max_penalty: float) -> float:
    """0 up to ``budget``, then a half-cosine ramp down to ``-max_penalty`` at ``max_tokens`` (flat after)."""
    if tokens <= budget:
        return 0.0
    frac = min((tokens - budget) / (max_tokens - budget), 1.0)
    return -max_penalty * (1.0 - math.cos(math.pi * frac)) / 2.0


def repeat_penalty(calls: Sequence[str], weight: float) -> float:
    """``-weight * sum(k)`` over repeats, where the k-th repeat of an identical call costs k."""
    seen: Counter[str] = Counter()
    total = 0.0
    for call in calls:
        total += seen[call] * weight
        seen[call] += 1
    return -total if total else 0.0


def _by_tier(verdicts: Sequence[Verdict], tier: Tier) -> Verdict | None:
    found = [v for v in verdicts if v.tier == tier]
    return found[-1] if found else None


def code_reward(
    answer_text: str,
    verdicts: Sequence[Verdict],
    *,
    completion_tokens: int | None = None,
    weights: RewardWeights | None = None,
) -> CodeReward:
    """Compose the reward of one trajectory from its code-suite verdicts.

    ``completion_tokens`` should be the policy's real token count; without it
    a rough 4-characters-per-token estimate is used.
    """
    w = weights or RewardWeights()
    fast = _by_tier(verdicts, Tier.fast)
    execution = _by_tier(verdicts, Tier.simulation)
    tests = _by_tier(verdicts, Tier.high_fidelity)

    parsed = parse_answer(answer_text)
    gate_failed = isinstance(parsed, FormatError) or any(
        v is not None and v.status == Status.invalid for v in (fast, execution, tests)
    )
    if gate_failed:
        return CodeReward(total=w.format_failure, components={"format": w.format_failure}, stopped=True)
    assert not isinstance(parsed, FormatError)

    components: dict[str, float] = {"format": w.format_ok}
    complete = fast is not None and fast.status == Status.ok
    per_turn: list[float] = []

    if execution is not None and execution.status == Status.ok:
        turns = execution.values.get("turns") or []
        for turn in turns:
            per_turn.append(w.exec_success if turn.get("outcome") == "success" else w.exec_error)
        components["execution"] = w.exec_success if execution.values.get("exit") == "success" else w.exec_error
    else:
        complete = False

    fidelity: Tier | None = None
    outcome_std = 0.0
    if tests is not None and tests.status == Status.ok:
        components["outcome"] = w.correct if tests.value == 1.0 else w.wrong
        fidelity = Tier.high_fidelity
    elif tests is not None:
        # The hidden tests were asked for and could not verify. A matching stdout is no evidence of passing them
        # (a hard-coded print matches), so the lower tier may only take credit away: `wrong` if its stdout was
        # wrong, else nothing.
        complete = False
        if execution is not None and execution.status == Status.ok and execution.value != 1.0:
            components["outcome"] = min(w.wrong, 0.0)
    elif execution is not None and execution.status == Status.ok:
        # The hidden tests were never asked (a small budget, or a ladder without them). A passed visible check is
        # no proof of passing them (a hard-coded print passes it), so the outcome is their expectation, with its std.
        if execution.value == 1.0:
            p = w.unverified_pass_rate
            components["outcome"] = p * w.correct + (1.0 - p) * w.wrong
            outcome_std = abs(w.correct - w.wrong) * math.sqrt(p * (1.0 - p))
        else:
            components["outcome"] = w.wrong
        fidelity = Tier.simulation
    else:
        complete = False

    tokens = completion_tokens if completion_tokens is not None else len(answer_text) // 4
    components["length"] = cosine_length_penalty(tokens, w.length_budget_tokens, w.length_max_tokens, w.length_penalty_max)
    components["repeat"] = repeat_penalty(parsed.codes, w.repeat_penalty)
    if per_turn:
        components["process"] = w.process_lambda * sum(per_turn) / len(per_turn)
    return CodeReward(
        total=sum(components.values()),
        components=components,
        per_turn=per_turn,
        complete=complete,
        fidelity=fidelity,
        std=outcome_std,
    )
