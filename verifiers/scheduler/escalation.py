"""Escalation: which (candidate, tier) pairs are worth paying for in the next round.

A policy looks at a :class:`PlanView` (posterior per candidate, costs, the
budget left) and returns :class:`Action` s in priority order; the planner
admits them under the budget and the per-tier caps, so no policy can
overspend. This module is the interface; the policies are in
:mod:`verifiers.scheduler.policies`, one file each, registered by name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from verifiers.base import Candidate, Verifier
from verifiers.objectives import Objective

if TYPE_CHECKING:  # annotations only: the config reads the policies' settings, which come with this package
    from verifiers.scheduler.config import SchedulerConfig

__all__ = ["Action", "EscalationPolicy", "PlanView"]



@dataclass(frozen=True)
class Action:
    """Ask ``ladder[tier]`` about candidate ``index``; ``value_per_cost`` and ``reason`` go to the decision log."""

    index: int
    tier: int
    value_per_cost: float | None = None
    reason: str = ""


@dataclass
class PlanView:
    """What a policy sees at the start of a round (arrays are indexed like ``keys``)."""

    round: int
    keys: list[str]
    candidates: list[Candidate]
    ladder: list[Verifier]
    level: np.ndarray  # (n,) highest ladder index asked so far, -1 if none
    open: np.ndarray  # (n,) bool: may still be escalated (not invalid, not awaiting the lab, top not reached)
    mean: np.ndarray  # (n,) posterior mean of the top-tier value
    std: np.ndarray  # (n,) posterior std of the top-tier value
    tail_rate: np.ndarray  # (n,) weight of the gross-error component of the posterior
    tail_scale: np.ndarray  # (n,) its std as a multiple of ``std``
    next_std: np.ndarray  # (n,) expected posterior std once the next tier has answered
    cost: np.ndarray  # (n, tiers) expected CPU-seconds per candidate and tier
    values: list[dict[str, float]]  # ok values per verifier name
    exact: dict[str, np.ndarray]  # (n,) per exact property the objective reads (NaN: no verifier reported it)
    groups: list[list[int]]  # candidate indices per group (with repeats if a key appears twice)
    budget_left: float
    config: SchedulerConfig
    disagreement: np.ndarray | None = None  # (n,) learned ensemble's disagreement on the top-tier value; None: none

    @property
    def objective(self) -> Objective:
        """The reward objective (the window on the top tier's value unless the config declares one)."""
        return self.config.reward_objective()

    @property
    def top(self) -> int:
        return len(self.ladder) - 1

    def next_tier(self) -> np.ndarray:
        """(n,) next ladder index per candidate, -1 where nothing is left to ask."""
        nxt = self.level + 1
        return np.where(self.open & (nxt <= self.top), nxt, -1)


class EscalationPolicy(ABC):
    """Chooses the actions of each round; the planner enforces budget and caps."""

    name: ClassVar[str]

    @classmethod
    def build(cls, config: SchedulerConfig) -> EscalationPolicy:
        """The policy for a scheduler config (override when it needs more than the config)."""
        return cls()

    def first_round(self, view: PlanView) -> list[Action]:
        """Round 0: the fast tier on every candidate that lacks it."""
        return [Action(i, 0, None, "fast tier on every candidate") for i in np.flatnonzero(view.level < 0)]

    @abstractmethod
    def escalate(self, view: PlanView) -> list[Action]:
        """Actions for a later round, best first; an empty list ends the step."""

    def choose(self, view: PlanView) -> list[Action]:
        if view.round == 0:
            actions = self.first_round(view)
            if actions:
                return actions
        return self.escalate(view)
