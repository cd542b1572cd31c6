"""The chemistry ladder: a table of inputs and expected statuses per tier, and values against references."""

from __future__ import annotations

import os

import pytest

from storage.records import LabRequest, Status, Tier
from arl_flows.suites.molecules import (
    DFTGapVerifier,
    EHTGapVerifier,
    LabVerifier,
    ReferenceTableVerifier,
    XTBGapVerifier,
    make_candidate,
)

# (input, expected status for every tier, words the feedback must contain)
INVALID_INPUTS = [
    pytest.param("CN(C)(C)(C)C", "valence error on atom 1 (N)", id="invalid-valence"),
    pytest.param("CCCl", "Cl not in the qm9 space", id="disallowed-element"),
    pytest.param("C[NH3+]", "net formal charge +1", id="charged"),
    pytest.param("CC.O", "2 disconnected fragments", id="disconnected"),
    pytest.param("", "empty SMILES", id="empty"),
    pytest.param("C" * 10_000, "10000 characters long", id="10k-characters"),
    pytest.param("\u2603\U0001f4a5\x00\u00fc\u200b", "SMILES parse error", id="unicode-garbage"),
    pytest.param("C1CC", "unclosed ring", id="unclosed-ring"),
    pytest.param("c1cccc1", "aromaticity error", id="bad-aromatic"),
    pytest.param("CCCCCCCCCC", "10 heavy atoms > 9", id="too-large"),
]

ALL_TIERS = [EHTGapVerifier, XTBGapVerifier, DFTGapVerifier, LabVerifier, ReferenceTableVerifier]

# QM9 B3LYP/6-31G(2df,p) gaps (eV), from arl_flows/suites/molecules/data/qm9_gap.csv.
QM9_GAPS = {"O": 9.8369, "C": 13.7363, "N": 9.2491}


@pytest.fixture(scope="module")
def xtb() -> XTBGapVerifier:
    with XTBGapVerifier({"threads": 1}) as verifier:
        yield verifier


@pytest.fixture(scope="module")
def dft() -> DFTGapVerifier:
    with DFTGapVerifier({"threads": 1}) as verifier:
        yield verifier


@pytest.mark.parametrize("verifier_cls", ALL_TIERS, ids=lambda c: c.name)
@pytest.mark.parametrize(("text", "reason"), INVALID_INPUTS)
def test_invalid_inputs_are_invalid_at_every_tier(verifier_cls, text: str, reason: str) -> None:
    verifier = verifier_cls()
    try:
        (verdict,) = verifier.verify_batch([make_candidate(text)])
    finally:
        getattr(verifier, "close", lambda: None)()
    assert verdict.status == Status.invalid
    assert reason in verdict.feedback
    assert verdict.value is None


def test_valid_molecule_statuses_per_tier(xtb: XTBGapVerifier) -> None:
    candidate = make_candidate("c1ccncc1")
    expected = {EHTGapVerifier(): Status.ok, xtb: Status.ok, LabVerifier(): Status.pending, ReferenceTableVerifier(): Status.ok}
    for verifier, status in expected.items():
        (verdict,) = verifier.verify_batch([candidate])
        assert verdict.status == status, (verifier.name, verdict.feedback)
        assert verdict.tier == verifier.tier
        assert verdict.candidate_key == "molecules:c1ccncc1"


def test_batch_mixes_valid_and_invalid(xtb: XTBGapVerifier) -> None:
    texts = ["O", "CN(C)(C)(C)C", "N", "", "C"]
    verdicts = xtb.verify_batch([make_candidate(t) for t in texts])
    assert [v.status for v in verdicts] == [Status.ok, Status.invalid, Status.ok, Status.invalid, Status.ok]


def test_fast_tier_gap_with_and_without_a_goal() -> None:
    goal = {"property": "gap_ev", "low": 3.0, "high": 3.5}
    (with_goal,) = EHTGapVerifier().verify_batch([make_candidate("c1ccncc1", goal=goal)])
    (without,) = EHTGapVerifier().verify_batch([make_candidate("c1ccncc1")])
    assert with_goal.status == Status.ok
    assert with_goal.value == pytest.approx(with_goal.values["lumo_ev"] - with_goal.values["homo_ev"])
    assert 1.0 < with_goal.value < 10.0
    assert without.value == with_goal.value  # the goal is for the objective, not the tier
    assert with_goal.cost_s > 0


