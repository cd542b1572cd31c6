"""Pure loss functions: group advantages, the GRPO family, SFT and reverse-KL distillation.

Every function takes tensors and returns tensors (and a metrics dict); none
touches a model. Shapes: B sequences, T completion tokens, V vocabulary, G
group size. ``mask`` is 1 on tokens that carry loss (completion tokens the
policy wrote), 0 on prompt, observation and padding tokens.

Formulas:
- GRPO: Shao et al. 2024, "DeepSeekMath", eq. 3 (clipped surrogate, k3 KL
  ``exp(ref - logp) - (ref - logp) - 1`` to the reference, sequence-mean of
  token-means).
- DAPO: Yu et al. 2025, "DAPO" (clip-higher ``epsilon_high > epsilon_low``,
  token-level mean over the whole batch, dynamic sampling of groups with spread).
- Dr. GRPO: Liu et al. 2025, "Understanding R1-Zero-Like Training" (no std in
  the advantage, token sum divided by a constant ``B * max_completion_length``).
- Decoupled PPO for stale samples: Hilton et al. 2022, "Batch size-invariance
  for policy optimization" (arXiv:2110.00641), as AReaL uses it for
  asynchronous RL: Fu et al. 2025, "AReaL: A Large-Scale Asynchronous
  Reinforcement Learning System for Language Reasoning" (arXiv:2505.24298).
The aggregation of each ``loss_type`` follows TRL's GRPOTrainer so that the two
agree to float precision (tested in tests/policies/test_losses_vs_trl.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from .config import GRPOLossConfig

__all__ = [
    "GRPOLossConfig",
    "decoupled_ppo_loss",
    "group_advantages",
    "group_order",
    "grpo_loss",
    "reverse_kl_distill_loss",
    "sft_loss",
    "spread_mask",
    "staleness_histogram",
    "staleness_weights",
    "uncertainty_weights",
]


def group_advantages(
    rewards: torch.Tensor,
    group_size: int,
    scale: Literal["group", "batch", "none"] = "group",
    eps: float = 1e-4,
) -> torch.Tensor:
    """Group-relative advantages (B,) from rewards (B,), groups of ``group_size`` consecutive rows.

    ``group``: (r - group mean) / (group std + eps) (DeepSeekMath); ``batch``: the std is the
    whole batch's (TRL ``scale_rewards='batch'``); ``none``: r - group mean (Dr. GRPO).
    Stds are unbiased, as in TRL. A group whose rewards are all equal gets exactly 0.
    """
    if rewards.dim() != 1 or rewards.numel() % group_size:
        raise ValueError(
            f"rewards must be 1-D with a length divisible by group_size={group_size}, got {tuple(rewards.shape)}"
        )
    grouped = rewards.view(-1, group_size)  # (B/G, G)
    centred = grouped - grouped.mean(dim=1, keepdim=True)  # (B/G, G)
    if scale == "group":
        std = grouped.std(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(grouped[:, :1])  # (B/G, 1)
        adv = centred / (std + eps)
    elif scale == "batch":
        std = rewards.std() if rewards.numel() > 1 else rewards.new_zeros(())
        adv = centred / (std + eps)
    elif scale == "none":
        adv = centred
    else:
        raise ValueError(f"scale must be 'group', 'batch' or 'none', got {scale!r}")
    flat = grouped.amax(dim=1, keepdim=True) == grouped.amin(dim=1, keepdim=True)  # (B/G, 1)
    return adv.masked_fill(flat, 0.0).reshape(-1)  # (B,)


def group_order(group_ids: Sequence[str], group_size: int) -> torch.Tensor:
    """(B,) long permutation that puts each group's rows next to each other, groups in order of first appearance.

    ``group_advantages`` and ``spread_mask`` take groups of ``group_size`` consecutive rows;
    ``rewards[order]`` is that layout whatever order the rows came in (a ledger read, a
    merged batch). A group with other than ``group_size`` rows is an error that names it.
    """
    rows: dict[str, list[int]] = {}
    for i, g in enumerate(group_ids):
        rows.setdefault(g, []).append(i)
    wrong = next(((g, len(r)) for g, r in rows.items() if len(r) != group_size), None)
    if wrong is not None:
        raise ValueError(
            f"group {wrong[0]!r} has {wrong[1]} rows, GRPO needs group_size={group_size}: pass every completion of a group, "
            "and group ids that one prompt's samples share"
        )
    return torch.tensor([i for r in rows.values() for i in r], dtype=torch.long)  # (B,)


def spread_mask(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """(B,) bool: True for rows whose group has reward spread (DAPO dynamic sampling keeps these)."""
    grouped = rewards.view(-1, group_size)  # (B/G, G)
    keep = grouped.amax(dim=1) > grouped.amin(dim=1)  # (B/G,)
    return keep.repeat_interleave(group_size)  # (B,)


def uncertainty_weights(reward_std: torch.Tensor, scale: float) -> torch.Tensor:
    """(B,) weights 1 / (1 + (std / scale)^2) in (0, 1]: uncertain rewards move the policy less."""
    return 1.0 / (1.0 + (reward_std / scale) ** 2)


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def _mask_and_advantages(
    mask: torch.Tensor,
    advantages: torch.Tensor,
    config: GRPOLossConfig,
    truncated: torch.Tensor | None,
    reward_std: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The (B, T) mask without truncated rows (``mask_truncated``) and the (B,) advantages weighted by reward certainty."""
    if config.mask_truncated and truncated is not None:
        mask = mask * (~truncated.bool()).to(mask.dtype).unsqueeze(1)  # (B, T)
    if config.uncertainty_scale is not None and reward_std is not None:
        advantages = advantages * uncertainty_weights(reward_std, config.uncertainty_scale)  # (B,)
    return mask, advantages


