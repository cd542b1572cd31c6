"""Settings of the policy and its training: plain pydantic models, no torch.

Kept apart from the tensor code so that a run config (and the ``arl`` command
line that reads one) can be validated without loading torch or transformers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["GRPOLossConfig", "PolicyConfig", "TrainerConfig"]


class PolicyConfig(BaseModel):
    """Where and in which precision the policy runs."""

    device: str = Field(default="cpu", description="Torch device, e.g. 'cpu' or 'cuda:0'.")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        default="float32", description="Weight dtype: float32 on CPU, bfloat16 on recent GPUs."
    )


class GRPOLossConfig(BaseModel):
    """Hyper-parameters of the clipped policy-gradient loss."""

    model_config = ConfigDict(extra="forbid")

    loss_type: Literal["grpo", "bnpo", "dapo", "dr_grpo"] = Field(
        default="dapo",
        description=(
            "Aggregation over tokens: 'grpo' = mean over sequences of each sequence's token mean; "
            "'bnpo' and 'dapo' = token mean over the batch; 'dr_grpo' = token sum / (B * max_completion_length)."
        ),
    )
    epsilon_low: float = Field(
        default=0.2, ge=0, lt=1, description="Lower clip: ratios below 1 - epsilon_low are clipped."
    )
    epsilon_high: float = Field(
        default=0.28,
        ge=0,
        description="Upper clip: ratios above 1 + epsilon_high are clipped (DAPO clip-higher uses 0.28).",
    )
    beta: float = Field(
        default=0.0, ge=0, description="Weight of the k3 KL to the reference model; 0 needs no reference."
    )
    kl_importance_correction: bool = Field(
        default=False,
        description=(
            "Multiply the k3 KL by the (differentiable) ratio pi/pi_old so its gradient is the unbiased "
            "reverse-KL gradient (DeepSeek-V3.2; TRL's use_bias_correction_kl, on by default there). "
            "False keeps DeepSeekMath's formula."
        ),
    )
    max_completion_length: int | None = Field(
        default=None, ge=1, description="Dr. GRPO's constant normaliser; None uses the padded completion width."
    )
    mask_truncated: bool = Field(
        default=False, description="Drop completions that hit the length limit from the loss (DAPO overlong filtering)."
    )
    uncertainty_scale: float | None = Field(
        default=None,
        gt=0,
        description=(
            "If set and reward stds are given, each advantage is multiplied by 1 / (1 + (std / scale)^2): "
            "a reward as uncertain as `scale` counts half, a certain one fully. None disables."
        ),
    )


class TrainerConfig(BaseModel):
    """Rollout and optimisation settings of a GRPO step."""

    model_config = ConfigDict(extra="forbid")

    group_size: int = Field(default=8, ge=2, description="Completions sampled per prompt (G).")
    temperature: float = Field(default=1.0, gt=0, description="Sampling temperature; log-probs use the same one.")
    top_p: float = Field(default=1.0, gt=0, le=1, description="Nucleus sampling threshold.")
    max_new_tokens: int = Field(default=48, ge=1, description="Completion length cap; longer ones are truncated.")
    lr: float = Field(default=1e-4, gt=0, description="AdamW learning rate.")
    weight_decay: float = Field(default=0.0, ge=0)
    max_grad_norm: float | None = Field(default=1.0, gt=0, description="Gradient-norm clip; None disables.")
    num_iterations: int = Field(
        default=1, ge=1, description="Inner updates per rollout, all reusing its old_logps (mu)."
    )
    micro_batch_size: int | None = Field(
        default=None,
        ge=1,
        description="Rows per forward/backward; gradients accumulate over the batch. None = one pass.",
    )
    advantage_scale: Literal["group", "batch", "none"] = Field(
        default="group", description="Advantage normalisation (see losses.group_advantages)."
    )
    dynamic_sampling: bool = Field(default=True, description="Skip groups whose rewards are all equal (DAPO).")
    loss: GRPOLossConfig = Field(default_factory=GRPOLossConfig)
    max_staleness: int | None = Field(
        default=4,
        ge=0,
        description="Off-policy rows (a staleness passed to step): groups sampled more than this many policy "
        "versions before the update are dropped. None keeps every group.",
    )
    staleness_decay: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="Off-policy rows within max_staleness weigh decay ** staleness (1: full weight, as AReaL).",
    )
    behaviour_weight_cap: float | None = Field(
        default=5.0,
        gt=0,
        description="Decoupled loss: tokens whose pi_prox / pi_behav exceeds this get weight 0 (AReaL's cap). "
        "None disables.",
    )
    sft_weight: float = Field(default=1.0, ge=0, description="Weight of the relabeled-SFT term in distill_step.")
    distill_weight: float = Field(
        default=1.0, ge=0, description="Weight of the hint-teacher reverse-KL term in distill_step."
    )
