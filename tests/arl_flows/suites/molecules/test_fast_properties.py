"""The fast tier reports exact cheap properties (QED, SA score, heavy atoms) for objectives to read by name."""

from __future__ import annotations

import pytest

from storage.records import Status
from arl_flows.suites.molecules import EHTGapVerifier, make_candidate

# SMILES, heavy atoms, QED and SA score as RDKit computes them (QED of pyridine from Bickerton et al.'s weights).
TABLE = [
    ("c1ccncc1", 6, 0.4531, 1.372),
    ("CCO", 3, 0.4068, 1.980),
    ("CC1(C)C2CC3C(C2)C13O", 10, 0.5364, 5.232),
]


@pytest.mark.parametrize(("smiles", "heavy", "qed", "sa"), TABLE)
def test_fast_tier_reports_qed_sa_and_size(smiles: str, heavy: int, qed: float, sa: float) -> None:
    from arl_flows.suites.molecules.chemistry import MoleculeConstraints

    verifier = EHTGapVerifier({"constraints": MoleculeConstraints(max_heavy_atoms=12).model_dump()})
    (verdict,) = verifier.verify_batch([make_candidate(smiles)])
    assert verdict.status == Status.ok
    assert verdict.values["heavy_atoms"] == heavy
    assert verdict.values["qed"] == pytest.approx(qed, abs=1e-3)
    assert verdict.values["sa_score"] == pytest.approx(sa, abs=1e-3)


def test_an_invalid_molecule_carries_no_properties() -> None:
    (verdict,) = EHTGapVerifier().verify_batch([make_candidate("C1CC")])
    assert verdict.status == Status.invalid and "qed" not in verdict.values
