"""Fixtures for the policies tests: the SMILES tokenizer and a tiny randomly initialised GPT-2."""

from __future__ import annotations

import pytest

from arl_flows.suites.molecules.smiles import build_smiles_tokenizer
from arl_flows.suites.molecules.datasets import load_qm9_gaps
from tests.helpers.tiny_policy import make_tiny_policy


@pytest.fixture(scope="session")
def qm9():
    return load_qm9_gaps()


@pytest.fixture(scope="session")
def smiles_tokenizer(qm9):
    return build_smiles_tokenizer(s for s, _ in qm9)


@pytest.fixture
def tiny_policy(smiles_tokenizer):
    return make_tiny_policy(smiles_tokenizer)
