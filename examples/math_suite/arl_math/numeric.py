"""High-fidelity tier: the answer and the reference agree at 20 points of the tasks' domain (mpmath, 50+ digits).

Two functions that agree at many random points of an interval are equal on
it with high probability (the idea behind polynomial identity testing,
Schwartz 1980 and Zippel 1979), and this test does not depend on finding a
proof: it decides the identities simplify cannot (``asin(x) + acos(x)`` is
``pi/2``) and answers simplify times out on. The points cover the whole
declared domain ``[low, high]`` (default ``2**-10 .. 2**10``; every task of
the suite is real on x > 0): its two ends first, then points drawn
log-uniformly (every scale of x is as likely), seeded by the candidate key so
a verdict is reproducible. A point where either side is singular or
undefined (``1/(x - 1)`` at 1, ``log`` of 0) is skipped and another drawn;
with fewer than ``min_points`` usable points the verdict is ``failed`` (could
not verify), never a 0.

What is compared is the residual ``lhs - rhs`` as sympy builds it, which
cancels the terms both sides share: ``reference + c`` leaves exactly ``c``.
A constant that sympy proves nonzero differs everywhere, with no points
needed; a residual of 0 agrees everywhere, and still goes through the
points, where the answer itself must be real and finite wherever the task
is (``d/dx log(-x)`` is exactly ``1/x``). Otherwise no fixed tolerance
decides, since any fixed one is coarser than some constant the grammar can
write (``10**-45``, ``exp(-200)``): at each point the residual is evaluated
at two precisions, and it differs if it exceeds the difference of the two
(its own rounding error) and is not lost in the rounding of its largest
terms, however small it is; it agrees if it is zero within that error and
the error is below ``10**-tolerance_digits`` of the reference's size. The
working precision grows by the digits of the smallest constant in either
side, so a tiny constant is seen wherever it sits in the tree. A point that
is neither (catastrophic cancellation: ``(exp(200*x) + 1)**2 - exp(400*x) -
2*exp(200*x)`` is 1, yet at 50 digits it is noise wherever ``exp(400*x) >
1e50``) is evaluated again at 4x the digits and, if still open, is not used:
cancellation is "could not tell", never a difference. What no precision
here shows: a wrong term below ``10**-digits`` of the answer's size at every
point that has no small constant of its own (``exp(-10**8*x)`` added to a
rewritten reference; added to the reference as written, the cancellation
leaves it bare and it is seen).

The value is the share of usable points that agree: 1.0 means equal on the
domain. Identities true only for x > 0 (``log(x**2) = 2*log(x)``,
``sqrt(x**2) = x``) pass here and are not proved by simplify, which treats x
as complex: the run flags the pair as a tier disagreement.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, model_validator

from arl_math.candidates import SUITE
from arl_math.expressions import InvalidAnswer, parse_answer, sides
from storage.records import Status, Tier, Verdict
from verifiers import Candidate, CostModel
from verifiers.isolation import IsolatedVerifier, IsolationParams, TaskOutcome

__all__ = ["NumericAgreement", "NumericParams", "numeric_check"]


class NumericParams(IsolationParams):
    """Parameters of the numeric tier (and its worker processes)."""

    digits: int = Field(default=50, ge=15, le=1000, description="Working precision of mpmath, in decimal digits, before the answer's own constants are added (see max_digits).")
    tolerance_digits: int = Field(default=40, ge=1, le=990, description="A point whose difference is zero within its evaluation error agrees only if that error is below 10**-tolerance_digits of the scale; else it is evaluated again at 4x the digits.")
    max_digits: int = Field(default=2000, ge=15, le=20_000, description="Most digits the answer's constants may need (a constant of 1e-300 needs 300 more than 'digits'); beyond it the verdict is 'invalid' when the answer's own constants need them, else 'failed'.")
    points: int = Field(default=20, ge=1, le=1000, description="Points to compare the two sides at.")
    min_points: int = Field(default=10, ge=1, le=1000, description="Fewer usable (non-singular, decided) points than this: 'failed'.")
    max_draws: int = Field(default=60, ge=1, le=10_000, description="Points drawn at most, singular ones included.")
    low: float = Field(default=2.0**-10, description="Lower end of the tasks' domain of x; the first point drawn.")
    high: float = Field(default=2.0**10, description="Upper end of the tasks' domain of x; the second point drawn.")
    spacing: Literal["log", "linear"] = Field(default="log", description="How the other points spread over [low, high]: 'log' (every scale, needs low > 0) or 'linear'.")
    timeout_s: float = Field(default=10.0, gt=0, description="Hard wall-clock limit per answer, in seconds.")
    memory_mb: int | None = Field(default=2048, ge=256, description="Address-space limit per worker process in MiB.")

    @model_validator(mode="after")
    def _consistent(self) -> NumericParams:
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            raise ValueError("low and high must be finite numbers; write the domain's ends, e.g. low = 0.001, high = 1000")
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high}); swap them")
        if self.spacing == "log" and self.low <= 0:
            raise ValueError(f"spacing = 'log' needs low > 0 (got {self.low}); set a positive low or spacing = 'linear'")
        if self.tolerance_digits >= self.digits:
            raise ValueError(f"tolerance_digits ({self.tolerance_digits}) must be below digits ({self.digits})")
        if self.max_digits < self.digits:
            raise ValueError(f"max_digits ({self.max_digits}) must be at least digits ({self.digits})")
        if not self.min_points <= self.points <= self.max_draws:
            raise ValueError("need min_points <= points <= max_draws")
        return self


def numeric_check(job: dict[str, Any]) -> dict[str, Any]:
    """Worker function: decide at random points whether answer and reference differ; count agreements and singular points."""
    import random

    import mpmath
    import sympy as sp

    from arl_math.expressions import X

    # What the answer causes is the answer's verdict ("invalid", or points where it disagrees); "failed" (could not
    # verify) is kept for what is not its doing. A failure it could choose would earn the surrogate's guess instead of
    # the low value it deserves (x + 1/(x - x) as a derivative; tiny constants past max_digits).
    try:
        lhs, rhs = sides(job["kind"], job["expr"], job["answer"])
    except InvalidAnswer as exc:
        return {"invalid": str(exc)}
    if any(side.has(sp.zoo, sp.nan, sp.oo, -sp.oo) for side in (lhs, rhs)):
        raise ValueError("no points could be evaluated: a side is undefined everywhere (e.g. a division by 0)")
    got = parse_answer(job["answer"], evaluate=True)
    own = _constant_digits(got)
    if job["digits"] + own > job["max_digits"]:
        return {"invalid": f"the answer's constants (down to 1e-{own}) need more than max_digits={job['max_digits']} digits; "
                           "write them without such tiny terms"}
    # sympy's Add cancels the terms both sides share, so 'reference + c' leaves exactly c: no rounding hides it.
    residual = lhs - rhs
    exact = _exact_verdict(residual, job["points"])
    if exact is not None:
        return exact
    # A residual of exactly 0 still goes through the points: d/dx log(-x) is 1/x, but log(-x) is not real for x > 0.
    extra = _constant_digits(residual, lhs, rhs)
    digits = job["digits"] + extra
    if digits > job["max_digits"]:
        raise ValueError(f"the task's constants (down to 1e-{extra}) need more than max_digits={job['max_digits']} digits")
    tolerance = mpmath.mpf(10) ** -(job["tolerance_digits"] + extra)
    r = sp.lambdify(X, residual, modules="mpmath")
    g = sp.lambdify(X, rhs, modules="mpmath")
    a = sp.lambdify(X, got, modules="mpmath")
    size = sp.lambdify(X, _magnitude(residual), modules="mpmath")
    rng = random.Random(job["seed"])
    agree = evaluated = skipped = undecided = not_real = 0
    worst = mpmath.mpf(0)
    used = digits
    for draw in range(job["max_draws"]):
        if evaluated >= job["points"]:
            break
        # The domain's two ends first, then random points spread over it (log-uniform: every scale of x is seen).
        fraction = mpmath.mpf(min(draw, 1)) if draw < 2 else mpmath.mpf(rng.getrandbits(160)) / mpmath.mpf(2) ** 160
        with mpmath.workdps(8 * digits + 20):
            if job["spacing"] == "log":
                point = mpmath.mpf(job["low"]) * (mpmath.mpf(job["high"]) / mpmath.mpf(job["low"])) ** fraction
            else:
                point = mpmath.mpf(job["low"]) + (mpmath.mpf(job["high"]) - mpmath.mpf(job["low"])) * fraction
        unreal = _not_real_where_the_task_is(a, g, point, digits)
        if unreal is not None:  # an answer must be a real function wherever the task's is (log(-x) for 1/x is not)
            evaluated += 1
            not_real += 1
            worst = max(worst, unreal)
            continue
        outcome = _compare((r, g, size), point, digits, tolerance)
        if outcome == "undecided":
            # Cancellation past the working precision: evaluate once more at 4x the digits.
            outcome, used = _compare((r, g, size), point, 4 * digits, tolerance), max(used, 4 * digits)
        if outcome is None or outcome == "undecided":
            skipped += outcome is None
            undecided += outcome == "undecided"
            continue
        same, diff = outcome
        evaluated += 1
        agree += same
        worst = max(worst, diff)
    if evaluated < job["min_points"]:
        raise ValueError(f"only {evaluated} of {evaluated + skipped + undecided} points could be evaluated "
                         f"({skipped} singular or undefined, {undecided} lost to cancellation even at {4 * digits} digits)")
    out = {"points": evaluated, "agree": agree, "skipped": skipped, "undecided": undecided,
           "max_rel_diff": _as_float(worst), "digits": used}
    return out | {"not_real": not_real} if not_real else out


def _not_real_where_the_task_is(answer: Any, reference: Any, point: Any, digits: int) -> Any | None:
    """|imaginary part| / scale of the answer at ``point`` where the task's side is real and finite there and the
    answer is not (complex beyond its rounding, or singular); None when the answer is real there, or the task is not.

    The residual alone cannot see it: ``d/dx log(-x)`` is exactly ``1/x``, and ``x**2 + log(-1)`` differs from
    ``x**2`` by the constant ``I*pi`` that an antiderivative may add.
    """
    import mpmath

    try:
        with mpmath.workdps(digits):
            ref = mpmath.mpmathify(reference(point))
            if not mpmath.isfinite(ref) or abs(mpmath.im(ref)) > mpmath.mpf(10) ** (5 - digits) * max(1, abs(ref)):
                return None
            value = mpmath.mpmathify(answer(point))
    except (ZeroDivisionError, ValueError, OverflowError, TypeError):
        return mpmath.mpf(1)  # singular where the task is defined
    if not mpmath.isfinite(value):
        return mpmath.mpf(1)
    imag = abs(mpmath.im(value))
    return imag / max(1, abs(value)) if imag > mpmath.mpf(10) ** (5 - digits) * max(1, abs(value)) else None


def _exact_verdict(residual: Any, points: int) -> dict[str, Any] | None:
    """The verdict when the residual decides it without points: a constant sympy proves nonzero (wrong everywhere)."""
    if residual != 0 and not residual.has(_x()) and residual.is_zero is False:
        return {"points": points, "agree": 0, "skipped": 0, "undecided": 0, "max_rel_diff": _as_float(abs(residual.evalf(15))),
                "digits": 0, "exact": True, "constant": str(residual)[:100]}
    return None


def _x() -> Any:
    from arl_math.expressions import X

    return X


def _constant_digits(*exprs: Any) -> int:
    """Decimal digits below 1 of the smallest nonzero constant in the trees (every subtree free of x; 0 if none is below 1).

    The working precision and the tolerance grow by this much, so a term as small as any constant the
    answer can write (``10**-45``, ``exp(-200)``) is never below the tolerance.
    """
    import math

    import mpmath
    import sympy as sp

    x, smallest = _x(), 0.0
    for expr in exprs:
        for node in sp.preorder_traversal(expr):
            if node.has(x) or not isinstance(node, sp.Expr):
                continue
            if isinstance(node, sp.Rational):
                if node != 0:
                    smallest = min(smallest, _log10_rational(node))
                continue
            value = sp.Abs(node).evalf(15)  # adaptive precision: cancellation inside the constant is resolved
            if isinstance(value, sp.Float) and value != 0:
                smallest = min(smallest, float(mpmath.log10(value._to_mpmath(64))))
    return int(math.ceil(-smallest))


def _log10_rational(q: Any) -> float:
    """log10 of |p/q| from the integers' lengths (exact enough, for numbers of any size)."""
    import math

    p, d = abs(int(q.p)), int(q.q)
    return (p.bit_length() - d.bit_length()) * math.log10(2)


