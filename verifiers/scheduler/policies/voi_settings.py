"""``voi``'s own settings: what an escalation is worth to it and when it is not worth its cost.

Registered like a policy (``register_settings``), so that
``verifiers.scheduler.SchedulerConfig`` takes these fields as its own: a run
config sets them in ``[scheduler]``, as before. Plain pydantic: this module
imports nothing of the scheduler.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from verifiers.scheduler.policies._settings import register_settings

__all__ = ["VoiSettings", "VoiTarget"]


class VoiTarget(StrEnum):
    """What an escalation is worth to ``voi`` (not the reward: that is the objective)."""

    discovery = "discovery"  # expected gain in hits confirmed at the top tier
    advantage = "advantage"  # expected reduction in error of GRPO group advantages


@register_settings
class VoiSettings(BaseModel):
    """Settings of the ``voi`` policy (value of information per CPU-second)."""

    model_config = ConfigDict(extra="forbid")

    voi_target: VoiTarget = Field(
        default=VoiTarget.discovery,
        description="What 'voi' maximises: 'discovery' (confirmed hits: candidates whose top-tier value meets the "
        "objective's terms on it, weighted by the reward they can still gain) or 'advantage' (accuracy of "
        "group-relative advantages). Formerly 'objective'.",
    )
    min_value_per_cost: float = Field(
        default=1e-4,
        ge=0.0,
        description="With a finite budget, escalations worth less than this per CPU-second are not worth their "
        "cost even if affordable (discovery: expected hits; advantage: squared advantage error removed). "
        "The default skips a 12 s call that has under 0.12% chance of a hit. An infinite budget ignores it.",
    )
    learning_value: float = Field(
        default=0.5,
        ge=0.0,
        description="Worth of a top-tier answer to the surrogate itself, added to its discovery value: this "
        "weight times the share of the candidate's posterior variance that is the learned ensemble's "
        "disagreement, times its chance of a hit under a posterior twice as wide (answers that teach the "
        "model about the region near the target). 0: pure exploitation. Only with a learned ensemble.",
    )
    exact_std: float = Field(
        default=1e-3,
        ge=0.0,
        description="Posterior std of the top-tier value at or below which it counts as known: such a candidate "
        "is never escalated (an exact lower tier makes the expensive ones worthless).",
    )
    advantage_scale_floor: float = Field(
        default=0.1,
        gt=0.0,
        description="Floor on a group's reward scale when weighing advantage errors, so that a group whose "
        "members are all clearly bad does not look worth resolving.",
    )
