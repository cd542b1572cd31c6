"""``all``: every candidate through every tier up to the top (the baseline of verifying everything)."""

from __future__ import annotations

import numpy as np

from verifiers.scheduler.escalation import Action, EscalationPolicy, PlanView
from verifiers.scheduler.policies import register_policy

__all__ = ["AllPolicy"]


@register_policy
class AllPolicy(EscalationPolicy):
    """Every open candidate goes one tier up per round, in input order."""

    name = "all"

    def escalate(self, view: PlanView) -> list[Action]:
        nxt = view.next_tier()
        return [Action(int(i), int(nxt[i]), None, "all: every tier") for i in np.flatnonzero(nxt >= 0)]
