"""The third red team's molecule attacks (2026-12-07): spellings that glued molecules, hid radicals, or made a known
molecule new. Each is refused by a principle (an allow-list of bonds, one normalised graph, an even electron count),
not by a list of the strings that were tried."""

from __future__ import annotations

import re

import pytest
from rdkit import Chem

from arl_flows.suites.molecules import EHTGapVerifier, MoleculeConstraints, make_candidate
from arl_flows.suites.molecules.chemistry import InvalidMolecule, canonical_smiles, check_molecule
from arl_flows.suites.molecules.grammar import SmilesGrammar
from storage.records import Status

# (SMILES, words the refusal must contain): each scored ok by every tier before, DFT included for the glued ones.
REFUSED = [
    ("CC~O", "an unspecified bond between C 2 and O 3"),  # ethane + water as one "molecule"
    ("NCCN~C(=O)C=O", "an unspecified bond"),  # ethylenediamine + glyoxal: DFT 4.25 eV, "novel"
    ("c1nncnn1~C", "an unspecified bond"),  # tetrazine (in QM9) + methane: a "novel" 3.54 eV hit
    ("C->O", "a dative bond between C 1 and O 2"),  # CH4 + OH: 19 electrons, no radical flag
    ("C=C->O", "a dative bond"),
    ("N#N->O", "a dative bond"),
    ("O<-C->O", "a dative bond"),
    ("C$C", "a quadruple bond"),
    ("C:O", "an aromatic bond outside an aromatic ring"),  # formaldehyde under a second key
    ("CC(C):O", "an aromatic bond outside an aromatic ring"),  # acetone, "novel"
    ("C[H+][O-]", "a hydrogen bonded to 2 atoms"),
    ("[13CH2]=O", "isotope label [13C]"),
    ("[1H]C", "isotope label [1H]"),
    ("[150CH3]C(=O)Nc1ccc(O)cc1", "isotope label [150C]"),  # paracetamol's QED 0.595 -> 0.767 by its mass
]


@pytest.mark.parametrize(("smiles", "reason"), REFUSED)
def test_a_spelling_that_is_not_one_closed_shell_molecule_is_refused(smiles: str, reason: str) -> None:
    with pytest.raises(InvalidMolecule, match="^" + re.escape(reason)):
        check_molecule(smiles, MoleculeConstraints(space="druglike"))
    assert make_candidate(smiles).valid is False  # no key of its own: it cannot take a cached verdict either


def test_the_fast_tier_scores_none_of_them() -> None:
    verdicts = EHTGapVerifier({"constraints": {"space": "druglike"}}).verify_batch([make_candidate(s) for s, _ in REFUSED])
    assert [v.status for v in verdicts] == [Status.invalid] * len(REFUSED)


# (spelling, the plain molecule): the same molecule, so the same key, verdict and novelty.
SAME = [
    ("[H]OCC", "CCO"),
    ("[H]C([H])([H])C([H])([H])O[H]", "CCO"),
    ("[CH2:5]=O", "C=O"),
    ("OC[CH3:1]", "CCO"),
    ("[H]N=c1sc(C)c(C)n1N", "Cc1sc(=N)n(N)c1C"),  # a MOSES row is written so; its key is the plain molecule's
]


@pytest.mark.parametrize(("spelling", "plain"), SAME)
def test_a_spelling_of_a_molecule_shares_its_key(spelling: str, plain: str) -> None:
    assert make_candidate(spelling).key == make_candidate(plain).key
    assert canonical_smiles(spelling) == canonical_smiles(plain) == check_molecule(plain, MoleculeConstraints(space="druglike")).canonical


def test_a_stereo_mark_does_not_make_a_known_molecule_novel() -> None:
    """QM9 and MOSES are written without stereo: `ON[C@@H]1C=CCC1` is QM9's `ONC1C=CCC1`, not a novel hit."""
    plain, marked, new = (make_candidate(s) for s in ("ONC1C=CCC1", "ON[C@@H]1C=CCC1", "ON[C@@H]1C=CCCC1"))
    assert marked.key != plain.key  # a stereoisomer is its own molecule (its own verdict)...
    verdicts = EHTGapVerifier().verify_batch([plain, marked, new])
    assert [v.status for v in verdicts] == [Status.ok] * 3
    assert [v.values["novel"] for v in verdicts] == [0.0, 0.0, 1.0]  # ...but not a new one


