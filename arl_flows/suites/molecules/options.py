"""The molecules suite's ``[options]``: its chemistry space, SMILES prior and goal windows (light: no torch, no RDKit)."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from arl_flows.suites.molecules.spaces import DEFAULT_SPACE, SPACES, get_space

__all__ = ["MoleculeOptions", "PretrainConfig", "default_prior_config"]


class PretrainConfig(BaseModel):
    """Architecture, optimisation and evaluation of the SMILES prior."""

    model_config = ConfigDict(extra="forbid")

    n_layer: int = Field(default=4, ge=1, description="Transformer blocks.")
    n_embd: int = Field(default=128, ge=16, description="Hidden width (must be divisible by n_head).")
    n_head: int = Field(default=4, ge=1, description="Attention heads.")
    n_positions: int = Field(default=64, ge=16, description="Longest prompt + SMILES + eos in tokens (QM9 needs ~45).")
    batch_size: int = Field(default=128, ge=1, description="Sequences per optimizer step.")
    lr: float = Field(default=3e-3, gt=0, description="Peak AdamW learning rate.")
    warmup_steps: int = Field(default=50, ge=0, description="Linear warm-up steps before cosine decay.")
    weight_decay: float = Field(default=0.01, ge=0, description="AdamW weight decay.")
    max_steps: int = Field(
        default=4000, ge=1, le=10_000_000,
        description="The training budget, in optimizer steps: it alone decides the prior (with the seed and data).",
    )
    max_minutes: float = Field(
        default=120.0,
        gt=0,
        description=(
            "Safety cap on training time (evaluation excluded), not a budget: a run it stops before max_steps is "
            "reported as truncated and never cached as a default."
        ),
    )
    budget_clock: Literal["wall", "cpu"] = Field(
        default="wall", description="Clock that the max_minutes cap counts: 'wall' or 'cpu' (this process's CPU time)."
    )
    min_validity: float = Field(
        default=0.85, ge=0, le=1,
        description="Quality gate: a prior whose own samples parse less often than this is never cached as a default.",
    )
    wide_window_prob: float = Field(
        default=0.3, ge=0, le=1, description="Share of examples whose goal window spans 2-4 bins instead of one."
    )
    seed: int = Field(default=0, description="Seeds data order, initialisation and evaluation sampling.")
    num_threads: int | None = Field(
        default=None, ge=1, description="torch.set_num_threads during training; None keeps the default."
    )
    eval_samples: int = Field(
        default=1000, ge=1, description="Molecules sampled to measure validity/uniqueness/novelty."
    )
    eval_temperature: float = Field(default=1.0, gt=0, description="Sampling temperature for the evaluation.")
    max_molecules: int | None = Field(default=None, ge=1, description="Train on the first N molecules only (tests).")
    space: str = Field(
        default=DEFAULT_SPACE,
        description="Chemistry space whose training set the prior learns (qm9: the shipped QM9 table; druglike: MOSES train).",
    )
    data: str | None = Field(
        default=None,
        description="druglike only: path of MOSES train.csv(.gz) to pretrain on (not shipped: 1.58M SMILES). "
        "Not part of the cache key; the report records the data's sha256.",
    )
    labeled_share: float = Field(
        default=0.25, ge=0, le=1,
        description="druglike only: share of each batch drawn from the gap-labeled subset with a goal prompt; the rest "
        "are MOSES molecules with the goal-free prompt <bos> <sep>.",
    )
    smiles_form: Literal["aromatic", "kekule"] = Field(
        default="aromatic",
        description="druglike only: how the training SMILES are written: 'aromatic' (RDKit canonical, lowercase aromatic "
        "atoms) or 'kekule' (RDKit canonical Kekule SMILES: explicit single and double bonds, no aromatic atoms, so "
        "a sample can never fail kekulization). Sampling under the grammar then bans aromatic atoms too.",
    )
    warm_start: PretrainConfig | None = Field(
        default=None,
        description="The prior this one continues (its config; its architecture and space must match): it is loaded from "
        "the shipped prior or the cache, or pretrained first, and this config's steps, learning rate and seed train it "
        "further. None: from a fresh initialisation.",
    )

    @model_validator(mode="after")
    def _warm_start_fits(self) -> PretrainConfig:
        start = self.warm_start
        if start is None:
            return self
        for name in ("space", "n_layer", "n_embd", "n_head", "n_positions"):
            if getattr(start, name) != getattr(self, name):
                raise ValueError(f"warm_start has {name} = {getattr(start, name)!r} but this prior {getattr(self, name)!r}; "
                                 "a prior continues one of the same space and architecture")
        return self

    @field_validator("space")
    @classmethod
    def _prior_space_is_known(cls, space: str) -> str:
        return get_space(space).name


# druglike's shipped prior: a 4x128 GPT-2 (the qm9 prior's shape), 10,000 steps from scratch on MOSES train written as
# RDKit's Kekule SMILES, a quarter of each batch goal-prompted from 30,000 EHT-labeled molecules: validity 0.959 decoded
# unconstrained (0.984 under the grammar), uniqueness 1.000, novelty 0.938, FCD to MOSES test 0.53 at 10,000 samples.
# The same config on 3,000 labels sampled 0.947 (0.980) at 10,000, FCD 0.75 (each labeled molecule seen 53 times; at
# 20,000 steps 41% of its samples copied them). The 3x96 one before it, 14,000 steps on the same data, sampled 0.921 (0.978): its loss was as low (0.48), but
# it left more rings unclosed (5.9% against 3.2%). On aromatic SMILES the 3x96 one sampled 0.836 (0.865 under the
# grammar): most of its failures were rings that do not kekulize; continuing it for 12,000 more steps (``warm_start``,
# a fresh cosine at half the peak rate, seed 1) sampled worse (0.807). docs/benchmarks.md, "Druglike prior".
DRUGLIKE_PRIOR = PretrainConfig(space="druglike", n_layer=4, n_embd=128, n_positions=80, batch_size=64, max_steps=10000,
                                max_minutes=180.0, smiles_form="kekule")


def default_prior_config(space: str) -> PretrainConfig:
    """The prior a space ships with: qm9's 4x128 GPT-2 on QM9; druglike's 4x128 on MOSES (longer SMILES: more positions).

    druglike's 10,000 steps took 45-64 wall minutes on one core (2026-12-06). It is trained on Kekule SMILES (explicit
    double bonds, no aromatic atoms), so a sample cannot fail kekulization: validity 0.959 decoded unconstrained,
    0.984 under the grammar a run samples with (10,000 samples).
    """
    if get_space(space).name == "qm9":
        return PretrainConfig()
    return DRUGLIKE_PRIOR


class MoleculeOptions(BaseModel):
    """``[options]`` of a molecules run."""

    model_config = ConfigDict(extra="forbid")

    space: str = Field(
        default=DEFAULT_SPACE,
        description=f"Chemistry space of the run ({', '.join(sorted(SPACES))}): the molecules every tier accepts and "
        "what `novel` is measured against.",
    )
    max_heavy_atoms: int | None = Field(
        default=None, ge=1, le=200, description="Largest molecule in heavy atoms; None: the space's own (qm9: 9, druglike: 40)."
    )
    prior: PretrainConfig = Field(default_factory=PretrainConfig, description="The SMILES prior (shipped; pretrained once and cached if the config differs).")
    grammar: bool = Field(
        default=True,
        description="Sample SMILES under the space's grammar (grammar.py: no unclosed ring or branch, no syntax error, "
        "only the space's elements), and score GRPO's log-probs under it; false: decode unconstrained.",
    )
    surrogate: Literal["qm9", "multifidelity"] = Field(
        default="qm9",
        description="The scheduler's shipped surrogate: 'qm9', the network trained on QM9's DFT gaps (every space's "
        "default; on the druglike reference pool it retrieves hits at 0.90x / 0.88x the cold start's cost, the "
        "multi-fidelity one at 1.05x / 1.08x: docs/benchmarks.md), or 'multifidelity', the druglike network trained on 20,000 MOSES molecules' "
        "EHT and xTB gaps with a DFT correction fitted on 27 DFT labels (multifidelity.py).",
    )
    goal_windows: list[tuple[float, float]] = Field(
        default_factory=list,
        max_length=1000,
        description="Goal windows (low, high) in eV to prompt with, cycled over prompts; empty: the scheduler's target window.",
    )

    @field_validator("space")
    @classmethod
    def _space_is_known(cls, space: str) -> str:
        return get_space(space).name

    @model_validator(mode="before")
    @classmethod
    def _space_picks_its_prior(cls, data: Any) -> Any:
        """A space's own prior unless the config says otherwise: ``[options.prior]`` fields override its defaults."""
        space = data.get("space", DEFAULT_SPACE) if isinstance(data, dict) else None
        if not isinstance(space, str) or space not in SPACES:
            return data  # the space field's own validator reports it
        prior = data.get("prior")
        if isinstance(prior, PretrainConfig):
            prior = prior.model_dump(exclude_unset=True)
        if prior is None or isinstance(prior, dict):
            base = default_prior_config(space).model_dump(exclude_defaults=True)
            data = {**data, "prior": {**base, "space": space, **(prior or {})}}
        return data

    @model_validator(mode="after")
    def _prior_is_the_space_s(self) -> MoleculeOptions:
        if self.prior.space != self.space:
            raise ValueError(f"[options.prior] space {self.prior.space!r} differs from the run's space {self.space!r}; "
                             "drop it (the run's space picks its prior)")
        return self

    @field_validator("goal_windows")
    @classmethod
    def _windows_are_finite_and_ordered(cls, windows: list[tuple[float, float]]) -> list[tuple[float, float]]:
        for i, (low, high) in enumerate(windows):
            if not (math.isfinite(low) and math.isfinite(high)):
                raise ValueError(f"window {i} ({low}, {high}) must be two finite numbers in eV, e.g. [3.0, 4.0]")
            if not low < high:
                raise ValueError(f"window {i} ({low}, {high}) needs low below high; write it as [{min(low, high)}, {max(low, high)}]")
        return windows
