"""Objectives: how a candidate's named property values become its reward.

An objective is a list of terms, each a desirability in [0, 1] of one named
property, combined by a weighted geometric or arithmetic mean, as REINVENT and
MolScore scoring configs combine their components:

- ``window``: 1 inside ``[low, high]``, a Gaussian fall-off of width
  ``softness`` outside (0: a hard 0/1 window);
- ``maximize`` / ``minimize``: a sigmoid with ``midpoint`` and ``steepness``,
  or a line from 0 to 1 between ``low`` and ``high`` (reversed for minimize);
- ``threshold``: 1 at or ``above`` a value (or at or ``below`` it), else 0.

Property names are what the verifiers report. The reserved name ``value``
is the ladder's value: what the top tier measures, known to the scheduler as
a posterior until the top tier answers. Every other name is an exact property
that some verifier reports in its verdict's ``values`` (cheap ones from the
fast tier). This module knows no problem and no posterior: it scores known
values; :mod:`verifiers.scheduler.reward` integrates over the posterior.

A weighted geometric mean is ``prod d_k^(w_k / W)``: any desirability of 0
makes the reward 0, so a cheap term can cap what the expensive one is worth.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["VALUE", "Objective", "Term", "window_score"]

VALUE = "value"  # the ladder's value: what the top tier measures


def window_score(y: np.ndarray | float, low: float, high: float, softness: float = 0.0) -> np.ndarray:
    """Reward of a known value: 1 inside the window, ``exp(-d^2 / 2 softness^2)`` at distance d outside.

    The one definition of the window reward: objectives, the scheduler's
    quadrature and the benchmarks all call it. ``softness`` 0 gives a hard 0/1
    window; above 0 the score and its first derivative are continuous, so a
    near miss still earns some reward. A NaN value is outside every window (0).
    """
    if high < low:
        raise ValueError(f"window low {low} is above high {high}; swap them")
    y = np.asarray(y, dtype=float)
    if softness <= 0:
        return ((y >= low) & (y <= high)).astype(float)
    distance = np.maximum(np.maximum(low - y, y - high), 0.0)
    return np.where(np.isnan(y), 0.0, np.exp(-0.5 * (distance / softness) ** 2))


_NEEDS = {
    ("window", None): ("low", "high"),
    ("maximize", "sigmoid"): ("midpoint", "steepness"),
    ("minimize", "sigmoid"): ("midpoint", "steepness"),
    ("maximize", "linear"): ("low", "high"),
    ("minimize", "linear"): ("low", "high"),
}
_EXAMPLE = {
    "window": "low = 3.0, high = 4.0",
    "sigmoid": "transform = 'sigmoid', midpoint = 0.5, steepness = 10.0",
    "linear": "transform = 'linear', low = 2.0, high = 6.0",
    "threshold": "above = 0.5 (or below = 0.5)",
}
_OPTIONAL = {"window": {"softness"}, "threshold": set(), "maximize": set(), "minimize": set()}
_SHAPE_FIELDS = ("transform", "low", "high", "softness", "midpoint", "steepness", "above", "below")


class Term(BaseModel):
    """One desirability of one property; its fields depend on ``kind``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["window", "maximize", "minimize", "threshold"] = Field(
        description="'window' (in [low, high]), 'maximize' or 'minimize' (with a transform), 'threshold' (above/below)."
    )
    property: str = Field(
        min_length=1,
        max_length=100,
        description="Property name: 'value' is the top tier's value (the scheduler's posterior until it answers); "
        "any other name is an exact property a verifier reports in its verdict values (e.g. 'qed' from the fast tier).",
    )
    weight: float = Field(default=1.0, gt=0.0, le=1e6, description="Weight of this term in the composite mean.")
    transform: Literal["sigmoid", "linear"] | None = Field(
        default=None,
        description="maximize/minimize: 'sigmoid' (midpoint, steepness) or 'linear' (0 at low, 1 at high; reversed "
        "for minimize).",
    )
    low: float | None = Field(default=None, description="window: lower edge; linear: where the desirability starts to move.")
    high: float | None = Field(default=None, description="window: upper edge; linear: where it reaches its end.")
    softness: float = Field(
        default=0.0, ge=0.0, description="window: width of the Gaussian fall-off outside the window (0: hard 0/1)."
    )
    midpoint: float | None = Field(default=None, description="sigmoid: the value of desirability 0.5.")
    steepness: float | None = Field(
        default=None, gt=0.0, description="sigmoid: slope parameter k of 1 / (1 + exp(-k (x - midpoint))), per unit of x."
    )
    above: float | None = Field(default=None, description="threshold: desirability 1 at or above this value, else 0.")
    below: float | None = Field(default=None, description="threshold: desirability 1 at or below this value, else 0.")

    @model_validator(mode="after")
    def _fields_fit_the_kind(self) -> Term:
        kind = self.kind
        given = {f for f in _SHAPE_FIELDS if getattr(self, f) is not None and not (f == "softness" and self.softness == 0)}
        if kind == "threshold":
            if (self.above is None) == (self.below is None):
                raise ValueError(f"a 'threshold' term on {self.property!r} needs exactly one of above or below, e.g. {_EXAMPLE['threshold']}")
            needs: tuple[str, ...] = ("above",) if self.above is not None else ("below",)
        elif kind == "window":
            needs = _NEEDS[("window", None)]
        else:
            if self.transform is None:
                raise ValueError(
                    f"a {kind!r} term on {self.property!r} needs a transform: {_EXAMPLE['sigmoid']}, or {_EXAMPLE['linear']}"
                )
            needs = ("transform", *_NEEDS[(kind, self.transform)])
        missing = [f for f in needs if getattr(self, f) is None]
        if missing:
            example = _EXAMPLE[self.transform or kind]
            raise ValueError(f"a {kind!r} term on {self.property!r} needs {', '.join(missing)}, e.g. {example}")
        extra = sorted(given - set(needs) - _OPTIONAL[kind])
        if extra:
            raise ValueError(f"a {kind!r} term{' with a ' + repr(self.transform) + ' transform' if self.transform else ''} "
                             f"has no {', '.join(extra)}; remove {'it' if len(extra) == 1 else 'them'} "
                             f"(it takes {', '.join(needs)})")
        for f in (*needs, "softness"):
            v = getattr(self, f)
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"{f} of the {kind!r} term on {self.property!r} must be a finite number, got {v}")
        if self.low is not None and self.high is not None and not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high}) in the {kind!r} term on "
                             f"{self.property!r}; swap them")
        return self

    def desirability(self, x: np.ndarray) -> np.ndarray:
        """Desirability in [0, 1] of known values ``x`` of this term's property."""
        x = np.asarray(x, dtype=float)
        if self.kind == "window":
            return window_score(x, self.low, self.high, self.softness)  # type: ignore[arg-type]
        if self.kind == "threshold":
            return (x >= self.above if self.above is not None else x <= self.below).astype(float)
        sign = 1.0 if self.kind == "maximize" else -1.0
        if self.transform == "sigmoid":
            z = np.clip(sign * self.steepness * (x - self.midpoint), -500.0, 500.0)  # type: ignore[operator]
            return 1.0 / (1.0 + np.exp(-z))
        d = np.clip((x - self.low) / (self.high - self.low), 0.0, 1.0)  # type: ignore[operator]
        return d if sign > 0 else 1.0 - d

    def hit_interval(self) -> tuple[float, float]:
        """Where the term counts as met: the window, the threshold's side, or desirability >= 1/2."""
        if self.kind == "window":
            return self.low, self.high  # type: ignore[return-value]
        if self.kind == "threshold":
            return (self.above, math.inf) if self.above is not None else (-math.inf, self.below)  # type: ignore[return-value]
        mid = self.midpoint if self.transform == "sigmoid" else 0.5 * (self.low + self.high)  # type: ignore[operator]
        return (mid, math.inf) if self.kind == "maximize" else (-math.inf, mid)  # type: ignore[return-value]

    def edges(self) -> list[float]:
        """Values where the desirability jumps (hard windows and thresholds): quadrature splits there."""
        if self.kind == "window" and self.softness <= 0:
            return [self.low, self.high]  # type: ignore[list-item]
        if self.kind == "threshold":
            return [self.above if self.above is not None else self.below]  # type: ignore[list-item]
        return []


