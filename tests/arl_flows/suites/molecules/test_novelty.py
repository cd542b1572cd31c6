"""The fast tier's exact ``novel`` property: 0 for QM9 and MOSES-train molecules, 1 for a new one; objectives read it."""

from __future__ import annotations

import numpy as np
import pytest

from arl_flows.suites.molecules import EHTGapVerifier, canonical_smiles, make_candidate
from arl_flows.suites.molecules.datasets import load_qm9_gaps
from arl_flows.suites.molecules.novelty import NOVELTY_DIR, HashIndex, build_hash_index, smiles_hash, training_index
from arl_flows.suites.molecules.spaces import SPACES
from storage.records import Status
from verifiers.objectives import Objective, Term

QM9_MOLECULE = "OCC(O)CO"  # glycerol, in data/qm9_gap.csv (a subset of QM9)
MOSES_TRAIN = "CCCS(=O)c1ccc2[nH]c(=NC(=O)OC)[nH]c2c1"  # the first row of MOSES train.csv (albendazole sulfoxide)
MADE_UP = "FC(F)(F)SC1=C(Br)C(Cl)=C(Br)C(N=C=S)=C1SC(F)(F)F"  # written for this test: in neither set


def _novel(smiles: str, space: str) -> float:
    (verdict,) = EHTGapVerifier({"constraints": {"space": space}}).verify_batch([make_candidate(smiles)])
    assert verdict.status == Status.ok, verdict.feedback
    return verdict.values["novel"]


def test_the_qm9_molecule_is_in_the_shipped_table() -> None:
    assert canonical_smiles(QM9_MOLECULE) in {s for s, _ in load_qm9_gaps()}


@pytest.mark.parametrize(
    ("smiles", "space", "novel"),
    [
        (QM9_MOLECULE, "qm9", 0.0),
        (QM9_MOLECULE, "druglike", 0.0),
        (MOSES_TRAIN, "druglike", 0.0),
        ("C(F)(F)(F)C(F)(F)N", "qm9", 1.0),
        (MADE_UP, "druglike", 1.0),
    ],
)
def test_novel_is_exact(smiles: str, space: str, novel: float) -> None:
    assert _novel(smiles, space) == novel


def test_a_moses_molecule_written_another_way_is_still_known() -> None:
    """The index holds canonical SMILES: another spelling of a training molecule is found."""
    respelled = "c1c(S(=O)CCC)ccc2[nH]c(=NC(=O)OC)[nH]c12"
    assert canonical_smiles(respelled) == canonical_smiles(MOSES_TRAIN)
    assert _novel(respelled, "druglike") == 0.0


def test_the_shipped_index_holds_the_moses_training_set() -> None:
    index = training_index(SPACES["druglike"].training_index)
    assert len(index) > 1_500_000  # 1.58M rows, all distinct canonical SMILES
    assert np.all(np.diff(index.hashes.astype(np.uint64)) > 0)  # sorted and unique: binary search is exact
    path = NOVELTY_DIR / SPACES["druglike"].training_index
    assert path.stat().st_size < 8 * len(index) + 1024  # 8 bytes a molecule


def test_a_hash_index_finds_what_it_was_built_from() -> None:
    smiles = ["CCO", "c1ccccc1", "CC(=O)O"]
    index = HashIndex(build_hash_index(smiles))
    assert all(s in index for s in smiles)
    assert "CCN" not in index and 42 not in index
    assert smiles_hash("CCO") == smiles_hash("CCO") != smiles_hash("OCC")
    with pytest.raises(ValueError, match="1-D uint64"):
        HashIndex(np.zeros(3, dtype=np.int32))


def test_a_novel_threshold_term_scores_accordingly() -> None:
    objective = Objective(terms=[
        Term(kind="window", property="value", low=3.0, high=4.0),
        Term(kind="threshold", property="novel", above=0.5),
    ])
    known, new = (
        EHTGapVerifier({"constraints": {"space": "druglike"}}).verify_batch([make_candidate(s)])[0]
        for s in (MOSES_TRAIN, MADE_UP)
    )
    assert float(objective.score(known.values, value=3.5)) == 0.0
    assert float(objective.score(new.values, value=3.5)) == 1.0
    assert float(objective.score(new.values, value=5.0)) == 0.0