def test_xtb_gaps_of_tiny_molecules(xtb: XTBGapVerifier) -> None:
    verdicts = xtb.verify_batch([make_candidate(s) for s in QM9_GAPS])
    gaps = {s: v.value for s, v in zip(QM9_GAPS, verdicts, strict=True)}
    assert all(v.status == Status.ok for v in verdicts)
    # GFN2-xTB gaps of these hydrides are ~2.5-4.5 eV above B3LYP's (tight-binding virtual orbitals
    # sit high), but the ordering CH4 > H2O > NH3 matches QM9.
    for smiles, ref in QM9_GAPS.items():
        assert ref + 1.5 < gaps[smiles] < ref + 5.5, (smiles, gaps[smiles])
    assert gaps["C"] > gaps["O"] > gaps["N"]
    assert all(v.values["force_field"] == "MMFF94" for v in verdicts)
    assert all(v.cost_s >= 0 and v.wall_s > 0 for v in verdicts)


def test_xtb_optimisation_changes_geometry_not_much_the_gap() -> None:
    with XTBGapVerifier({"optimize": True}) as relaxed:
        (verdict,) = relaxed.verify_batch([make_candidate("O")])
    assert verdict.status == Status.ok
    assert verdict.values["xtb_opt_steps"] >= 1
    assert 13.0 < verdict.value < 15.5


def test_dft_gaps_of_tiny_molecules_match_qm9(dft: DFTGapVerifier) -> None:
    verdicts = dft.verify_batch([make_candidate(s) for s in QM9_GAPS])
    for (smiles, ref), verdict in zip(QM9_GAPS.items(), verdicts, strict=True):
        assert verdict.status == Status.ok, verdict.feedback
        assert verdict.values["converged"] is True
        # B3LYP/6-31G* on the default geometry (MMFF94, then GFN2-xTB) vs B3LYP/6-31G(2df,p) on the B3LYP geometry.
        assert verdict.values["geometry"] == "GFN2-xTB"
        assert verdict.value == pytest.approx(ref, abs=0.35), smiles
        assert verdict.values["homo_ev"] < 0 and verdict.values["homo_ev"] < verdict.values["lumo_ev"]
        assert verdict.values["energy_eh"] < 0
        assert verdict.cost_s > 0


def test_dft_non_convergence_is_failed_not_zero() -> None:
    with DFTGapVerifier({"max_scf_cycles": 2, "newton_fallback": False}) as dft:
        (verdict,) = dft.verify_batch([make_candidate("O")])
    assert verdict.status == Status.failed
    assert "SCF did not converge" in verdict.feedback
    assert verdict.value is None


@pytest.mark.slow
def test_dft_pyridine_on_both_geometries() -> None:
    with DFTGapVerifier({"geometry_source": "mmff"}) as mmff, DFTGapVerifier({"geometry_source": "xtb"}) as xtb:
        (on_mmff,) = mmff.verify_batch([make_candidate("c1ccncc1")])
        (on_xtb,) = xtb.verify_batch([make_candidate("c1ccncc1")])
    assert on_mmff.status == on_xtb.status == Status.ok, (on_mmff.feedback, on_xtb.feedback)
    assert (on_mmff.values["geometry"], on_xtb.values["geometry"]) == ("MMFF94", "GFN2-xTB")
    for verdict in (on_mmff, on_xtb):
        assert verdict.value == pytest.approx(6.2396, abs=0.3)
    assert on_mmff.value != on_xtb.value


def test_reference_table(tmp_path) -> None:
    table = tmp_path / "table.csv"
    table.write_text("# test table\nsmiles,gap_ev\nOCC,7.5\n")
    verifier = ReferenceTableVerifier({"path": str(table), "cost_per_call": 12.5})
    verdicts = verifier.verify_batch([make_candidate("CCO", goal={"low": 7, "high": 8}), make_candidate("CCN")])
    assert verdicts[0].status == Status.ok and verdicts[0].value == 7.5
    assert verdicts[0].cost_s == 12.5
    assert verdicts[1].status == Status.failed and verdicts[1].feedback == "not in reference table"
    assert verifier.expected_cost(make_candidate("CCO")) == 12.5


