"""Scheduler settings: one pydantic model, every field documented where it is declared.

A policy's own settings live next to it (``policies/NAME_settings.py``, e.g.
``voi``'s): :class:`SchedulerConfig` takes the fields of every registered
settings model as its own, so a run config keeps one flat ``[scheduler]``
table and a new policy with settings touches no file of the others.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from verifiers.objectives import Objective
from verifiers.scheduler.policies import policy_class, settings_models
from verifiers.scheduler.policies.voi_settings import VoiTarget  # re-exported: callers import it from here

__all__ = ["LearnedSurrogateConfig", "SchedulerConfig", "TierCaps", "VoiTarget"]


class TierCaps(BaseModel):
    """Limits on one verifier's work within one step."""

    model_config = ConfigDict(extra="forbid")

    max_calls_per_step: int | None = Field(
        default=None, ge=0, description="At most this many calls of this verifier per step (None: no cap)."
    )
    max_concurrency: int | None = Field(
        default=None,
        ge=1,
        description="At most this many calls of this verifier in one round, i.e. in flight at once (None: no cap).",
    )


class LearnedSurrogateConfig(BaseModel):
    """The graph network stacked under the surrogate once the history is large enough (see ``Surrogate.fit_learned``)."""

    model_config = ConfigDict(extra="forbid")

    shipped: bool = Field(
        default=True,
        description="Start from the network the suite ships (trained once on its own data, e.g. the molecules "
        "suite's QM9 subset) from the first step, if the suite has one for this ladder and network shape; the "
        "run's own top-tier answers refit a residual calibration on top of it after every answer. False: "
        "the linear surrogate until the history reaches min_pairs (a cold start).",
    )
    finetune_pairs: int = Field(
        default=1000,
        ge=50,
        description="With the shipped network: fine-tune it on the run's own top-tier answers (those it never "
        "saw, less calibration_share) once there are this many, and again each time they grow by refit_growth "
        "(checked when history is added, never mid-step).",
    )
    finetune_epochs: int = Field(default=10, ge=1, description="Epochs of each fine-tuning of the shipped network.")
    blend: Literal["stacking", "pseudo-bma"] = Field(
        default="stacking",
        description="How the shipped network (with its residual stack) and the run's cold Δ-model are mixed once a "
        "pattern has blend_min_pairs answers: 'stacking' weights them to maximize the mixture's out-of-fold log "
        "score, 'pseudo-bma' by each model's own (Yao et al. 2018, sec. 3 and 3.1).",
    )
    enabled: bool = Field(
        default=True,
        description="Train the network when the history reaches min_pairs top-tier answers with their candidates "
        "(a one-off cost of about a CPU-minute per 5,000 pairs, not charged to the verification budget).",
    )
    min_pairs: int = Field(
        default=2000,
        ge=50,
        description="History pairs needed before the network is trained; below this the linear surrogate alone "
        "is better calibrated than a network fitted to little data.",
    )
    refit_growth: float = Field(
        default=2.0,
        gt=1.0,
        description="Retrain when the history has grown by this factor since the last training (checked when "
        "history is added, never in the middle of a step).",
    )
    calibration_share: float = Field(
        default=0.15,
        gt=0.0,
        lt=1.0,
        description="Share of the pairs the network does not train on: they fit the linear stack on top of it, "
        "its conformal std and its gross-error tail, out of sample.",
    )
    epochs: int = Field(default=60, ge=1, description="Training epochs of each ensemble member.")
    members: int = Field(default=3, ge=1, description="Networks in the ensemble (each trained with its own seed).")
    hidden: int = Field(default=96, ge=8, description="Width of the network.")
    layers: int = Field(default=4, ge=1, description="Message-passing layers.")
    threads: int = Field(default=1, ge=1, description="Torch threads while training (verifiers may share the cores).")


