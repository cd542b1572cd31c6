"""Prior pretraining runs end to end, reports its metrics and is cached."""

from __future__ import annotations

import pytest
import torch

from policies import PretrainConfig, load_or_pretrain, prior_dir, sample_metrics


def test_sample_metrics_counts_valid_unique_novel():
    m = sample_metrics(["CCO", "OCC", "C1CC", "c1ccccc1", "not smiles"], training_set={"CCO"})
    assert m["validity"] == 3 / 5  # C1CC has an open ring, "not smiles" does not parse
    assert m["uniqueness"] == 2 / 3  # CCO and OCC are the same molecule
    assert m["novelty"] == 1 / 2  # benzene is new, ethanol is not
    # RDKit is silenced for these calls only: the verifiers' parse errors keep their reason.
    from verifiers.chem import InvalidMolecule, check_molecule

    with pytest.raises(InvalidMolecule, match="unclosed ring"):
        check_molecule("C1CC")


def test_tiny_pretrain_reports_and_is_cached(tmp_path):
    config = PretrainConfig(n_layer=1, n_embd=32, n_head=2, batch_size=16, max_steps=5, max_molecules=300,
                            eval_samples=20, warmup_steps=1)
    policy, report = load_or_pretrain(config, root=tmp_path)
    assert report.steps == 5 and report.samples == 20
    assert 0 <= report.validity <= 1 and report.parameters == sum(p.numel() for p in policy.model.parameters())
    directory = prior_dir(config, tmp_path)
    assert (directory / "model.safetensors").exists() and (directory / "pretrain_report.json").exists()
    again, report_again = load_or_pretrain(config, root=tmp_path)  # loaded, not retrained
    assert report_again == report
    for a, b in zip(policy.model.parameters(), again.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert prior_dir(config.model_copy(update={"seed": 1}), tmp_path) != directory
