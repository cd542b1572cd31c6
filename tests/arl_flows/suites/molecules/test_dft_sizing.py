"""The DFT tier's limits and latency hint come from the chemistry space; QM9 keeps its measured defaults."""

from __future__ import annotations

import pytest

from arl_flows.suites.molecules.dft import DFT_COST_MODEL, TIMEOUT_FACTOR, DFTGapVerifier, dft_limits
from arl_flows.suites.molecules.spaces import get_space


def _druglike(**params: object) -> DFTGapVerifier:
    return DFTGapVerifier({"constraints": {"space": "druglike"}} | params)


def test_qm9_keeps_its_defaults_and_its_cache_key() -> None:
    default, explicit = DFTGapVerifier(), DFTGapVerifier({"constraints": {"space": "qm9"}})
    for v in (default, explicit):
        assert (v.params.timeout_s, v.params.memory_mb, v.params.latency_s) == (900.0, 4096, None)
    assert default.params_hash == explicit.params_hash
    assert dft_limits("qm9") == {}


def test_druglike_is_sized_for_its_largest_molecule_and_hints_its_typical_call() -> None:
    space = get_space("druglike")
    v = _druglike()
    largest = DFT_COST_MODEL.expected(float(space.max_heavy_atoms))
    assert v.params.timeout_s >= TIMEOUT_FACTOR * largest  # an hour at 40 heavy atoms on one thread
    assert v.params.memory_mb >= 8192
    typical = DFT_COST_MODEL.expected(float(space.typical_heavy_atoms))
    assert v.params.latency_s == pytest.approx(typical, rel=0.01)
    assert v.params.latency_s > 60  # minutes per call at drug size
    # The job PySCF gets: 60% of the worker's limit.
    assert v.job_settings()["max_memory_mb"] == int(v.params.memory_mb * 0.6)


def test_more_threads_shorten_the_hint_and_given_values_win() -> None:
    one, two = _druglike(), _druglike(threads=2)
    assert two.params.latency_s == pytest.approx(one.params.latency_s / 2, rel=0.01)
    given = _druglike(timeout_s=120, memory_mb=2048, latency_s=5)
    assert (given.params.timeout_s, given.params.memory_mb, given.params.latency_s) == (120.0, 2048, 5.0)


def test_the_hint_is_not_part_of_the_cache_key() -> None:
    assert _druglike().params_hash == _druglike(latency_s=5).params_hash
    assert _druglike().params_hash != DFTGapVerifier().params_hash  # another space, other verdicts


def test_an_unknown_space_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known spaces: druglike, qm9"):
        dft_limits("nope")


def test_more_conformers_keep_the_lowest_mmff_energy_and_one_conformer_keeps_the_cache_key() -> None:
    from rdkit import Chem
    from rdkit.Chem import AllChem

    from arl_flows.suites.molecules.chemistry import GeometryParams, embed_molecule

    def mmff_energy(molh: Chem.Mol) -> float:
        props = AllChem.MMFFGetMoleculeProperties(molh)
        return AllChem.MMFFGetMoleculeForceField(molh, props).CalcEnergy()

    flexible = Chem.MolFromSmiles("CCCCOc1ccccc1CCNC(=O)CCC")
    one, _ = embed_molecule(flexible, GeometryParams())
    many, force_field = embed_molecule(flexible, GeometryParams(conformers=10))
    assert (force_field, many.GetNumConformers()) == ("MMFF94", 1)
    assert mmff_energy(many) <= mmff_energy(one) + 1e-6  # ETKDG's first conformer (same seed) is among the ten
    assert DFTGapVerifier().params_hash == DFTGapVerifier({"geometry": {"conformers": 1}}).params_hash
    assert DFTGapVerifier().params_hash != DFTGapVerifier({"geometry": {"conformers": 10}}).params_hash
