"""``fast-only``: the fast tier and nothing else (the cheapest baseline)."""

from __future__ import annotations

from verifiers.scheduler.escalation import Action, EscalationPolicy, PlanView
from verifiers.scheduler.policies import register_policy

__all__ = ["FastOnlyPolicy"]


@register_policy
class FastOnlyPolicy(EscalationPolicy):
    """The fast tier only."""

    name = "fast-only"

    def escalate(self, view: PlanView) -> list[Action]:
        return []