def test_reference_table_is_canonicalised_once_and_kept_on_disk(tmp_path, monkeypatch) -> None:
    from arl_flows.suites.molecules.reference import _cached_table, load_reference_table
    from storage.settings import settings

    monkeypatch.setenv("ARL_CACHE_DIR", str(tmp_path / "cache"))  # this test's own cache, not the session's
    table = tmp_path / "table.csv"
    table.write_text("smiles,gap_ev\nOCC,7.5\nC(N)C,6.0\n")
    assert load_reference_table(table) == {"CCO": 7.5, "CCN": 6.0}
    (cached,) = (settings().cache / "reference_tables").glob("*.json")
    cached.write_text('{"CCO": 1.0}')  # the disk copy is what a new process reads
    _cached_table.cache_clear()
    assert load_reference_table(table) == {"CCO": 1.0}
    cached.write_text("{not json")  # a damaged copy is recomputed, never an error
    _cached_table.cache_clear()
    assert load_reference_table(table) == {"CCO": 7.5, "CCN": 6.0}
    table.write_text("smiles,gap_ev\nOCC,8.5\n")  # an edited table is another version: a new copy
    os.utime(table, ns=(cached.stat().st_mtime_ns + 10**9,) * 2)
    assert load_reference_table(table) == {"CCO": 8.5}
    assert len(list(cached.parent.glob("*.json"))) == 2


def test_reference_table_defaults_to_qm9() -> None:
    (verdict,) = ReferenceTableVerifier().verify_batch([make_candidate("O")])
    assert verdict.value == pytest.approx(QM9_GAPS["O"])


def test_lab_tier_returns_pending_requests() -> None:
    lab = LabVerifier()
    candidates = [make_candidate("CCO"), make_candidate("CN(C)(C)(C)C")]
    verdicts = lab.verify_batch(candidates)
    assert [v.status for v in verdicts] == [Status.pending, Status.invalid]
    assert verdicts[0].request_id and verdicts[0].value is None
    requests = lab.lab_requests(candidates, verdicts, run_id="run-1")
    assert len(requests) == 1 and isinstance(requests[0], LabRequest)
    assert requests[0].id == verdicts[0].request_id
    assert requests[0].candidate_key == candidates[0].key and requests[0].payload == "CCO"
    assert requests[0].params_hash == verdicts[0].params_hash


def test_candidate_keys() -> None:
    assert make_candidate("OCC").key == make_candidate("CCO").key == "molecules:CCO"
    garbage = make_candidate("not a smiles")
    assert garbage.key == make_candidate("not a smiles").key != make_candidate("also not").key
    assert garbage.valid is False
    assert make_candidate("c1ccncc1").meta["heavy_atoms"] == 6


def test_cost_models_grow_with_size() -> None:
    small, large = make_candidate("C"), make_candidate("CC1=CC(=O)NC=C1")
    for cls in (EHTGapVerifier, XTBGapVerifier, DFTGapVerifier):
        verifier = cls()
        assert verifier.size(large) == 8
        assert verifier.expected_cost(large) > verifier.expected_cost(small) > 0
    assert DFTGapVerifier.cost_model.exponent == 3.0
    assert [c.tier for c in ALL_TIERS] == [Tier.fast, Tier.simulation, Tier.high_fidelity, Tier.lab, Tier.lab]


def test_parse_errors_keep_their_reason_after_scheduler_features() -> None:
    """Scheduler features silence RDKit for their own calls only, never process-wide."""
    from arl_flows.suites.molecules import InvalidMolecule, check_molecule
    from arl_flows.suites.molecules.features import molecule_features

    molecule_features(make_candidate("C1CC"))
    with pytest.raises(InvalidMolecule, match="unclosed ring"):
        check_molecule("C1CC")
