"""A tiny randomly initialised GPT-2 policy on a given tokenizer (seconds to build, for loss and distillation tests)."""

from __future__ import annotations

import torch
from transformers import GPT2Config

from policies import Policy

__all__ = ["make_tiny_policy"]


def make_tiny_policy(tokenizer, seed: int = 0, n_layer: int = 2, n_embd: int = 32) -> Policy:  # noqa: ANN001
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=64, n_embd=n_embd, n_layer=n_layer, n_head=2,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )
    return Policy.from_config(config, tokenizer)
