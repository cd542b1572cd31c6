"""High-fidelity tier: the answer and the reference agree to 40 digits at 20 random points (mpmath, 50 digits).

Two functions that agree at many random points of an interval are equal on
it with high probability (the idea behind polynomial identity testing,
Schwartz 1980 and Zippel 1979), and this test does not depend on finding a
proof: it decides the identities simplify cannot (``asin(x) + acos(x)`` is
``pi/2``) and answers simplify times out on. Points are drawn uniformly from
``[low, high]`` (default 0.25..3, where every task of the suite is real),
seeded by the candidate key so a verdict is reproducible. A point where
either side is singular or undefined (``1/(x - 1)`` at 1, ``log`` of 0) is
skipped and another drawn; with fewer than ``min_points`` usable points the
verdict is ``failed`` (could not verify), never a 0.

The value is the share of usable points where ``|lhs - rhs| <= 10**-tolerance_digits
* max(1, |rhs|)``: 1.0 means equal on the interval. Where it disagrees with
the symbolic tier, in both directions:

- identities true only for x > 0 (``log(x**2) = 2*log(x)``,
  ``sqrt(x**2) = x``) pass here and are not proved by simplify, which treats
  x as complex: the numeric tier checks the tasks' domain, simplify all of C;
- catastrophic cancellation past the working precision: ``(exp(200*x) + 1)**2
  - exp(400*x) - 2*exp(200*x)`` is 1 and simplify proves it, but at 50 digits
  it evaluates to 0 wherever ``exp(400*x) > 1e50``. A point that disagrees is
  therefore evaluated again at 4x the digits (and the rest of the points at
  that precision if that settles it), which fixes ``exp(60*x)`` versions of
  it; cancellation beyond even that (here ``exp(400*x) > 1e200``, x > 1.15)
  still reads as a difference.
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

from pydantic import BaseModel, Field, model_validator

from arl_math.candidates import SUITE
from arl_math.expressions import InvalidAnswer, parse_answer, sides
from storage.records import Status, Tier, Verdict
from verifiers import Candidate, CostModel
from verifiers.isolation import IsolatedVerifier, IsolationParams, TaskOutcome

__all__ = ["NumericAgreement", "NumericParams", "numeric_check"]


class NumericParams(IsolationParams):
    """Parameters of the numeric tier (and its worker processes)."""

    digits: int = Field(default=50, ge=15, le=1000, description="Working precision of mpmath, in decimal digits.")
    tolerance_digits: int = Field(default=40, ge=1, le=990, description="Agreement means a relative difference below 10**-tolerance_digits.")
    points: int = Field(default=20, ge=1, le=1000, description="Points to compare the two sides at.")
    min_points: int = Field(default=10, ge=1, le=1000, description="Fewer usable (non-singular) points than this: 'failed'.")
    max_draws: int = Field(default=60, ge=1, le=10_000, description="Points drawn at most, singular ones included.")
    low: float = Field(default=0.25, description="Lower end of the sampling interval of x.")
    high: float = Field(default=3.0, description="Upper end of the sampling interval of x.")
    timeout_s: float = Field(default=10.0, gt=0, description="Hard wall-clock limit per answer, in seconds.")
    memory_mb: int | None = Field(default=2048, ge=256, description="Address-space limit per worker process in MiB.")

    @model_validator(mode="after")
    def _consistent(self) -> NumericParams:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high}); swap them")
        if self.tolerance_digits >= self.digits:
            raise ValueError(f"tolerance_digits ({self.tolerance_digits}) must be below digits ({self.digits})")
        if not self.min_points <= self.points <= self.max_draws:
            raise ValueError("need min_points <= points <= max_draws")
        return self


def numeric_check(job: dict[str, Any]) -> dict[str, Any]:
    """Worker function: compare both sides at random points with mpmath; count agreements and singular points."""
    import random

    import mpmath
    import sympy as sp

    from arl_math.expressions import X

    lhs, rhs = sides(job["kind"], job["expr"], job["answer"])
    if any(side.has(sp.zoo, sp.nan, sp.oo, -sp.oo) for side in (lhs, rhs)):
        raise ValueError("no points could be evaluated: a side is undefined everywhere (e.g. a division by 0)")
    f = sp.lambdify(X, lhs, modules="mpmath")
    g = sp.lambdify(X, rhs, modules="mpmath")
    rng = random.Random(job["seed"])
    digits = job["digits"]
    agree = evaluated = skipped = 0
    worst = 0.0
    tolerance = mpmath.mpf(10) ** -job["tolerance_digits"]
    for _ in range(job["max_draws"]):
        if evaluated >= job["points"]:
            break
        fraction = mpmath.mpf(rng.getrandbits(160)) / mpmath.mpf(2) ** 160
        diff = _relative_difference(f, g, job["low"], job["high"], fraction, digits)
        if diff is not None and diff > tolerance and digits == job["digits"]:
            # Cancellation past the working precision looks like a difference: retry once at 4x the digits.
            retry = _relative_difference(f, g, job["low"], job["high"], fraction, 4 * digits)
            if retry is not None and retry <= tolerance:
                digits, diff = 4 * digits, retry
        if diff is None:
            skipped += 1
            continue
        evaluated += 1
        worst = max(worst, float(min(diff, mpmath.mpf(10) ** 300)))
        agree += bool(diff <= tolerance)
    if evaluated < job["min_points"]:
        raise ValueError(f"only {evaluated} of {evaluated + skipped} points could be evaluated (singular or undefined elsewhere)")
    return {"points": evaluated, "agree": agree, "skipped": skipped, "max_rel_diff": worst, "digits": digits}


def _relative_difference(f: Any, g: Any, low: float, high: float, fraction: Any, digits: int) -> Any:
    """``|f(x) - g(x)| / max(1, |g(x)|)`` at ``x = low + fraction * (high - low)`` with ``digits`` digits; None if singular."""
    import mpmath

    with mpmath.workdps(digits):
        point = mpmath.mpf(low) + (mpmath.mpf(high) - mpmath.mpf(low)) * fraction
        try:
            a, b = mpmath.mpmathify(f(point)), mpmath.mpmathify(g(point))
        except (ZeroDivisionError, ValueError, OverflowError, TypeError):
            return None
        if not (mpmath.isfinite(a) and mpmath.isfinite(b)):
            return None
        return abs(a - b) / max(mpmath.mpf(1), abs(b))


class NumericAgreement(IsolatedVerifier):
    """Answer and reference agree to 40 digits at 20 random points (mpmath at 50 digits), singular points skipped."""

    name: ClassVar[str] = "mpmath-points"
    tier: ClassVar[Tier] = Tier.high_fidelity
    version: ClassVar[str] = "1"
    suite: ClassVar[str | None] = SUITE
    Params: ClassVar[type[BaseModel]] = NumericParams
    work_function = staticmethod(numeric_check)
    preload_modules: ClassVar[tuple[str, ...]] = ("sympy", "mpmath", "arl_math.numeric")
    # Worker CPU seconds measured with measure.py (README, 400 answers) at 20 points and 50 digits:
    # median 4.6 ms, mean 5.1 ms, max 35 ms (predictable, unlike simplify); fit 1.3 ms + 0.22 ms per node.
    cost_model: ClassVar[CostModel] = CostModel(base=0.0013, per_unit=0.00022)

    def prepare(self, candidate: Candidate) -> dict[str, Any] | Verdict:
        try:
            parse_answer(candidate.payload)
        except InvalidAnswer as exc:
            return self.verdict(candidate, Status.invalid, feedback=str(exc))
        p = self.params
        return {
            "kind": candidate.goal.get("kind"), "expr": candidate.goal.get("expr"), "answer": candidate.payload,
            "seed": int(hashlib.sha256(candidate.key.encode()).hexdigest()[:12], 16),
            "digits": p.digits, "tolerance_digits": p.tolerance_digits, "points": p.points,
            "min_points": p.min_points, "max_draws": p.max_draws, "low": p.low, "high": p.high,
        }

    def interpret(self, candidate: Candidate, result: dict[str, Any], outcome: TaskOutcome) -> Verdict:
        share = result["agree"] / result["points"]
        feedback = "" if share == 1.0 else (
            f"wrong: differs from the reference at {result['points'] - result['agree']} of {result['points']} points "
            f"in [{self.params.low:g}, {self.params.high:g}] (largest relative difference {result['max_rel_diff']:.3g})"
        )
        return self.verdict(
            candidate, Status.ok, value=share, values=dict(result), feedback=feedback,
            cost_s=outcome.cpu_s, wall_s=outcome.wall_s,
        )