class Objective(BaseModel):
    """The reward of a candidate: a weighted mean of its terms' desirabilities."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    terms: list[Term] = Field(min_length=1, max_length=64, description="The terms; at least one, at most 64.")
    mean: Literal["geometric", "arithmetic"] = Field(
        default="geometric",
        description="How terms combine: 'geometric' (prod d_k^(w_k/W): any 0 makes the reward 0) or "
        "'arithmetic' (sum w_k d_k / W).",
    )

    @model_validator(mode="after")
    def _value_terms_can_all_be_met(self) -> Objective:
        low, high = self.hit_interval()
        if low > high:
            raise ValueError(
                f"the terms on {VALUE!r} can never all be met at once (the intersection of their ranges is empty); "
                "widen or remove one"
            )
        return self

    @classmethod
    def window(cls, low: float, high: float, softness: float = 0.0) -> Objective:
        """A window on the top tier's value alone (the default reward)."""
        return cls(terms=[Term(kind="window", property=VALUE, low=low, high=high, softness=softness)])

    # -- structure ----------------------------------------------------------
    @property
    def value_terms(self) -> list[Term]:
        return [t for t in self.terms if t.property == VALUE]

    @property
    def exact_properties(self) -> list[str]:
        """Names of the exact properties the objective reads, in order of first use."""
        return list(dict.fromkeys(t.property for t in self.terms if t.property != VALUE))

    def as_window(self) -> tuple[float, float, float] | None:
        """(low, high, softness) if the objective is one window on the value, else None."""
        if len(self.terms) == 1 and self.terms[0].kind == "window" and self.terms[0].property == VALUE:
            t = self.terms[0]
            return t.low, t.high, t.softness  # type: ignore[return-value]
        return None

    def hit_interval(self) -> tuple[float, float]:
        """The values of ``value`` where every term on it is met ((-inf, inf) if none reads it)."""
        low, high = -math.inf, math.inf
        for t in self.value_terms:
            a, b = t.hit_interval()
            low, high = max(low, a), min(high, b)
        return low, high

    def edges(self) -> list[float]:
        """Values of ``value`` where the reward jumps."""
        return sorted({e for t in self.value_terms for e in t.edges()})

    # -- scoring ------------------------------------------------------------
    def combine(self, desirabilities: Sequence[np.ndarray]) -> np.ndarray:
        """The weighted mean of per-term desirabilities (broadcast together), in term order."""
        w = np.array([t.weight for t in self.terms]) / sum(t.weight for t in self.terms)
        ds = np.broadcast_arrays(*[np.asarray(d, dtype=float) for d in desirabilities])
        if self.mean == "arithmetic":
            return sum(wk * d for wk, d in zip(w, ds))
        out = np.ones(ds[0].shape)
        for wk, d in zip(w, ds):
            out = out * np.power(np.clip(d, 0.0, 1.0), wk)
        return out

    def score(self, properties: Mapping[str, np.ndarray | float], *, value: np.ndarray | float | None = None) -> np.ndarray:
        """Reward of known property values (arrays broadcast). ``value`` overrides ``properties['value']``.

        A property missing from ``properties`` or NaN counts as desirability 1:
        no verifier reported it, which is no evidence against the candidate
        (a failed check is not a score of 0).
        """
        ds = []
        for t in self.terms:
            x = value if t.property == VALUE and value is not None else properties.get(t.property, math.nan)
            x = np.asarray(x, dtype=float)
            ds.append(np.where(np.isnan(x), 1.0, t.desirability(np.nan_to_num(x))))
        return self.combine(ds)

    def stake(self, properties: Mapping[str, np.ndarray | float]) -> np.ndarray:
        """How much of the reward the top tier's value can move, given the exact properties.

        The reward with every term on ``value`` met (desirability 1) minus the
        reward with none met (0). A geometric mean gives the product of the
        exact terms (0 if any is 0); an arithmetic mean gives the value terms'
        share of the weight, whatever the exact terms are.
        """
        ds_hi, ds_lo = [], []
        for t in self.terms:
            if t.property == VALUE:
                ds_hi.append(np.asarray(1.0))
                ds_lo.append(np.asarray(0.0))
            else:
                x = np.asarray(properties.get(t.property, math.nan), dtype=float)
                d = np.where(np.isnan(x), 1.0, t.desirability(np.nan_to_num(x)))
                ds_hi.append(d)
                ds_lo.append(d)
        return self.combine(ds_hi) - self.combine(ds_lo)
