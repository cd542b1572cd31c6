"""Fast tier: the answer parses, safely, into a bounded expression in x.

Microseconds to a millisecond, in-process: nothing is evaluated (see
``expressions.parse_answer``: a closed token grammar and a parser of its
own that builds the unevaluated tree, linear in the bounded text), so no
answer can hang or run code here, and what it admits is exactly the tree the
other tiers evaluate. Its verdict
is ``invalid`` with the reason (unknown name, unbalanced parenthesis, too
large) as the policy's feedback, or ``ok`` with value 1.0 and the answer's
size. It says nothing about correctness: that is the next two tiers' job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from arl_math.candidates import SUITE
from arl_math.expressions import AnswerLimits, InvalidAnswer, parse_answer, tree_size
from storage.records import Status, Tier, Verdict
from verifiers import Candidate, CostModel, Verifier

__all__ = ["MathFormat", "MathFormatParams"]


class MathFormatParams(BaseModel):
    """Limits of the format tier."""

    model_config = ConfigDict(extra="forbid")

    max_chars: int = Field(default=200, ge=1, le=10_000, description="Longest answer, in characters.")
    max_nodes: int = Field(default=200, ge=1, le=10_000, description="Most nodes of the answer's expression tree.")
    max_exponent: int = Field(default=64, ge=1, le=1000, description="Largest numeric exponent (x**64).")

    def limits(self) -> AnswerLimits:
        return AnswerLimits(max_chars=self.max_chars, max_nodes=self.max_nodes, max_exponent=self.max_exponent)


class MathFormat(Verifier[MathFormatParams]):
    """The answer parses into a bounded expression in x (closed grammar, nothing evaluated)."""

    name: ClassVar[str] = "math-format"
    tier: ClassVar[Tier] = Tier.fast
    version: ClassVar[str] = "3"  # 3: ASCII digits only (another script's digits were read as 2)
    suite: ClassVar[str | None] = SUITE
    Params: ClassVar[type[BaseModel]] = MathFormatParams
    # CPU seconds measured with measure.py (README, 400 answers): median under 0.1 ms, max under 1 ms; 10 us per node kept.
    cost_model: ClassVar[CostModel] = CostModel(base=0.0001, per_unit=0.00001)

    def verify_batch(self, candidates: Sequence[Candidate]) -> list[Verdict]:
        return [self._verify_one(c) for c in candidates]

    def _verify_one(self, candidate: Candidate) -> Verdict:
        with self.timed() as t:
            try:
                expr = parse_answer(candidate.payload, self.params.limits())
                problem = ""
            except InvalidAnswer as exc:
                expr, problem = None, str(exc)
        if expr is None:
            return self.verdict(candidate, Status.invalid, feedback=problem, cost_s=t.cpu_s, wall_s=t.wall_s)
        return self.verdict(
            candidate, Status.ok, value=1.0, values={"nodes": tree_size(expr)}, cost_s=t.cpu_s, wall_s=t.wall_s
        )
