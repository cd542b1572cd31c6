"""The math suite's ``[options]`` and its prior's config (light: no torch, no sympy evaluation)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from arl_math.expressions import KINDS, Kind

__all__ = ["MathOptions", "PriorConfig"]


class PriorConfig(BaseModel):
    """Architecture, data and budget of the math prior (every field decides the cached prior, but num_threads)."""

    model_config = ConfigDict(extra="forbid")

    n_layer: int = Field(default=2, ge=1, le=24, description="Transformer blocks.")
    n_embd: int = Field(default=64, ge=8, le=2048, description="Hidden width (divisible by n_head).")
    n_head: int = Field(default=4, ge=1, le=64, description="Attention heads.")
    n_positions: int = Field(default=112, ge=16, le=2048, description="Longest prompt + answer + eos, in characters.")
    pairs: int = Field(default=4000, ge=1, le=1_000_000, description="(task, answer) pairs drawn for training.")
    max_steps: int = Field(default=600, ge=1, le=1_000_000, description="The training budget, in optimizer steps.")
    batch_size: int = Field(default=64, ge=1, le=4096, description="Sequences per optimizer step.")
    lr: float = Field(default=3e-3, gt=0, le=1, description="Peak AdamW learning rate (cosine decay after warm-up).")
    warmup_steps: int = Field(default=30, ge=0, description="Linear warm-up steps.")
    seed: int = Field(default=0, ge=0, description="Seeds the drawn pairs, initialisation and batch order.")
    eval_samples: int = Field(default=64, ge=1, le=10_000, description="Answers sampled after training to report how many parse.")
    num_threads: int | None = Field(default=1, ge=1, description="torch threads while pretraining (None: torch's default).")



class MathOptions(BaseModel):
    """``[options]`` of a math run."""

    model_config = ConfigDict(extra="forbid")

    tasks: int = Field(default=64, ge=1, le=10_000, description="How many distinct tasks to prompt with (drawn once, cycled).")
    kinds: list[Kind] = Field(default_factory=lambda: list(KINDS), min_length=1, description="Task kinds: 'derivative', 'antiderivative'.")
    task_seed: int = Field(default=2024, ge=0, description="Seed of the drawn task set.")
    prior: PriorConfig = Field(default_factory=PriorConfig, description="The character-level prior (pretrained on first use, cached).")

    @field_validator("kinds")
    @classmethod
    def _distinct(cls, kinds: list[Kind]) -> list[Kind]:
        return list(dict.fromkeys(kinds))
