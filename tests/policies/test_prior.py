"""Prior pretraining runs end to end, reports its metrics and is cached."""

from __future__ import annotations

import pytest
import torch

from arl_flows.suites.molecules.prior import SHIPPED_PRIOR_DIR, LowQualityPrior, PretrainConfig, load_or_pretrain, pretrain, prior_cache_key, prior_dir, sample_metrics, shipped_prior

TINY = dict(n_layer=1, n_embd=32, n_head=2, batch_size=16, max_steps=5, max_molecules=300, eval_samples=20,
            warmup_steps=1, min_validity=0.0)


def test_sample_metrics_counts_valid_unique_novel():
    m = sample_metrics(["CCO", "OCC", "C1CC", "c1ccccc1", "not smiles"], training_set={"CCO"})
    assert m["validity"] == 3 / 5  # C1CC has an open ring, "not smiles" does not parse
    assert m["uniqueness"] == 2 / 3  # CCO and OCC are the same molecule
    assert m["novelty"] == 1 / 2  # benzene is new, ethanol is not
    assert m["goal_set_copies"] is None  # no goal set given
    # Copies of the goal-prompted molecules count per valid sample, not per distinct one: CCO twice of three.
    assert sample_metrics(["CCO", "OCC", "c1ccccc1"], set(), goal_set={"CCO"})["goal_set_copies"] == 2 / 3
    # RDKit is silenced for these calls only: the verifiers' parse errors keep their reason.
    from arl_flows.suites.molecules import InvalidMolecule, check_molecule

    with pytest.raises(InvalidMolecule, match="unclosed ring"):
        check_molecule("C1CC")


def test_tiny_pretrain_reports_and_is_cached(tmp_path):
    config = PretrainConfig(**TINY)
    policy, report = load_or_pretrain(config, root=tmp_path)
    assert report.steps == 5 and report.samples == 20
    assert 0 <= report.validity <= 1 and report.parameters == sum(p.numel() for p in policy.model.parameters())
    assert report.fcd is None and report.fcd_reference is None  # qm9 has no FCD reference (MOSES test is druglike's)
    directory = prior_dir(config, tmp_path)
    assert (directory / "model.safetensors").exists() and (directory / "pretrain_report.json").exists()
    again, report_again = load_or_pretrain(config, root=tmp_path)  # loaded, not retrained
    assert report_again == report
    for a, b in zip(policy.model.parameters(), again.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert prior_dir(config.model_copy(update={"seed": 1}), tmp_path) != directory


def test_the_budget_is_steps_so_the_same_config_gives_the_same_prior():
    config = PretrainConfig(**TINY)
    a, report_a = pretrain(config)
    b, report_b = pretrain(config.model_copy(update={"max_minutes": 500.0, "budget_clock": "cpu"}))
    assert report_a.steps == report_b.steps == 5 and report_a.completed and report_b.completed
    for x, y in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(x, y)
    # The safety cap and the gate do not change which prior a config names.
    assert prior_cache_key(config) == prior_cache_key(config.model_copy(update={"max_minutes": 1.0, "min_validity": 0.5}))
    assert prior_cache_key(config) != prior_cache_key(config.model_copy(update={"max_steps": 6}))
    assert report_a.data_sha256 == report_b.data_sha256 and report_a.molecules == 300


def test_a_prior_cut_short_by_the_safety_cap_is_reported_and_never_cached(tmp_path):
    config = PretrainConfig(**TINY | {"max_steps": 10_000, "max_minutes": 1e-4})
    with pytest.warns(LowQualityPrior, match="safety cap stopped it"):
        _policy, report = load_or_pretrain(config, root=tmp_path)
    assert report.truncated and report.steps < 10_000 and not report.completed
    assert not prior_dir(config, tmp_path).exists()
    assert (tmp_path / (prior_dir(config, tmp_path).name + ".rejected") / "pretrain_report.json").is_file()
    with pytest.warns(LowQualityPrior):  # not cached, so the next call trains (and warns) again
        load_or_pretrain(config, root=tmp_path)


def test_a_prior_below_the_validity_gate_is_used_with_a_warning_and_not_cached(tmp_path):
    config = PretrainConfig(**TINY | {"min_validity": 0.99})
    with pytest.warns(LowQualityPrior, match="samples are valid"):
        policy, report = load_or_pretrain(config, root=tmp_path)
    assert report.completed and report.validity < 0.99 and policy is not None
    assert not prior_dir(config, tmp_path).exists()


def test_the_default_prior_ships_with_the_package_and_passes_its_gate():
    config = PretrainConfig()
    assert shipped_prior(config) == SHIPPED_PRIOR_DIR
    assert shipped_prior(config.model_copy(update={"seed": 1})) is None
    policy, report = load_or_pretrain(config)  # loaded from the package: no pretraining here
    assert report.completed and report.steps == config.max_steps == 4000
    assert report.validity >= config.min_validity and report.config_hash == prior_cache_key(config)
    assert report.parameters == sum(p.numel() for p in policy.model.parameters())
    assert len(report.data_sha256) == 64 and report.molecules > 20_000


def test_a_warm_start_continues_the_prior_it_names(tmp_path, monkeypatch):
    monkeypatch.setenv("ARL_HOME", str(tmp_path))  # the start is looked up (and cached) where any prior is
    start = PretrainConfig(**TINY)
    first, first_report = load_or_pretrain(start)
    config = PretrainConfig(**TINY | {"max_steps": 3, "lr": 1e-3, "seed": 1, "warm_start": start})
    assert prior_cache_key(config) not in {prior_cache_key(start), prior_cache_key(config.model_copy(update={"warm_start": None}))}
    assert prior_cache_key(config) != prior_cache_key(config.model_copy(update={"warm_start": start.model_copy(update={"seed": 2})}))
    policy, report = pretrain(config)
    assert report.steps == 3 and report.start_steps == first_report.steps == 5
    assert policy.tokenizer.get_vocab() == first.tokenizer.get_vocab()
    # it trained on from the start's weights: the embedding moved from the start's, not from a fresh init's
    fresh, _ = pretrain(config.model_copy(update={"warm_start": None, "max_steps": 1, "lr": 1e-9}))
    moved = (policy.model.transformer.wte.weight - first.model.transformer.wte.weight).abs().mean()
    from_fresh = (policy.model.transformer.wte.weight - fresh.model.transformer.wte.weight).abs().mean()
    assert 0 < moved < from_fresh
    # the start must be of the same architecture and space; it round-trips through the saved config
    with pytest.raises(ValueError, match="warm_start has n_layer"):
        PretrainConfig(**TINY | {"n_layer": 2, "warm_start": start})
    assert PretrainConfig.model_validate_json(config.model_dump_json()) == config


def test_a_warm_start_on_other_data_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("ARL_HOME", str(tmp_path))
    start = PretrainConfig(**TINY | {"max_molecules": 20})  # another slice of QM9: another tokenizer
    load_or_pretrain(start)
    with pytest.raises(ValueError, match="another tokenizer"):
        pretrain(PretrainConfig(**TINY | {"max_steps": 1, "warm_start": start}))