def test_a_centre_whose_canonical_stereo_flips_on_every_round_trip_is_keyed_without_its_marks() -> None:
    """RDKit writes some pseudo-asymmetric centres one way and reads them back the other (2-substituted adamantanes,
    bispidines; 7 of ~14,000 MOSES stereo spellings): refusing them refused valid molecules a policy can write."""
    for smiles in ("O=C(CCn1ccccc1=O)N[C@H]1[C@@H]2C[C@H]3C[C@@H](C2)C[C@H]1C3",
                   "CC(=O)N1C[C@]2(C(C)C)CN(C(C)=O)C[C@@](C(C)C)(C1)[C@@H]2O"):
        candidate = make_candidate(smiles)
        assert candidate.valid and "@" not in candidate.key, candidate
        canonical = candidate.key.split(":", 1)[1]
        assert Chem.MolToSmiles(Chem.MolFromSmiles(canonical)) == canonical


def test_every_canonical_key_reads_back_as_itself() -> None:
    for smiles in ("CCO", "c1ccccc1O", "C/C=C/C", "O=C1NC(=O)C=C1", "[H]OCC", "N[C@@H](C)C(=O)O"):
        canonical = check_molecule(smiles, MoleculeConstraints(space="druglike")).canonical
        assert Chem.MolToSmiles(Chem.MolFromSmiles(canonical)) == canonical


class _Vocab:
    """The tokens of the shipped priors' vocabulary that spell bonds, with an atom and EOS."""

    eos_token_id = 0
    all_special_ids = [0]

    def get_vocab(self) -> dict[str, int]:
        return {"<eos>": 0, "C": 1, "c": 2, "~": 3, "$": 4, ":": 5, "=": 6, "-": 7, "#": 8}


def test_the_grammar_never_writes_a_bond_the_checks_refuse() -> None:
    aromatic, kekule = SmilesGrammar(_Vocab()), SmilesGrammar(_Vocab(), kekule=True)
    for grammar, banned in ((aromatic, (3, 4)), (kekule, (3, 4, 5))):
        state = grammar.advance(grammar.start(), 1)  # "C"
        allowed = grammar.allowed(state)
        assert not any(bool(allowed[i]) for i in banned) and all(bool(allowed[i]) for i in (6, 7, 8))


def _long_spelling(smiles: str) -> str:
    """Every atom (hydrogens too) bracketed with a map number, every bond a ring closure between dotted atoms."""
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    Chem.Kekulize(mol, clearAromaticFlags=True)
    closures: dict[int, list[str]] = {a.GetIdx(): [] for a in mol.GetAtoms()}
    symbol = {Chem.BondType.SINGLE: "-", Chem.BondType.DOUBLE: "=", Chem.BondType.TRIPLE: "#"}
    for k, bond in enumerate(mol.GetBonds()):
        closures[bond.GetBeginAtomIdx()].append(f"{symbol[bond.GetBondType()]}%{10 + k}")
        closures[bond.GetEndAtomIdx()].append(f"{symbol[bond.GetBondType()]}%{10 + k}")
    return ".".join(f"[{a.GetSymbol()}H0+0:1999999999]" + "".join(closures[a.GetIdx()]) for a in mol.GetAtoms())


def test_a_long_spelling_of_a_molecule_is_that_molecule_at_every_tier() -> None:
    """sixth attack pass: a 666-character spelling of octanal took octanal's key (parsed up to 1,000 characters) and the
    tiers refused its length (500), so `invalid` was cached under octanal's key for every later run."""
    text = _long_spelling("CCCCCCCC=O")
    assert 500 < len(text) <= 1000
    candidate = make_candidate(text)
    assert candidate.valid and candidate.key == make_candidate("CCCCCCCC=O").key
    assert check_molecule(text).canonical == "CCCCCCCC=O"
    verdict = EHTGapVerifier().verify_batch([candidate])[0]
    assert verdict.status == Status.ok, verdict.feedback
    # The rule still holds for what the key names: a molecule whose canonical SMILES is longer than the limit.
    with pytest.raises(InvalidMolecule, match="^canonical SMILES is 10 characters long; at most 8"):
        check_molecule(text, MoleculeConstraints(max_smiles_length=8))


