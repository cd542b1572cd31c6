"""Simulation tier: sympy proves the answer right, ``simplify(lhs - rhs) == 0``, in a worker process.

``lhs - rhs`` is the answer minus ``d/dx expr`` (derivative tasks) or
``d/dx answer`` minus the integrand (antiderivative tasks; any constant of
integration is right). A zero residual is a proof: value 1.0. Anything else
is value 0.0, and that is weaker than it looks:

- the residual is a nonzero number (``values.decided``): the answer is wrong
  (off by a constant factor or term);
- the residual still holds x: simplify did not find zero. Usually the answer
  is wrong, but simplify cannot prove every identity, and it treats x as a
  complex number: ``2*log(x)`` for ``log(x**2)``, ``pi/2`` for
  ``asin(x) + acos(x)`` or ``atan(x) + atan(1/x)`` are right for the tasks'
  x > 0 and get 0.0 here. The numeric tier above decides those, and the run
  flags the pair as a tier disagreement.

``simplify`` is a heuristic search with no time bound of its own (seconds to
minutes on a large residual, native-speed loops that a thread cannot stop),
so it runs in an :class:`~verifiers.isolation.IsolatedVerifier` worker with a
hard timeout and a memory limit: an answer it cannot finish becomes a
``timeout`` verdict, charged the wall time it held a core, and the next tier
still decides it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field

from arl_math.candidates import SUITE
from arl_math.expressions import X, InvalidAnswer, parse_answer, sides
from storage.records import Status, Tier, Verdict
from verifiers import Candidate, CostModel
from verifiers.isolation import IsolatedVerifier, IsolationParams, TaskOutcome

__all__ = ["SymbolicEquivalence", "SymbolicParams", "symbolic_check"]


class SymbolicParams(IsolationParams):
    """Parameters of the symbolic tier (and its worker processes)."""

    timeout_s: float = Field(default=10.0, gt=0, description="Hard wall-clock limit per answer, in seconds.")
    memory_mb: int | None = Field(default=2048, ge=256, description="Address-space limit per worker process in MiB.")


def symbolic_check(job: dict[str, Any]) -> dict[str, Any]:
    """Worker function: simplify the residual of the answer; say whether it is zero, a nonzero number, or undecided."""
    import sympy as sp

    try:
        lhs, rhs = sides(job["kind"], job["expr"], job["answer"])
    except InvalidAnswer as exc:  # the answer's own doing (1/0 in it): its verdict, not a failure to verify
        return {"invalid": str(exc)}
    # The suite's tasks are real functions of x > 0: an answer sympy proves complex there (log(-x), sqrt(-x),
    # x**2 + log(-1)) is wrong, though its derivative may be exactly right.
    positive = sp.Symbol("x", positive=True)
    if parse_answer(job["answer"], evaluate=True).subs(X, positive).is_extended_real is False:
        return {"proved": False, "decided": True, "residual": "the answer is not real for x > 0"}
    residual = sp.simplify(lhs - rhs)
    proved = residual == 0
    decided = proved or bool(residual.is_number and residual.is_zero is False)
    return {"proved": bool(proved), "decided": decided, "residual": str(residual)[:300]}


class SymbolicEquivalence(IsolatedVerifier):
    """sympy.simplify(answer - reference) == 0: a proof when it says so, inconclusive when it does not."""

    name: ClassVar[str] = "sympy-simplify"
    tier: ClassVar[Tier] = Tier.simulation
    version: ClassVar[str] = "2"  # 2: an undefined answer is "invalid"; one not real for x > 0 is wrong
    suite: ClassVar[str | None] = SUITE
    Params: ClassVar[type[BaseModel]] = SymbolicParams
    work_function = staticmethod(symbolic_check)
    preload_modules: ClassVar[tuple[str, ...]] = ("sympy", "arl_math.symbolic")
    # Worker CPU seconds measured with measure.py (README, 400 answers): median 2 ms, mean 13 ms,
    # max 0.36 s (simplify's heuristics have a long tail); least-squares fit 2.1 ms per node.
    cost_model: ClassVar[CostModel] = CostModel(base=0.001, per_unit=0.002)

    def prepare(self, candidate: Candidate) -> dict[str, Any] | Verdict:
        try:
            parse_answer(candidate.payload)
        except InvalidAnswer as exc:
            return self.verdict(candidate, Status.invalid, feedback=str(exc))
        return {"kind": candidate.goal.get("kind"), "expr": candidate.goal.get("expr"), "answer": candidate.payload}

    def interpret(self, candidate: Candidate, result: dict[str, Any], outcome: TaskOutcome) -> Verdict:
        if "invalid" in result:
            return self.verdict(candidate, Status.invalid, feedback=str(result["invalid"]), cost_s=outcome.cpu_s, wall_s=outcome.wall_s)
        proved = bool(result["proved"])
        if proved:
            feedback = ""
        elif result["residual"].startswith("the answer is not real"):
            feedback = f"wrong: {result['residual']}"
        elif result["decided"]:
            feedback = f"wrong: the answer is off by the constant {result['residual']}"
        else:
            feedback = f"simplify(answer - reference) = {result['residual']}, not 0 (wrong, or an identity simplify cannot prove)"
        return self.verdict(
            candidate, Status.ok, value=1.0 if proved else 0.0,
            values={"proved": proved, "decided": bool(result["decided"]), "residual": result["residual"]},
            feedback=feedback, cost_s=outcome.cpu_s, wall_s=outcome.wall_s,
        )
