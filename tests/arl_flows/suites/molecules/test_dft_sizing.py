"""The DFT tier's limits and latency hint come from the chemistry space; QM9 keeps its measured defaults."""

from __future__ import annotations

import pytest

from arl_flows.suites.molecules.chemistry import make_candidate
from arl_flows.suites.molecules.dft import (
    CALL_TIMEOUT_FACTOR,
    DFT_COST_MODEL,
    MIN_CALL_TIMEOUT_S,
    TIMEOUT_FACTOR,
    DFTGapVerifier,
    dft_limits,
)
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


def test_the_geometry_is_the_spaces_unless_the_params_name_one() -> None:
    from arl_flows.suites.molecules.reference_or_dft import ReferenceOrDFTVerifier

    assert DFTGapVerifier().params.geometry_source == get_space("qm9").dft_geometry == "xtb"
    assert _druglike().params.geometry_source == get_space("druglike").dft_geometry == "xtb"
    assert _druglike(geometry_source="mmff").params.geometry_source == "mmff"
    mmff = DFTGapVerifier({"geometry_source": "mmff"})
    assert mmff.params.geometry_source == "mmff"
    assert mmff.job_settings()["geometry_source"] == "mmff"
    # Verdicts on another geometry are other verdicts: never read from the cache for this one.
    assert mmff.params_hash != DFTGapVerifier().params_hash
    assert _druglike(geometry_source="mmff").params_hash != _druglike().params_hash
    # The reference-or-DFT tier's correction onto QM9's scale was fitted on MMFF94 geometries: it keeps them.
    for constraints in ({}, {"constraints": {"space": "qm9"}}):
        assert ReferenceOrDFTVerifier(constraints).params.geometry_source == "mmff"


# 24 heavy atoms (drug size, like the SLURM benchmark's two unconverged 23-atom calls) and 6.
DRUG_SIZE = "Cc1ccc(cc1)C(=O)NCC(N2CCN(C)CC2)c1cccs1"
SMALL = "c1ccncc1"


def test_each_drug_size_call_is_killed_at_a_multiple_of_its_own_predicted_time() -> None:
    v = _druglike()
    big, small = make_candidate(DRUG_SIZE), make_candidate(SMALL)
    assert (big.size, small.size) == (24.0, 6.0)
    predicted = DFT_COST_MODEL.expected(24.0 * (23 * 14 + 18) / (24 * 14))  # its sulphur weighs 18/14 (basis functions)
    assert v.timeout_for(big) == pytest.approx(CALL_TIMEOUT_FACTOR * predicted)
    assert v.timeout_for(big) < v.params.timeout_s / 2  # not the hour the space's largest molecule may take
    assert v.timeout_for(small) == MIN_CALL_TIMEOUT_S  # a floor: start-up and a loaded machine
    # Two threads halve the prediction; timeout_s stays the ceiling; none gives every molecule timeout_s.
    assert _druglike(threads=2).timeout_for(big) == pytest.approx(max(MIN_CALL_TIMEOUT_S, CALL_TIMEOUT_FACTOR * predicted / 2))
    assert _druglike(timeout_s=700).timeout_for(big) == 700.0
    assert _druglike(timeout_factor=None).timeout_for(big) == v.params.timeout_s
    assert DFTGapVerifier().timeout_for(big) == 900.0  # QM9's ladder: one limit, as measured
    assert _druglike().params_hash != _druglike(timeout_factor=None).params_hash  # a limit decides a verdict


def test_drug_size_bounds_the_scf_and_qm9_keeps_pyscf_s_newton_default() -> None:
    limits = dft_limits("druglike")
    assert (limits["max_scf_cycles"], limits["newton_max_cycles"]) == (30, 5)
    v = _druglike()
    assert (v.job_settings()["max_scf_cycles"], v.job_settings()["newton_max_cycles"]) == (30, 5)
    assert (DFTGapVerifier().params.max_scf_cycles, DFTGapVerifier().params.newton_max_cycles) == (100, 50)
    assert _druglike(max_scf_cycles=60).params.max_scf_cycles == 60  # a given value wins