def _magnitude(expr: Any) -> Any:
    """The residual with every sum and product taken over absolute values: the size its rounding errors scale with."""
    import sympy as sp

    if isinstance(expr, (sp.Add, sp.Mul)):
        return expr.func(*(_magnitude(a) for a in expr.args), evaluate=False)
    if isinstance(expr, sp.Pow) and expr.args[1].is_Integer and expr.args[1] > 0:
        return sp.Pow(_magnitude(expr.args[0]), expr.args[1], evaluate=False)
    return sp.Abs(expr, evaluate=False)


def _compare(functions: tuple[Any, Any, Any], point: Any, digits: int, tolerance: Any) -> tuple[bool, Any] | str | None:
    """Decide at one point whether the residual is zero: (agrees?, |residual| / scale), 'undecided', or None if singular.

    The residual is evaluated at ``digits`` and at twice that; the difference of the two is the error of
    the first. It is nonzero if it exceeds four times that error and is not lost in the rounding of its
    own largest terms (``10**-digits`` of the sum of their absolute values), at any magnitude: the
    tolerance is the evaluation's own error, never a fixed number of digits. It is zero if it is within
    that error and the error is below ``tolerance`` of the scale ``max(1, |reference|)``. Otherwise
    cancellation left it open at this precision.
    """
    import mpmath

    r, g, size = functions
    try:
        with mpmath.workdps(digits):
            low = mpmath.mpmathify(r(point))
        with mpmath.workdps(2 * digits):
            high, scale, terms = (mpmath.mpmathify(f(point)) for f in (r, g, size))
            if not all(mpmath.isfinite(v) for v in (low, high, scale, terms)):
                return None
            error, value, scale = abs(low - high), abs(high), max(mpmath.mpf(1), abs(scale))
            if value > 4 * error and value > mpmath.mpf(10) ** (5 - digits) * abs(terms):
                return False, value / scale
            if error <= tolerance * scale:
                return True, value / scale
            return "undecided"
    except (ZeroDivisionError, ValueError, OverflowError, TypeError):
        return None


