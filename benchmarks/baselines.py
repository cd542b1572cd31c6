"""The scheduler's benchmark baselines, built here and passed to :class:`verifiers.scheduler.Scheduler` as instances.

Both need what a training run does not have, so no run config can name them:

- :class:`OraclePolicy` knows the true top-tier values and asks the top tier
  about the true hits only, skipping every lower tier: the physical limit of
  discovery;
- :class:`CascadePolicy` moves a candidate up only while its value at the
  current tier lies in that tier's interval, the intervals tuned on a held-out
  split whose every tier is known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from verifiers.scheduler.config import SchedulerConfig
from verifiers.scheduler.escalation import Action, EscalationPolicy, PlanView
from verifiers.scheduler.surrogate import Observation

__all__ = ["CascadePolicy", "OraclePolicy"]


class OraclePolicy(EscalationPolicy):
    """Knows the truth: the top tier on true hits only, no lower tier at all."""

    name = "oracle"

    def __init__(self, truth: Mapping[str, float], config: SchedulerConfig) -> None:
        self.truth = dict(truth)
        self.low, self.high = config.reward_objective().hit_interval()  # a window alone: target_low..target_high

    def first_round(self, view: PlanView) -> list[Action]:
        return []

    def escalate(self, view: PlanView) -> list[Action]:
        out = []
        for i, key in enumerate(view.keys):
            y = self.truth.get(key)
            if view.open[i] and y is not None and self.low <= y <= self.high:
                out.append(Action(i, view.top, None, f"oracle: true value {y:.3f} is a hit"))
        return out


class CascadePolicy(EscalationPolicy):
    """Fixed thresholds: move up from a tier only if its value lies in that tier's ``(lo, hi)`` interval.

    ``thresholds`` maps each lower verifier name to its interval; a tier that
    failed or has no interval stops the candidate.
    """

    name = "cascade"

    def __init__(self, thresholds: Mapping[str, tuple[float, float]]) -> None:
        self.thresholds = {k: (float(lo), float(hi)) for k, (lo, hi) in thresholds.items()}

    def escalate(self, view: PlanView) -> list[Action]:
        nxt = view.next_tier()
        out = []
        for i in np.flatnonzero(nxt >= 0):
            here = view.ladder[int(view.level[i])].name
            value = view.values[i].get(here)
            lo, hi = self.thresholds.get(here, (np.inf, -np.inf))
            if value is not None and lo <= value <= hi:
                out.append(Action(int(i), int(nxt[i]), None, f"cascade: {here}={value:.3f} in [{lo:.3f}, {hi:.3f}]"))
        return out

    @staticmethod
    def untunable(held_out: Sequence[Observation], lower: Sequence[str], top: str, low: float, high: float) -> str | None:
        """Why :meth:`tune` cannot tune a cascade on ``held_out`` (a tier with no pairs, or no hits), else None."""
        for name in lower:
            rows = [o.values[top] for o in held_out if name in o.values and top in o.values]
            if not rows:
                return f"held-out split has no pairs of {name!r} and {top!r}; cannot tune the cascade"
            if not any(low <= v <= high for v in rows):
                return f"held-out split has no hits in [{low}, {high}]; cannot tune the cascade"
        return None

    @classmethod
    def tune(
        cls,
        held_out: Sequence[Observation],
        lower: Sequence[str],
        top: str,
        low: float,
        high: float,
        keep: float = 0.95,
        margin: float = 0.0,
    ) -> CascadePolicy:
        """Per tier, the interval that keeps ``keep`` of the held-out hits and passes the fewest candidates.

        ``held_out`` must have every tier's value (a split that went through
        the whole ladder). The interval is then widened by ``margin`` (value
        units) on each side, a guard against a small held-out split. Tiers are
        tuned independently, so a cascade keeps about ``keep ** len(lower)``
        of the held-out hits.
        """
        if not 0 < keep <= 1:
            raise ValueError(f"keep must be in (0, 1], got {keep}")
        reason = cls.untunable(held_out, lower, top, low, high)
        if reason is not None:
            raise ValueError(reason)
        thresholds: dict[str, tuple[float, float]] = {}
        for name in lower:
            rows = [(o.values[name], o.values[top]) for o in held_out if name in o.values and top in o.values]
            vals = np.array([r[0] for r in rows])
            hits = np.sort(vals[[low <= r[1] <= high for r in rows]])
            need = max(int(np.ceil(keep * hits.size)), 1)
            best = (np.inf, hits[0], hits[-1])
            for a in range(hits.size - need + 1):  # every window of `need` consecutive hits
                lo, hi = hits[a], hits[a + need - 1]
                passing = np.mean((vals >= lo) & (vals <= hi))
                if passing < best[0]:
                    best = (passing, lo, hi)
            thresholds[name] = (float(best[1]) - margin, float(best[2]) + margin)
        return cls(thresholds)
