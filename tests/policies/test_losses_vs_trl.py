"""Each loss_type against TRL's GRPOTrainer on the same random tensors.

TRL 1.16 has no standalone loss function: the loss lives in ``GRPOTrainer._compute_loss``,
which computes the current log-probs itself by running the model. The harness therefore
builds a real ``GRPOTrainer`` (``tests.helpers.trl_loss``) around a tiny real model and replaces only its
``_get_per_token_logps_and_entropies`` method with one returning our random log-probs, so
the clipping, KL and aggregation code that runs is TRL's own.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("trl")
pytest.importorskip("datasets")

from policies import GRPOLossConfig, grpo_loss  # noqa: E402

from tests.helpers.tiny_policy import make_tiny_policy  # noqa: E402
from tests.helpers.trl_loss import trl_loss_trainer  # noqa: E402

B, T, G = 6, 7, 3


def _seed(key: tuple) -> int:
    return sum(ord(ch) * (i + 1) for i, ch in enumerate(repr(key)))  # stable across processes, unlike hash()


def _trl_trainer(tokenizer, tmp_path, loss_type: str, beta: float, eps_low: float, eps_high: float, kl_correction: bool):
    # A saved local model directory, so TRL can also load its reference copy for beta > 0.
    model_dir, _ = make_tiny_policy(tokenizer).save(tmp_path / "model")
    return trl_loss_trainer(
        model_dir, tokenizer, tmp_path / loss_type, per_device_train_batch_size=B, num_generations=G,
        max_completion_length=T, loss_type=loss_type, beta=beta, use_bias_correction_kl=kl_correction,
        epsilon=eps_low, epsilon_high=eps_high,
    )


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dapo", "dr_grpo"])
@pytest.mark.parametrize(("beta", "kl_correction"), [(0.0, False), (0.04, False), (0.04, True)])
def test_matches_trl(smiles_tokenizer, tmp_path, loss_type, beta, kl_correction):
    eps_low, eps_high = 0.2, 0.28
    gen = torch.Generator().manual_seed(_seed((loss_type, beta, kl_correction)))
    logps = (-torch.rand(B, T, generator=gen, dtype=torch.float64) * 3).float().requires_grad_(True)
    old_logps = (logps.detach() + 0.4 * torch.randn(B, T, generator=gen)).clamp(max=0)  # ratios inside and outside the clip
    ref_logps = (logps.detach() + 0.3 * torch.randn(B, T, generator=gen)).clamp(max=0)
    advantages = torch.randn(B, generator=gen)
    mask = torch.ones(B, T)
    for b in range(B):  # ragged completion lengths
        mask[b, 2 + b % (T - 2) :] = 0

    trainer = _trl_trainer(smiles_tokenizer, tmp_path, loss_type, beta, eps_low, eps_high, kl_correction)
    trl_logps = logps.detach().clone().requires_grad_(True)
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (trl_logps, torch.zeros(B, T), None)
    inputs = {
        "prompt_ids": torch.ones(B, 3, dtype=torch.long),
        "prompt_mask": torch.ones(B, 3, dtype=torch.long),
        "completion_ids": torch.ones(B, T, dtype=torch.long),
        "completion_mask": mask.long(),
        "advantages": advantages,
        "old_per_token_logps": old_logps,
        "ref_per_token_logps": ref_logps,
        "num_items_in_batch": mask.sum(),
    }
    trl_loss = trainer._compute_loss(trainer.model, inputs)
    trl_loss.backward()

    config = GRPOLossConfig(
        loss_type=loss_type, beta=beta, epsilon_low=eps_low, epsilon_high=eps_high, max_completion_length=T,
        kl_importance_correction=kl_correction,
    )
    ours, metrics = grpo_loss(logps, old_logps, advantages, mask, ref_logps=ref_logps if beta else None, config=config)
    ours.backward()

    assert abs(ours.item() - trl_loss.item()) < 1e-6
    torch.testing.assert_close(logps.grad, trl_logps.grad, atol=1e-6, rtol=0)
    trl_metrics = trainer._metrics["train"]
    assert metrics["clip/low"] == pytest.approx(trl_metrics["clip_ratio/low_mean"][-1], abs=1e-6)
    assert metrics["clip/high"] == pytest.approx(trl_metrics["clip_ratio/high_mean"][-1], abs=1e-6)
    assert metrics["clip/low"] + metrics["clip/high"] > 0  # the inputs do exercise the clip
    if beta:
        assert metrics["policy/kl"] == pytest.approx(trl_metrics["kl"][-1], abs=1e-6)