def _as_float(value: Any) -> float:
    """A nonnegative mpmath number as a float for the verdict's values (clamped to [1e-300, 1e300] unless 0)."""
    import mpmath

    if value == 0:
        return 0.0
    return float(min(max(mpmath.mpf(value), mpmath.mpf(10) ** -300), mpmath.mpf(10) ** 300))


class NumericAgreement(IsolatedVerifier):
    """Answer and reference agree at 20 points over the tasks' domain (mpmath, 50 digits and more), singular points skipped."""

    name: ClassVar[str] = "mpmath-points"
    tier: ClassVar[Tier] = Tier.high_fidelity
    version: ClassVar[str] = "3"  # 3: answer-caused failures are "invalid"; an answer must be real where the task is
    suite: ClassVar[str | None] = SUITE
    Params: ClassVar[type[BaseModel]] = NumericParams
    work_function = staticmethod(numeric_check)
    preload_modules: ClassVar[tuple[str, ...]] = ("sympy", "mpmath", "arl_math.numeric")
    # Worker CPU seconds measured with measure.py (README, 400 answers) at 20 points, 50 and 100 digits:
    # median 4.9 ms, mean 7.2 ms, max 60 ms (predictable, unlike simplify); fit 0.55 ms per node.
    cost_model: ClassVar[CostModel] = CostModel(base=0.0005, per_unit=0.00055)

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
            "spacing": p.spacing, "max_digits": p.max_digits,
        }

    def interpret(self, candidate: Candidate, result: dict[str, Any], outcome: TaskOutcome) -> Verdict:
        if "invalid" in result:
            return self.verdict(candidate, Status.invalid, feedback=str(result["invalid"]), cost_s=outcome.cpu_s, wall_s=outcome.wall_s)
        share = result["agree"] / result["points"]
        if result.get("not_real"):
            feedback = (f"wrong: the answer is not a real function where the task's is (complex or singular at "
                        f"{result['not_real']} of {result['points']} points in [{self.params.low:g}, {self.params.high:g}])")
        elif result.get("constant"):
            feedback = f"wrong: the answer is off by the constant {result['constant']} (exact, at every x)"
        else:
            feedback = "" if share == 1.0 else (
                f"wrong: differs from the reference at {result['points'] - result['agree']} of {result['points']} points "
                f"in [{self.params.low:g}, {self.params.high:g}] (largest relative difference {result['max_rel_diff']:.3g})"
            )
        return self.verdict(
            candidate, Status.ok, value=share, values=dict(result), feedback=feedback,
            cost_s=outcome.cpu_s, wall_s=outcome.wall_s,
        )