def test_the_newton_fallback_stops_at_its_cap() -> None:
    """Before the cap, the fallback ran as many Newton iterations as DIIS cycles (max_scf_cycles, 100)."""
    settings = {"max_scf_cycles": 2, "basis": "sto-3g"}
    with DFTGapVerifier(settings | {"newton_max_cycles": 1}) as capped:
        (stopped,) = capped.verify_batch([make_candidate("CC(=O)O")])
    with DFTGapVerifier(settings | {"newton_max_cycles": 50}) as free:
        (converged,) = free.verify_batch([make_candidate("CC(=O)O")])
    assert stopped.status.value == "failed" and "DIIS then Newton" in stopped.feedback
    assert converged.status.value == "ok" and converged.values["scf_method"] == "DIIS then Newton"


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


def test_a_basis_without_functions_for_an_allowed_element_is_refused_in_one_line() -> None:
    """PySCF's 6-31G stops before Br: at drug size every bromide's SCF would fail, so the tier says so up front."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"basis '6-31g' has no functions for Br.*6-31G\*"):
        _druglike(basis="6-31g")
    assert _druglike(basis="6-31g", constraints={"space": "druglike", "elements": ["C", "N", "O", "H"]})
    assert DFTGapVerifier({"basis": "6-31g"}).params.basis == "6-31g"  # QM9's elements are covered


def test_the_suites_default_dft_tier_takes_the_spaces_basis() -> None:
    from arl_flows.config import build_config
    from arl_flows.ladder import build_ladder

    def dft_basis(config: dict) -> str:
        ladder = build_ladder(build_config(config))
        try:
            return next(v for v in ladder if v.name == "pyscf-b3lyp").params.basis
        finally:
            for v in ladder:
                getattr(v, "close", lambda: None)()

    assert dft_basis({"suite": "molecules"}) == "6-31g"  # every published qm9 run's
    assert dft_basis({"suite": "molecules", "options": {"space": "druglike"}}) == "6-31g*"
    named = {"suite": "molecules", "options": {"space": "druglike"},
             "tiers": [{"verifier": "rdkit-eht"}, {"verifier": "pyscf-b3lyp", "params": {"basis": "def2-svp"}}]}
    assert dft_basis(named) == "def2-svp"  # a config that names one keeps it


def test_the_defaults_known_to_be_covered_are_covered_by_pyscf_s_library() -> None:
    """`arl --help` no longer imports PySCF to check the default basis; this checks the shortcut against the library."""
    from arl_flows.suites.molecules import dft

    for basis, elements in dft.COVERED_DEFAULTS:
        dft.basis_missing.cache_clear()
        saved = dft.COVERED_DEFAULTS
        try:
            dft.COVERED_DEFAULTS = frozenset()
            assert dft.basis_missing(basis, tuple(sorted(elements))) == ()
        finally:
            dft.COVERED_DEFAULTS = saved
            dft.basis_missing.cache_clear()
    assert dft.basis_missing("6-31g", ("C", "Br")) == ("Br",)  # outside the shortcut: the library answers


def test_the_cost_of_a_call_grows_with_its_atoms_basis_functions_not_only_their_count() -> None:
    """sixth attack pass: C2Br6 and octane (8 heavy atoms each) were both predicted at 7.5 CPU-s; C2Br6 took 63 (octane
    33). A bromine carries 32 6-31G* functions to a carbon's 14: the DFT tier now weighs its atoms by them."""
    octane, bromo = make_candidate("CCCCCCCC"), make_candidate("BrC(Br)(Br)C(Br)(Br)Br")
    v = _druglike()
    assert octane.size == bromo.size == 8.0
    assert v.expected_cost(octane) == pytest.approx(DFT_COST_MODEL.expected(8.0))  # C, N, O, F: as before
    assert v.expected_cost(bromo) == pytest.approx(DFT_COST_MODEL.expected(8.0 * (2 * 14 + 6 * 32) / (8 * 14)))
    assert 50.0 < v.expected_cost(bromo) < 70.0  # measured: 63 CPU-s
    assert v.timeout_for(bromo) >= v.timeout_for(octane)
