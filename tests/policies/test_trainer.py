"""The GRPO training step: gradient accumulation, dynamic sampling, reference KL, metrics."""

from __future__ import annotations

import copy

import pytest
import torch

from policies import GRPOLossConfig, PolicyTrainer, TrainerConfig

from arl_flows.suites.molecules.smiles import goal_prompt_ids


def _rollout(policy):
    tok = policy.tokenizer
    prompts = [goal_prompt_ids(tok, 3.0, 3.5), goal_prompt_ids(tok, 6.0, 7.0)]
    return policy.sample(prompts, group_size=4, max_new_tokens=8, seed=3)


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "dr_grpo"])
def test_micro_batches_accumulate_the_same_gradient(tiny_policy, loss_type):
    rollout = _rollout(tiny_policy)
    rewards = [0.0, 1.0, 0.5, 0.2, 1.0, 0.0, 0.0, 0.3]
    grads = []
    for micro in (None, 3):
        policy = copy.deepcopy(tiny_policy)
        cfg = TrainerConfig(group_size=4, micro_batch_size=micro, max_grad_norm=None,
                            loss=GRPOLossConfig(loss_type=loss_type, max_completion_length=8))
        metrics = PolicyTrainer(policy, cfg).step(rollout, rewards)
        grads.append(torch.cat([p.grad.flatten() for p in policy.model.parameters() if p.grad is not None]))
        assert metrics["clip/low"] == 0 and metrics["clip/high"] == 0  # ratio is 1 on the first iteration
    torch.testing.assert_close(grads[0], grads[1], atol=1e-6, rtol=1e-4)


def test_flat_groups_are_skipped_and_metrics_are_namespaced(tiny_policy):
    rollout = _rollout(tiny_policy)
    before = [p.detach().clone() for p in tiny_policy.model.parameters()]
    trainer = PolicyTrainer(tiny_policy, TrainerConfig(group_size=4))
    metrics = trainer.step(rollout, [1.0] * 8)
    assert metrics["step/skipped"] == 1.0 and metrics["groups/kept_frac"] == 0.0
    assert all(torch.equal(a, b) for a, b in zip(before, tiny_policy.model.parameters(), strict=True))
    metrics = trainer.step(rollout, [1.0] * 4 + [0.0, 1.0, 0.0, 1.0])
    assert metrics["groups/kept_frac"] == 0.5
    assert {"reward/mean", "loss/policy", "grad/norm", "advantage/mean", "policy/entropy"} <= set(metrics)
    with pytest.raises(ValueError, match="one reward"):
        trainer.step(rollout, [1.0] * 3)


def test_reference_kl_and_inner_iterations(tiny_policy):
    rollout = _rollout(tiny_policy)
    ref = copy.deepcopy(tiny_policy)
    with pytest.raises(ValueError, match="reference"):
        PolicyTrainer(tiny_policy, TrainerConfig(group_size=4, loss=GRPOLossConfig(beta=0.1)))
    trainer = PolicyTrainer(
        tiny_policy, TrainerConfig(group_size=4, num_iterations=3, lr=1e-2, loss=GRPOLossConfig(beta=0.1)), ref_policy=ref
    )
    metrics = trainer.step(rollout, [0.0, 1.0, 0.5, 0.2, 1.0, 0.0, 0.0, 0.3], reward_stds=[0.1] * 8)
    # after two updates on the same rollout the policy has drifted from both old and reference
    assert metrics["policy/kl"] > 0 and metrics["policy/ratio_mean"] != pytest.approx(1.0, abs=1e-6)


def test_stale_rows_use_the_decoupled_loss_and_beyond_the_bound_are_dropped(tiny_policy):
    rollout = _rollout(tiny_policy)  # sampled by version 0
    rewards = [0.0, 1.0, 0.5, 0.2, 1.0, 0.0, 0.0, 0.3]
    on_policy = []
    for staleness in (None, [0] * 8):  # at staleness 0 the decoupled loss is GRPO's: the same gradient
        policy = copy.deepcopy(tiny_policy)
        PolicyTrainer(policy, TrainerConfig(group_size=4, max_grad_norm=None)).step(rollout, rewards, staleness=staleness)
        on_policy.append(torch.cat([p.grad.flatten() for p in policy.model.parameters() if p.grad is not None]))
    torch.testing.assert_close(on_policy[0], on_policy[1], atol=1e-6, rtol=1e-4)

    trainer = PolicyTrainer(tiny_policy, TrainerConfig(group_size=4, lr=1e-2, max_staleness=2))
    trainer.step(rollout, rewards)  # the learner moves on: version 1
    before = [p.detach().clone() for p in tiny_policy.model.parameters()]
    metrics = trainer.step(rollout, rewards, staleness=[1] * 4 + [3] * 4)
    assert metrics["groups/kept_frac"] == 0.5  # the group 3 versions old is past the bound of 2
    assert metrics["offpolicy/dropped_frac"] == 0.5
    assert metrics["staleness/1"] == 4.0 and metrics["staleness/3"] == 4.0
    assert metrics["offpolicy/behaviour_weight_mean"] != pytest.approx(1.0, abs=1e-6)  # pi_prox != pi_behav now
    assert torch.isfinite(torch.tensor(metrics["loss/policy"]))
    assert any(not torch.equal(a, b) for a, b in zip(before, tiny_policy.model.parameters(), strict=True))
    with pytest.raises(ValueError, match="one staleness"):
        trainer.step(rollout, rewards, staleness=[0])


def test_groups_follow_their_ids_not_the_row_order(tiny_policy):
    """Rows of two groups interleaved (as a ledger read may return them) get the advantages of their own group."""
    rollout = _rollout(tiny_policy)
    rewards = [0.0, 1.0, 0.5, 0.2, 1.0, 0.0, 0.0, 0.3]
    ids = ["a"] * 4 + ["b"] * 4
    shuffled = [4, 0, 5, 1, 6, 2, 7, 3]  # a, b alternating: positional groups of 4 would mix the prompts
    cfg = TrainerConfig(group_size=4, max_grad_norm=None, loss=GRPOLossConfig(max_completion_length=8))
    grads = []
    for rows in (list(range(8)), shuffled):
        policy = copy.deepcopy(tiny_policy)
        PolicyTrainer(policy, cfg).step(rollout.select(rows), [rewards[r] for r in rows], group_ids=[ids[r] for r in rows])
        grads.append(torch.cat([p.grad.flatten() for p in policy.model.parameters() if p.grad is not None]))
    torch.testing.assert_close(grads[0], grads[1], atol=1e-6, rtol=1e-4)

    trainer = PolicyTrainer(copy.deepcopy(tiny_policy), cfg)
    with pytest.raises(ValueError, match="group 'a' has 3 rows"):
        trainer.step(rollout, rewards, group_ids=["a"] * 3 + ["b"] * 5)
    with pytest.raises(ValueError, match="different prompts"):
        trainer.step(rollout, rewards, group_ids=["a", "b"] * 4)
    with pytest.raises(ValueError, match="one group id per completion"):
        trainer.step(rollout, rewards, group_ids=ids[:7])
