"""``oracle``: knows the true top-tier values and asks the top tier about the true hits only, skipping
every lower tier: the physical limit of discovery (benchmarks only)."""

from __future__ import annotations

from collections.abc import Mapping

from verifiers.scheduler.config import SchedulerConfig
from verifiers.scheduler.escalation import Action, EscalationPolicy, PlanView
from verifiers.scheduler.policies import register_policy

__all__ = ["OraclePolicy"]


@register_policy
class OraclePolicy(EscalationPolicy):
    """Knows the truth: the top tier on true hits only, no lower tier at all."""

    name = "oracle"
    needs_data = True

    @classmethod
    def build(cls, config: SchedulerConfig, *, truth: Mapping[str, float] | None = None, **_: object) -> OraclePolicy:
        if truth is None:
            raise ValueError("the 'oracle' policy needs the true top-tier values (truth={key: value})")
        return cls(truth, config)

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