def _clip_metrics(
    loss: torch.Tensor, ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, config: GRPOLossConfig
) -> dict[str, float]:
    """Metrics every clipped surrogate reports: the loss, the share of tokens clipped on each side, the mean ratio."""
    low = ((ratio < 1 - config.epsilon_low) & (adv < 0)).float()  # (B, T)
    high = ((ratio > 1 + config.epsilon_high) & (adv > 0)).float()  # (B, T)
    return {
        "loss/policy": loss.item(),
        "clip/low": _masked_mean(low, mask).item(),
        "clip/high": _masked_mean(high, mask).item(),
        "clip/region": _masked_mean(torch.maximum(low, high), mask).item(),
        "policy/ratio_mean": _masked_mean(ratio, mask).item(),
    }


def grpo_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    ref_logps: torch.Tensor | None = None,
    config: GRPOLossConfig | None = None,
    truncated: torch.Tensor | None = None,
    reward_std: torch.Tensor | None = None,
    entropies: torch.Tensor | None = None,
    num_items_in_batch: float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped surrogate loss of the GRPO family and its metrics.

    logps, old_logps, ref_logps, mask, entropies: (B, T); advantages, truncated, reward_std: (B,).
    ``num_items_in_batch`` is DAPO's token normaliser when one optimizer step spans several
    micro-batches (the mask total over all of them); by default this batch's mask total.
    """
    config = config or GRPOLossConfig()
    mask, adv = _mask_and_advantages(mask.to(logps.dtype), advantages, config, truncated, reward_std)
    adv = adv.unsqueeze(1)  # (B, 1)

    ratio = torch.exp(logps - old_logps)  # (B, T)
    clipped = torch.clamp(ratio, 1 - config.epsilon_low, 1 + config.epsilon_high)  # (B, T)
    per_token = -torch.min(ratio * adv, clipped * adv)  # (B, T)
    kl = None
    if config.beta != 0.0:
        if ref_logps is None:
            raise ValueError("beta > 0 needs ref_logps (log-probs of the reference model)")
        delta = ref_logps - logps  # (B, T)
        kl = torch.exp(delta) - delta - 1  # (B, T), k3 estimator, >= 0
        if config.kl_importance_correction:
            kl = kl * ratio  # (B, T)
        per_token = per_token + config.beta * kl

    loss = _aggregate(per_token, mask, config, num_items_in_batch)  # ()

    with torch.no_grad():
        ent = entropies if entropies is not None else -logps  # -logp is a one-sample entropy estimate
        metrics = {
            **_clip_metrics(loss, ratio, adv, mask, config),
            "policy/entropy": _masked_mean(ent, mask).item(),
            "advantage/mean": advantages.float().mean().item(),
            "advantage/std": advantages.float().std().item() if advantages.numel() > 1 else 0.0,
            "advantage/min": advantages.float().min().item(),
            "advantage/max": advantages.float().max().item(),
            "tokens/count": mask.sum().item(),
        }
        if kl is not None:
            metrics["policy/kl"] = _masked_mean(kl, mask).item()
    return loss, metrics


def _aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, config: GRPOLossConfig, num_items_in_batch: float | torch.Tensor | None
) -> torch.Tensor:
    """() loss from (B, T) per-token losses by ``config.loss_type`` (see :class:`GRPOLossConfig`)."""
    if config.loss_type == "grpo":
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()  # ()
    if config.loss_type == "bnpo":
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    if config.loss_type == "dapo":
        norm = mask.sum() if num_items_in_batch is None else torch.as_tensor(num_items_in_batch, dtype=mask.dtype)
        return (per_token * mask).sum() / norm.clamp(min=1.0)
    if config.loss_type == "dr_grpo":
        width = config.max_completion_length or mask.shape[1]
        return (per_token * mask).sum() / (per_token.shape[0] * width)
    raise ValueError(config.loss_type)  # pragma: no cover - pydantic guards the literal


def staleness_weights(staleness: torch.Tensor, max_staleness: int | None, decay: float = 1.0) -> torch.Tensor:
    """(B,) sample weights from (B,) staleness in policy versions (newest weights minus the sampler's).

    ``decay ** staleness`` up to ``max_staleness``, 0 beyond it (the row is dropped); ``decay = 1``
    keeps every row within the bound at full weight, as AReaL's bounded staleness does.
    """
    s = staleness.to(torch.float32)  # (B,)
    w = torch.full_like(s, float(decay)) ** s  # (B,)
    if max_staleness is not None:
        w = torch.where(s > max_staleness, torch.zeros_like(w), w)  # (B,)
    return w


def staleness_histogram(staleness: torch.Tensor | list[int]) -> dict[str, float]:
    """``{"staleness/0": rows sampled by the newest weights, "staleness/1": one version behind, ...}``."""
    values = torch.as_tensor(staleness, dtype=torch.long).reshape(-1)  # (B,)
    if values.numel() == 0:
        return {}
    counts = torch.bincount(values.clamp(min=0))  # (max + 1,)
    return {f"staleness/{k}": float(c) for k, c in enumerate(counts.tolist()) if c}


def decoupled_ppo_loss(
    logps: torch.Tensor,
    prox_logps: torch.Tensor,
    behav_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    config: GRPOLossConfig | None = None,
    behaviour_weight_cap: float | None = None,
    sample_weights: torch.Tensor | None = None,
    reward_std: torch.Tensor | None = None,
    truncated: torch.Tensor | None = None,
    num_items_in_batch: float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped surrogate for samples drawn by an older (behaviour) policy, and its metrics.

    Decoupled PPO (Hilton et al. 2022, arXiv:2110.00641; used for asynchronous RL by
    Fu et al. 2025, "AReaL", arXiv:2505.24298)::

        J(theta) = E_t[ w_t * min(u_t * A, clip(u_t, 1 - eps_low, 1 + eps_high) * A) ]
        w_t = pi_prox(a_t) / pi_behav(a_t)       (a constant: no gradient)
        u_t = pi_theta(a_t) / pi_prox(a_t)

    The behaviour policy sampled the tokens; the proximal policy is the learner's weights
    before this update, so the trust region is around the newest policy, not the stale one.
    As AReaL does, a token whose ``w_t`` exceeds ``behaviour_weight_cap`` gets weight 0 (and
    still counts in the token normaliser). With ``prox_logps == behav_logps`` this is the
    GRPO family's clipped loss (``grpo_loss`` with ``beta = 0``).

    logps, prox_logps, behav_logps, mask: (B, T); advantages, sample_weights, reward_std, truncated: (B,).
    ``sample_weights`` multiply each row's advantage (e.g. :func:`staleness_weights`).
    """
    config = config or GRPOLossConfig()
    if config.beta != 0.0:
        raise ValueError("the decoupled loss has no KL term to a reference model: set loss.beta = 0")
    mask, adv = _mask_and_advantages(mask.to(logps.dtype), advantages, config, truncated, reward_std)
    if sample_weights is not None:
        adv = adv * sample_weights  # (B,)
    adv = adv.unsqueeze(1)  # (B, 1)

    with torch.no_grad():
        behav_w = torch.exp(prox_logps - behav_logps)  # (B, T)
        if behaviour_weight_cap is not None:
            capped = behav_w > behaviour_weight_cap  # (B, T)
            behav_w = behav_w.masked_fill(capped, 0.0)  # (B, T)
        else:
            capped = torch.zeros_like(behav_w, dtype=torch.bool)  # (B, T)
    ratio = torch.exp(logps - prox_logps)  # (B, T)
    clipped = torch.clamp(ratio, 1 - config.epsilon_low, 1 + config.epsilon_high)  # (B, T)
    per_token = -behav_w * torch.min(ratio * adv, clipped * adv)  # (B, T)
    loss = _aggregate(per_token, mask, config, num_items_in_batch)  # ()

    with torch.no_grad():
        metrics = {
            **_clip_metrics(loss, ratio, adv, mask, config),
            "offpolicy/behaviour_weight_mean": _masked_mean(behav_w, mask).item(),
            "offpolicy/behaviour_capped": _masked_mean(capped.float(), mask).item(),
            "advantage/mean": advantages.float().mean().item(),
            "tokens/count": mask.sum().item(),
        }
    return loss, metrics


def sft_loss(logps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token-mean negative log-likelihood; logps and mask (B, T)."""
    return -(logps * mask).sum() / mask.sum().clamp(min=1.0)


def reverse_kl_distill_loss(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-mean reverse KL(student || teacher) over the full vocabulary.

    student_logits, teacher_logits: (B, T, V), aligned so position t of both predicts the
    student's own sampled token t (teacher saw a different, hinted context); mask (B, T).
    The teacher is a target: its logits are detached. Reverse KL is mode-seeking, so the
    student moves its mass onto what the hinted teacher finds likely (on-policy distillation,
    Agarwal et al. 2024 "GKD"; Thinking Machines 2025 "On-Policy Distillation").
    """
    s_logp = student_logits.float().log_softmax(-1)  # (B, T, V)
    t_logp = teacher_logits.detach().float().log_softmax(-1)  # (B, T, V)
    per_token = (s_logp.exp() * (s_logp - t_logp)).sum(-1)  # (B, T), >= 0
    mask = mask.to(per_token.dtype)
    loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    return loss, {"loss/distill_kl": loss.item(), "tokens/count": mask.sum().item()}
