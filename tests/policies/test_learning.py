"""Learning actually happens: GRPO from the shipped prior raises a cheap RDKit reward."""

from __future__ import annotations

import pytest
import torch
from rdkit import Chem, rdBase

from policies import GRPOLossConfig, PolicyTrainer, TrainerConfig

from arl_flows.suites.molecules.prior import PretrainConfig, load_or_pretrain

from arl_flows.suites.molecules.smiles import goal_prompt_ids

# The default prior, shipped with the package (arl_flows/suites/molecules/data/smiles_prior): loaded, never pretrained here.
DEFAULT_PRIOR = PretrainConfig()


def at_least_two_nitrogens(texts: list[str]) -> list[float]:
    """1 for a valid molecule with >= 2 nitrogen atoms, else 0 (invalid SMILES earn nothing)."""
    out = []
    with rdBase.BlockLogs():  # not RDLogger.DisableLog: that is process-wide and verifiers read RDKit's log
        for s in texts:
            mol = Chem.MolFromSmiles(s) if s else None
            out.append(float(mol is not None and sum(a.GetSymbol() == "N" for a in mol.GetAtoms()) >= 2))
    return out


@pytest.mark.slow
def test_grpo_raises_the_nitrogen_reward_and_moves_every_parameter():
    torch.manual_seed(0)
    policy, _ = load_or_pretrain(DEFAULT_PRIOR)
    tok = policy.tokenizer
    prompts = [goal_prompt_ids(tok, lo, lo + 0.5) for lo in (4.0, 5.0, 5.5, 6.0, 6.5, 7.0, 7.5, 8.0)]

    def mean_reward(seed: int) -> float:
        r = policy.sample(prompts, group_size=32, max_new_tokens=40, seed=seed)
        return sum(at_least_two_nitrogens(r.texts)) / len(r.texts)

    before_reward = mean_reward(seed=1000)
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    trainer = PolicyTrainer(
        policy,
        TrainerConfig(group_size=8, max_new_tokens=40, lr=5e-4, num_iterations=2, micro_batch_size=32,
                      loss=GRPOLossConfig(loss_type="dapo")),
    )
    history = []
    for step in range(30):
        _, metrics = trainer.train_step(prompts, at_least_two_nitrogens, seed=step)
        history.append(metrics)
        assert all(v == v for v in metrics.values())  # no NaN metrics
    after_reward = mean_reward(seed=1000)

    assert after_reward > before_reward + 0.2, (before_reward, after_reward, [h["reward/mean"] for h in history])
    unchanged = [n for n, p in policy.model.named_parameters() if p.requires_grad and torch.equal(p, before[n])]
    assert not unchanged, unchanged