class _SchedulerFields(BaseModel):
    """The settings every policy shares (``SchedulerConfig`` adds each policy's own)."""

    model_config = ConfigDict(extra="forbid")

    policy: str = Field(
        default="voi",
        description="Escalation policy by registered name (verifiers/scheduler/policies/, one file each): 'voi' "
        "(value of information per cost) or a baseline: 'all', 'fast-only', 'random'.",
    )

    reward: Objective | None = Field(
        default=None,
        description="The reward objective over named properties (see verifiers.objectives); a run config sets it "
        "from its [objective] section. None: the window target_low..target_high with window_softness on the top "
        "tier's value.",
    )
    target_low: float | None = Field(
        default=None,
        description="Lower edge of the target window of the top-tier value, in its units (None: the suite's default; "
        "the core has none).",
    )
    target_high: float | None = Field(
        default=None,
        description="Upper edge of the target window of the top-tier value (None: the suite's default; the core has "
        "none).",
    )
    window_softness: float = Field(
        default=0.0,
        ge=0.0,
        allow_inf_nan=False,
        description="Width of the Gaussian fall-off of the window reward outside the window, in value units; "
        "0 gives a hard 0/1 window.",
    )
    budget_per_step: float = Field(
        default=math.inf, gt=0.0, description="CPU-seconds one step may spend across all tiers (inf: no cap)."
    )
    budget_per_run: float = Field(
        default=math.inf, gt=0.0, description="CPU-seconds the whole run may spend across all tiers (inf: no cap)."
    )
    budget_carry: bool = Field(
        default=False,
        description="A step may spend what earlier steps left unspent: step n (from 0) may spend budget_per_step "
        "x (n + 1) minus what the run has spent (and never more than budget_per_run leaves). With a small "
        "budget_per_step a run then takes many cheap steps and an expensive call whenever enough has accrued "
        "for one, instead of few steps that each buy one. False: each step spends only its own budget_per_step.",
    )
    caps: dict[str, TierCaps] = Field(
        default_factory=dict,
        description="Per-verifier limits keyed by verifier name or tier name ('simulation'); the name wins.",
    )
    invalid_reward: float = Field(
        default=0.0, description="Reward of a candidate the verifiers call invalid (a malformed answer is a real 0)."
    )
    dead_after: int = Field(
        default=3,
        ge=1,
        description="A verifier whose last this-many calls all failed or timed out is treated as down: each step "
        "probes it with at most this many calls, and candidates step over it to the next tier.",
    )
    learned: LearnedSurrogateConfig = Field(
        default_factory=LearnedSurrogateConfig,
        description="A graph network on the candidates, stacked under the surrogate when the history is large.",
    )
    seed: int = Field(default=0, description="Seed of the 'random' baseline and any tie-breaking.")

    @field_validator("policy")
    @classmethod
    def _policy_is_registered(cls, name: str) -> str:
        policy_class(name)  # an unknown name fails naming the registered ones
        return name

    @model_validator(mode="before")
    @classmethod
    def _renamed_objective(cls, data: Any) -> Any:
        """``objective = 'discovery' | 'advantage'`` is the old name of ``voi_target``; it keeps working."""
        if isinstance(data, dict) and "objective" in data:
            data = dict(data)
            old = data.pop("objective")
            if "voi_target" in data:
                raise ValueError("objective is the old name of voi_target; give only voi_target")
            if str(getattr(old, "value", old)) not in {t.value for t in VoiTarget}:
                raise ValueError(
                    f"objective is now voi_target ('discovery' or 'advantage'), got {str(old)[:60]!r}; the reward's "
                    "objective is the run config's [objective] section"
                )
            data["voi_target"] = old
        return data

    @model_validator(mode="after")
    def _window_is_ordered(self) -> _SchedulerFields:
        if (self.target_low is None) != (self.target_high is None):
            given, missing = ("target_low", "target_high") if self.target_high is None else ("target_high", "target_low")
            raise ValueError(f"{given} is given without {missing}; a target window needs both edges")
        if self.target_low is not None and not self.target_low < self.target_high:  # type: ignore[operator]
            raise ValueError(
                f"target_low ({self.target_low}) must be below target_high ({self.target_high}); swap them"
            )
        return self

    def reward_objective(self) -> Objective:
        """The reward objective: ``reward``, else the window on the top tier's value (neither: ValueError)."""
        if self.reward is not None:
            return self.reward
        if self.target_low is None or self.target_high is None:
            raise ValueError(
                "scheduler: no reward; give an objective (reward, a run config's [objective]) or the window "
                "target_low and target_high"
            )
        return Objective.window(self.target_low, self.target_high, self.window_softness)

    def caps_for(self, verifier: str, tier: str) -> TierCaps:
        """The caps for one verifier (by name, else by tier, else none)."""
        return self.caps.get(verifier) or self.caps.get(tier) or TierCaps()


class SchedulerConfig(*settings_models(), _SchedulerFields):  # type: ignore[misc]
    """How the scheduler routes candidates through the verifier ladder: the shared fields, then each policy's own."""
