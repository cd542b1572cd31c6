"""The decoupled (behaviour vs proximal) clipped loss and staleness weights, against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from policies import GRPOLossConfig, decoupled_ppo_loss, grpo_loss, staleness_histogram, staleness_weights

L = math.log
# Two sequences, two tokens; row 1's second token is padding (its numbers must not matter).
BEHAV = torch.tensor([[L(0.5), L(0.4)], [L(0.2), L(0.9)]])  # the stale policy that sampled
PROX = torch.tensor([[L(0.6), L(0.4)], [L(0.3), L(0.1)]])  # the learner's weights before this update
THETA = torch.tensor([[L(0.9), L(0.3)], [L(0.3), L(0.5)]])  # the weights being optimised
ADV = torch.tensor([1.0, -1.0])
MASK = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
# eps_low 0.2, eps_high 0.28 (defaults). Per token  -w * min(u A, clip(u) A),  w = prox/behav, u = theta/prox:
#   row 0, t0: w = 0.6/0.5 = 1.2, u = 0.9/0.6 = 1.5 -> clip 1.28; A=+1: min(1.5, 1.28) = 1.28 -> -1.536
#   row 0, t1: w = 1,             u = 0.3/0.4 = 0.75 -> clip 0.8; A=+1: min(0.75, 0.8) = 0.75 -> -0.75
#   row 1, t0: w = 0.3/0.2 = 1.5, u = 1;                 A=-1: min(-1, -1) = -1     -> +1.5
# dapo: sum / 3 tokens = (-1.536 - 0.75 + 1.5) / 3 = -0.262
HAND_LOSS = (-1.536 - 0.75 + 1.5) / 3
# cap 1.3 zeroes row 1 t0 (w = 1.5 > 1.3); it still counts in the normaliser: (-1.536 - 0.75) / 3
HAND_CAPPED = (-1.536 - 0.75) / 3


def test_decoupled_loss_matches_the_hand_computed_case() -> None:
    theta = THETA.clone().requires_grad_(True)
    loss, metrics = decoupled_ppo_loss(theta, PROX, BEHAV, ADV, MASK)
    assert loss.item() == pytest.approx(HAND_LOSS, abs=1e-6)
    assert metrics["offpolicy/behaviour_weight_mean"] == pytest.approx((1.2 + 1.0 + 1.5) / 3, abs=1e-6)
    loss.backward()
    # d/dtheta of -w * u * A = -w * u * A (u = exp(theta - prox)) where unclipped, 0 where clipped.
    expected = torch.tensor([[0.0, -0.75 / 3], [1.5 / 3, 0.0]])
    assert torch.allclose(theta.grad, expected, atol=1e-6)


def test_behaviour_weight_cap_drops_far_off_policy_tokens() -> None:
    loss, metrics = decoupled_ppo_loss(THETA, PROX, BEHAV, ADV, MASK, behaviour_weight_cap=1.3)
    assert loss.item() == pytest.approx(HAND_CAPPED, abs=1e-6)
    assert metrics["offpolicy/behaviour_capped"] == pytest.approx(1 / 3, abs=1e-6)


def test_on_policy_it_is_the_clipped_grpo_loss() -> None:
    """With the behaviour policy equal to the proximal one, w = 1: GRPO's loss (beta 0), for every aggregation."""
    for loss_type in ("grpo", "bnpo", "dapo", "dr_grpo"):
        cfg = GRPOLossConfig(loss_type=loss_type)
        ours, _ = decoupled_ppo_loss(THETA, PROX, PROX, ADV, MASK, config=cfg)
        theirs, _ = grpo_loss(THETA, PROX, ADV, MASK, config=cfg)
        assert ours.item() == pytest.approx(theirs.item(), abs=1e-6), loss_type


def test_sample_weights_scale_each_row() -> None:
    half, _ = decoupled_ppo_loss(THETA, PROX, BEHAV, ADV, MASK, sample_weights=torch.tensor([0.5, 0.0]))
    assert half.item() == pytest.approx(0.5 * (-1.536 - 0.75) / 3, abs=1e-6)


def test_kl_term_is_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="beta = 0"):
        decoupled_ppo_loss(THETA, PROX, BEHAV, ADV, MASK, config=GRPOLossConfig(beta=0.1))


@pytest.mark.parametrize(
    ("max_staleness", "decay", "expected"),
    [
        (2, 1.0, [1.0, 1.0, 1.0, 0.0]),  # drop beyond the bound
        (2, 0.5, [1.0, 0.5, 0.25, 0.0]),  # down-weight within it, drop beyond
        (None, 0.5, [1.0, 0.5, 0.25, 0.125]),  # no bound
        (0, 1.0, [1.0, 0.0, 0.0, 0.0]),  # on-policy only
    ],
)
def test_staleness_weights(max_staleness: int | None, decay: float, expected: list[float]) -> None:
    w = staleness_weights(torch.tensor([0, 1, 2, 3]), max_staleness, decay)
    assert w.tolist() == pytest.approx(expected)


def test_staleness_histogram_counts_rows_per_version_lag() -> None:
    assert staleness_histogram([0, 0, 2, 2, 2, 5]) == {"staleness/0": 2.0, "staleness/2": 3.0, "staleness/5": 1.0}
    assert staleness_histogram([]) == {}
