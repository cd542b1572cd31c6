"""Fixtures for the policies tests: the SMILES tokenizer and a tiny randomly initialised GPT-2."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config

from policies import Policy

from arl_flows.suites.molecules.smiles import build_smiles_tokenizer
from arl_flows.suites.molecules.datasets import load_qm9_gaps


@pytest.fixture(scope="session")
def qm9():
    return load_qm9_gaps()


@pytest.fixture(scope="session")
def smiles_tokenizer(qm9):
    return build_smiles_tokenizer(s for s, _ in qm9)


def make_tiny_policy(tokenizer, seed: int = 0, n_layer: int = 2, n_embd: int = 32) -> Policy:
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=64, n_embd=n_embd, n_layer=n_layer, n_head=2,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )
    return Policy.from_config(config, tokenizer)


@pytest.fixture
def tiny_policy(smiles_tokenizer):
    return make_tiny_policy(smiles_tokenizer)
