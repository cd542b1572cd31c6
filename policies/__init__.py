"""Policies: the transformers model wrapper, the GRPO trainer and the GRPO and hindsight distillation losses.

A suite's own tokenizer or prior lives in its suite (the SMILES prior: ``arl_flows.suites.molecules``).

Nothing here imports Prefect or ``verifiers``: rewards arrive as numbers.
"""

from .hindsight import HintedExample, RelabeledExample, achieved_value, feedback_hint, hint_prompt, top_scale_value
from .losses import (
    GRPOLossConfig,
    decoupled_ppo_loss,
    group_advantages,
    group_order,
    grpo_loss,
    reverse_kl_distill_loss,
    sft_loss,
    spread_mask,
    staleness_histogram,
    staleness_weights,
    uncertainty_weights,
)
from .model import Policy, PolicyConfig, Rollout, TokenBatch, collate
from .trainer import PolicyTrainer, TrainerConfig

__all__ = [
    "GRPOLossConfig",
    "decoupled_ppo_loss",
    "HintedExample",
    "Policy",
    "PolicyConfig",
    "PolicyTrainer",
    "RelabeledExample",
    "Rollout",
    "TokenBatch",
    "TrainerConfig",
    "achieved_value",
    "top_scale_value",
    "collate",
    "feedback_hint",
    "group_advantages",
    "group_order",
    "grpo_loss",
    "hint_prompt",
    "reverse_kl_distill_loss",
    "sft_loss",
    "spread_mask",
    "staleness_histogram",
    "staleness_weights",
    "uncertainty_weights",
]
