"""Losses against hand-computed values on a 2x3 example, and advantage edge cases."""

from __future__ import annotations

import math

import pytest
import torch

from policies import (
    GRPOLossConfig,
    group_advantages,
    group_order,
    grpo_loss,
    reverse_kl_distill_loss,
    sft_loss,
    spread_mask,
    uncertainty_weights,
)

# Two sequences, three tokens; the last token of row 1 is padding.
# log ratios are chosen so the ratios are 1, 1.5, 0.5 (row 0) and 0.9, 1.1, 1 (row 1).
LOGPS = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -1.2, -2.0]])
RATIOS = torch.tensor([[1.0, 1.5, 0.5], [0.9, 1.1, 1.0]])
OLD = LOGPS - RATIOS.log()
ADV = torch.tensor([1.0, -2.0])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
# per-token -min(r A, clip(r, 0.8, 1.2) A):
#   row 0 (A=+1): -1.0, -1.2 (clipped high), -0.5 (unclipped: min picks 0.5 < 0.8)
#   row 1 (A=-2): +1.8, +2.2, (masked)
HAND = {
    "grpo": ((-1.0 - 1.2 - 0.5) / 3 + (1.8 + 2.2) / 2) / 2,  # mean of sequence means = 0.55
    "bnpo": (-2.7 + 4.0) / 5,  # token mean = 0.26
    "dapo": (-2.7 + 4.0) / 5,
    "dr_grpo": (-2.7 + 4.0) / (2 * 4),  # max_completion_length = 4
}


@pytest.mark.parametrize("loss_type", list(HAND))
def test_loss_types_hand_computed(loss_type):
    config = GRPOLossConfig(loss_type=loss_type, epsilon_low=0.2, epsilon_high=0.2, max_completion_length=4)
    loss, metrics = grpo_loss(LOGPS, OLD, ADV, MASK, config=config)
    assert loss.item() == pytest.approx(HAND[loss_type], abs=1e-6)
    assert metrics["clip/high"] == pytest.approx(1 / 5)  # token (0, 1): ratio 1.5 > 1.2 with A > 0
    assert metrics["clip/low"] == 0.0  # ratio 0.5 has A > 0, so it is not low-clipped
    assert metrics["tokens/count"] == 5


def test_k3_kl_term_hand_computed():
    # ref - logp = ln 2 everywhere: k3 = 2 - ln 2 - 1 on every token
    k3 = 2 - math.log(2) - 1
    config = GRPOLossConfig(loss_type="grpo", epsilon_low=0.2, epsilon_high=0.2, beta=0.1)
    loss, metrics = grpo_loss(LOGPS, OLD, ADV, MASK, ref_logps=LOGPS + math.log(2), config=config)
    assert loss.item() == pytest.approx(HAND["grpo"] + 0.1 * k3, abs=1e-6)
    assert metrics["policy/kl"] == pytest.approx(k3, abs=1e-6)


def test_beta_without_reference_is_a_clear_error():
    with pytest.raises(ValueError, match="ref_logps"):
        grpo_loss(LOGPS, OLD, ADV, MASK, config=GRPOLossConfig(beta=0.1))


def test_mask_truncated_drops_the_row():
    config = GRPOLossConfig(loss_type="bnpo", epsilon_low=0.2, epsilon_high=0.2, mask_truncated=True)
    loss, _ = grpo_loss(LOGPS, OLD, ADV, MASK, config=config, truncated=torch.tensor([False, True]))
    assert loss.item() == pytest.approx(-2.7 / 3, abs=1e-6)


def test_uncertainty_downweights_advantages():
    w = uncertainty_weights(torch.tensor([0.0, 0.5, 1.0]), scale=0.5)
    torch.testing.assert_close(w, torch.tensor([1.0, 0.5, 0.2]))
    config = GRPOLossConfig(loss_type="bnpo", epsilon_low=0.2, epsilon_high=0.2, uncertainty_scale=1.0)
    # row 1's reward std = 1 halves its advantage to -1: tokens 0.9 and 1.1
    loss, _ = grpo_loss(LOGPS, OLD, ADV, MASK, config=config, reward_std=torch.tensor([0.0, 1.0]))
    assert loss.item() == pytest.approx((-2.7 + 0.9 + 1.1) / 5, abs=1e-6)


def test_group_advantages_hand_computed_and_zero_spread():
    rewards = torch.tensor([1.0, 2.0, 3.0, 0.7, 0.7, 0.7])
    adv = group_advantages(rewards, group_size=3, scale="group", eps=0.0)
    torch.testing.assert_close(adv, torch.tensor([-1.0, 0.0, 1.0, 0.0, 0.0, 0.0]))  # group std = 1 (unbiased)
    none = group_advantages(rewards, group_size=3, scale="none")
    torch.testing.assert_close(none, torch.tensor([-1.0, 0.0, 1.0, 0.0, 0.0, 0.0]))
    batch = group_advantages(rewards, group_size=3, scale="batch", eps=0.0)
    torch.testing.assert_close(batch, torch.tensor([-1.0, 0.0, 1.0, 0.0, 0.0, 0.0]) / rewards.std())
    assert spread_mask(rewards, 3).tolist() == [True] * 3 + [False] * 3
    # 0.1 * 3 / 3 is not exactly 0.1 in floating point; a flat group must still give exactly 0
    assert group_advantages(torch.full((4,), 0.1), 4).abs().max().item() == 0.0


def test_group_advantages_rejects_ragged_groups():
    with pytest.raises(ValueError, match="divisible"):
        group_advantages(torch.zeros(5), group_size=2)


def test_group_order_gathers_each_groups_rows_in_order_of_first_appearance():
    assert group_order(["b", "a", "b", "a"], group_size=2).tolist() == [0, 2, 1, 3]
    rewards = torch.tensor([1.0, 0.0, 3.0, 2.0])  # b: 1, 3; a: 0, 2
    order = group_order(["b", "a", "b", "a"], group_size=2)
    assert group_advantages(rewards[order], 2, scale="none").tolist() == [-1.0, 1.0, -1.0, 1.0]
    with pytest.raises(ValueError, match="group 'a' has 1 rows"):
        group_order(["a", "b", "b"], group_size=2)


def test_sft_loss_is_masked_token_mean():
    assert sft_loss(LOGPS, MASK).item() == pytest.approx((1 + 2 + 0.5 + 0.3 + 1.2) / 5)


def test_reverse_kl_zero_for_equal_logits_and_positive_otherwise():
    gen = torch.Generator().manual_seed(0)
    s = torch.randn(2, 3, 5, generator=gen)
    t = torch.randn(2, 3, 5, generator=gen)
    zero, _ = reverse_kl_distill_loss(s, s.clone(), MASK)
    assert abs(zero.item()) < 1e-6
    kl, _ = reverse_kl_distill_loss(s, t, MASK)
    ps, pt = s.softmax(-1), t.softmax(-1)
    hand = ((ps * (ps.log() - pt.log())).sum(-1) * MASK).sum() / MASK.sum()
    assert kl.item() == pytest.approx(hand.item(), abs=1e-6) and kl.item() > 0