# (a resonance spelling with charges, the molecule it spells): one key, as the sixth attack pass asked.
RESONANCE = [
    ("[CH2+][CH2-]", "C=C"),
    ("[NH2+]=C[O-]", "NC=O"),  # formamide, in QM9: was "novel" and paid again at DFT (same gap)
    ("C[CH+][O-]", "CC=O"),  # acetaldehyde, in QM9
    ("[CH2+]C=C[O-]", "C=CC=O"),
    ("[CH+]=[CH-]", "C#C"),
    ("[CH-]1[CH+]C1", "C1=CC1"),
    ("CC(=O)O[CH+][NH-]", "CC(=O)OC=N"),  # as QM9's table draws it
]


@pytest.mark.parametrize(("spelling", "plain"), RESONANCE)
def test_a_charge_separated_spelling_is_its_neutral_molecule(spelling: str, plain: str) -> None:
    assert make_candidate(spelling).key == make_candidate(plain).key
    assert check_molecule(spelling).canonical == check_molecule(plain).canonical == plain


def test_a_zwitterion_of_qm9s_table_is_neither_novel_nor_missing_from_the_table() -> None:
    """QM9's table draws some molecules with charges (from 3D structures): their neutral form is QM9's molecule."""
    from arl_flows.suites.molecules.novelty import is_novel
    from arl_flows.suites.molecules.reference import ReferenceTableVerifier

    assert not is_novel("CC(=O)OC=N", None) and not is_novel("NC=O", None)
    verdict = ReferenceTableVerifier().verify_batch([make_candidate("CC(=O)OC=N")])[0]
    assert verdict.status == Status.ok, verdict.feedback


def test_the_shipped_neutral_forms_of_qm9_are_what_fewest_charges_gives() -> None:
    """`data/novelty/qm9_neutral_forms.csv` spares every process a second; rebuild it with
    `python -m arl_flows.suites.molecules.novelty` when the rule or RDKit changes."""
    import csv

    from arl_flows.suites.molecules.novelty import QM9_NEUTRAL_FORMS, qm9_neutral_forms

    with open(QM9_NEUTRAL_FORMS, newline="") as fh:
        shipped = {row["smiles"]: row["neutral"] for row in csv.DictReader(fh)}
    assert shipped == qm9_neutral_forms() and len(shipped) > 700


@pytest.mark.parametrize("smiles", [
    "[CH2-][O+]=C",  # a carbonyl ylide: DFT-verified at 3.84 eV, reward 1.0, before
    "[C-]#[C+]",  # C2
    "[O-]c1[c+2]c([O-])cc1",  # a doubly charged aromatic carbon
    "O=CCNC[CH-][OH2+]",  # an oxonium ylide whose xTB SCF does not converge
])
def test_charges_outside_the_listed_groups_are_refused(smiles: str) -> None:
    with pytest.raises(InvalidMolecule, match="^charged atoms .* that no neutral drawing removes"):
        check_molecule(smiles)
    assert EHTGapVerifier().verify_batch([make_candidate(smiles)])[0].status == Status.invalid


@pytest.mark.parametrize("smiles", ["C[N+](=O)[O-]", "[O-][n+]1ccccc1", "CN=[N+]=[N-]", "[C-]#[N+]C", "[NH3+]CC(=O)[O-]",
                                    "NC(=[NH2+])C(=O)[O-]", "C[N+](C)(C)[O-]"])
def test_groups_that_keep_their_charges_stay_valid(smiles: str) -> None:
    assert check_molecule(smiles, MoleculeConstraints(space="qm9")).canonical
