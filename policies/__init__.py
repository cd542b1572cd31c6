"""Policies: transformers model wrapper, SMILES tokenizer and prior, GRPO and hindsight distillation losses.

Nothing here imports Prefect or ``verifiers``: rewards arrive as numbers.
"""

from .hindsight import HintedExample, RelabeledExample, achieved_value, feedback_hint, hint_prompt, relabel, top_scale_value
from .losses import (
    GRPOLossConfig,
    group_advantages,
    grpo_loss,
    reverse_kl_distill_loss,
    sft_loss,
    spread_mask,
    uncertainty_weights,
)
from .model import Policy, PolicyConfig, Rollout, TokenBatch, collate
from .prior import (
    SHIPPED_PRIOR_DIR,
    LowQualityPrior,
    PretrainConfig,
    PretrainReport,
    build_prior,
    load_or_pretrain,
    prior_cache_key,
    prior_dir,
    pretrain,
    sample_metrics,
    save_prior,
    shipped_prior,
)
from .smiles import build_smiles_tokenizer, gap_bin_tokens, goal_prompt_ids, goal_window, split_smiles
from .trainer import PolicyTrainer, TrainerConfig

__all__ = [
    "SHIPPED_PRIOR_DIR",
    "GRPOLossConfig",
    "LowQualityPrior",
    "HintedExample",
    "Policy",
    "PolicyConfig",
    "PolicyTrainer",
    "PretrainConfig",
    "PretrainReport",
    "RelabeledExample",
    "Rollout",
    "TokenBatch",
    "TrainerConfig",
    "achieved_value",
    "top_scale_value",
    "build_prior",
    "build_smiles_tokenizer",
    "collate",
    "feedback_hint",
    "gap_bin_tokens",
    "goal_prompt_ids",
    "goal_window",
    "group_advantages",
    "grpo_loss",
    "hint_prompt",
    "load_or_pretrain",
    "pretrain",
    "prior_cache_key",
    "prior_dir",
    "relabel",
    "reverse_kl_distill_loss",
    "sample_metrics",
    "save_prior",
    "sft_loss",
    "shipped_prior",
    "spread_mask",
    "split_smiles",
    "uncertainty_weights",
]
