"""``random``: the next tier for candidates drawn uniformly at random, until the budget is spent."""

from __future__ import annotations

import numpy as np

from verifiers.scheduler.config import SchedulerConfig
from verifiers.scheduler.escalation import Action, EscalationPolicy, PlanView
from verifiers.scheduler.policies import register_policy

__all__ = ["RandomPolicy"]


@register_policy
class RandomPolicy(EscalationPolicy):
    """The next tier for candidates in a random order (seeded), until the budget is spent."""

    name = "random"

    @classmethod
    def build(cls, config: SchedulerConfig) -> RandomPolicy:
        return cls(config.seed)

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def escalate(self, view: PlanView) -> list[Action]:
        nxt = view.next_tier()
        idx = np.flatnonzero(nxt >= 0)
        return [Action(int(i), int(nxt[i]), None, "random") for i in self.rng.permutation(idx)]
