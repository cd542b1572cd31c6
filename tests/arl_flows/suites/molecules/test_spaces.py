"""Chemistry spaces: a table of molecules and the rule each breaks, per space; unknown spaces; the options reach the tiers."""

from __future__ import annotations

import re

import pytest

from arl_flows.config import ConfigError, build_config
from arl_flows.suites import suite_for
from arl_flows.suites.molecules import EHTGapVerifier, MoleculeConstraints, make_candidate
from arl_flows.suites.molecules.chemistry import InvalidMolecule, check_molecule
from arl_flows.suites.molecules.spaces import SPACES, get_space
from arl_flows.ladder import build_ladder
from storage.records import Status, params_hash

BIG = "C" * 41  # 41 heavy atoms: above druglike's 40
TWENTY = "CCCCCCCCCCCCCCCCCCCO"

# (space, SMILES, None if valid, else words the feedback must contain)
TABLE = [
    ("qm9", "CCO", None),
    ("qm9", "CCCl", "Cl not in the qm9 space (allowed: C, N, O, F, H); the druglike space allows it"),
    ("qm9", "CCS", "S not in the qm9 space"),
    ("qm9", "CCCCCCCCCC", "10 heavy atoms > 9, the most the qm9 space allows; the druglike space allows it"),
    ("qm9", "CCI", "I not in the qm9 space (allowed: C, N, O, F, H)$"),  # no space allows iodine: no hint
    ("qm9", "C" * 45 + "Cl", "element(s) Cl not in the qm9 space (allowed: C, N, O, F, H)$"),  # druglike: 46 > 40
    ("qm9", "CCCCCCCCCC[O-]", "11 heavy atoms > 9, the most the qm9 space allows$"),  # druglike: charged
    ("qm9", "C[NH3+]", "charged: net formal charge +1"),
    ("qm9", "[CH3]", "radical"),
    ("qm9", "CC.O", "several fragments: 2 disconnected fragments"),
    ("druglike", "CCO", None),
    ("druglike", "CCCl", None),
    ("druglike", "CCS(=O)(=O)c1ccc(Br)cc1", None),
    ("druglike", "FC(F)(F)c1ccccc1", None),
    ("druglike", TWENTY, None),
    ("druglike", "c1ccccc1P", "P not in the druglike space"),
    ("druglike", "CCI", "I not in the druglike space"),
    ("druglike", "C[Si](C)(C)C", "Si not in the druglike space"),
    ("druglike", BIG, "41 heavy atoms > 40, the most the druglike space allows$"),
    ("druglike", "CC(=O)[O-]", "charged: net formal charge -1"),
    ("druglike", "C[NH3+].[Cl-]", "several fragments"),
    ("druglike", "c1ccccc1[CH2]", "radical"),
    ("druglike", "CCO.O", "several fragments: 2 disconnected fragments"),
]


@pytest.mark.parametrize(("space", "smiles", "reason"), TABLE)
def test_space_rules(space: str, smiles: str, reason: str | None) -> None:
    constraints = MoleculeConstraints(space=space)
    if reason is None:
        assert check_molecule(smiles, constraints).canonical
    else:
        with pytest.raises(InvalidMolecule, match=re.escape(reason.removesuffix("$")) + ("$" if reason.endswith("$") else "")):
            check_molecule(smiles, constraints)


@pytest.mark.parametrize(("space", "smiles", "reason"), [t for t in TABLE if t[2] is not None][:3] + [TABLE[-5]])
def test_the_fast_tier_names_the_broken_rule(space: str, smiles: str, reason: str) -> None:
    (verdict,) = EHTGapVerifier({"constraints": {"space": space}}).verify_batch([make_candidate(smiles)])
    assert verdict.status == Status.invalid
    assert reason.removesuffix("$") in verdict.feedback


def test_a_drug_sized_molecule_is_ok_in_druglike_and_invalid_in_qm9() -> None:
    smiles = "CC(=O)Nc1ccc(O)cc1"  # paracetamol: 11 heavy atoms
    ok, = EHTGapVerifier({"constraints": {"space": "druglike"}}).verify_batch([make_candidate(smiles)])
    bad, = EHTGapVerifier().verify_batch([make_candidate(smiles)])
    assert ok.status == Status.ok and ok.values["heavy_atoms"] == 11
    assert bad.status == Status.invalid and "11 heavy atoms > 9" in bad.feedback


def test_the_space_fills_what_the_constraints_leave_out() -> None:
    druglike = MoleculeConstraints(space="druglike")
    assert druglike.max_heavy_atoms == 40 and set(druglike.elements) == set(get_space("druglike").elements)
    narrowed = MoleculeConstraints(space="druglike", max_heavy_atoms=25)
    assert narrowed.max_heavy_atoms == 25
    with pytest.raises(InvalidMolecule, match="26 heavy atoms > 25"):
        check_molecule("C" * 26, narrowed)


def test_the_default_space_keeps_the_params_hash() -> None:
    """A QM9 ladder's params (a cache key of every verdict) are what they were before spaces existed."""
    before = {"elements": ["C", "N", "O", "F", "H"], "max_heavy_atoms": 9, "formal_charge": 0,
              "single_fragment": True, "max_smiles_length": 500}
    assert MoleculeConstraints().model_dump() == before
    assert MoleculeConstraints(space="qm9").model_dump() == before
    assert params_hash(MoleculeConstraints(space="druglike")) != params_hash(MoleculeConstraints())


@pytest.mark.parametrize("where", ["constraints", "options"])
def test_an_unknown_space_is_one_line_listing_the_known_ones(where: str) -> None:
    known = ", ".join(sorted(SPACES))
    if where == "constraints":
        with pytest.raises(ValueError, match=f"unknown chemistry space 'zinc'; known spaces: {known}"):
            MoleculeConstraints(space="zinc")
        return
    with pytest.raises(ConfigError) as info:
        build_config({"suite": "molecules", "options": {"space": "zinc"}})
    message = str(info.value)
    assert "\n" not in message and "options.space" in message and f"known spaces: {known}" in message


def test_the_options_space_reaches_every_tier_with_rules() -> None:
    config = build_config({"suite": "molecules", "options": {"space": "druglike", "max_heavy_atoms": 30}})
    ladder = build_ladder(config)
    try:
        for verifier in ladder:
            constraints = verifier.params.constraints
            assert (constraints.space, constraints.max_heavy_atoms) == ("druglike", 30), verifier.name
            assert "Cl" in constraints.elements
    finally:
        for verifier in ladder:
            getattr(verifier, "close", lambda: None)()
    assert suite_for(config).options.space == "druglike"


@pytest.mark.parametrize(("run_space", "tier_space"), [("druglike", "qm9"), ("qm9", "druglike")])
def test_a_tier_of_another_space_than_the_runs_is_one_line_naming_both(run_space: str, tier_space: str) -> None:
    """It used to build a ladder of two spaces: paracetamol invalid at the fast tier of a druglike run, silently."""
    config = build_config({"suite": "molecules", "options": {"space": run_space},
                           "tiers": [{"verifier": "rdkit-eht", "params": {"constraints": {"space": tier_space}}}, "gfn2-xtb"]})
    with pytest.raises(ValueError) as caught:
        build_ladder(config)
    message = str(caught.value)
    assert message.startswith(f"tiers[0] (rdkit-eht): its constraints name the space '{tier_space}' but the run's space "
                              f"is '{run_space}'") and "\n" not in message
    same = build_config({"suite": "molecules", "options": {"space": run_space},
                         "tiers": [{"verifier": "rdkit-eht", "params": {"constraints": {"space": run_space}}}, "gfn2-xtb"]})
    for verifier in build_ladder(same):  # naming the run's own space is allowed
        getattr(verifier, "close", lambda: None)()


def test_the_shipped_qm9_table_cannot_end_a_druglike_ladder() -> None:
    """Every drug-sized molecule missed it, and each miss was charged as a call (300 CPU-s by default)."""
    config = build_config({"suite": "molecules", "options": {"space": "druglike"}, "tiers": ["rdkit-eht", "reference-table"]})
    with pytest.raises(ValueError, match=r"tiers\[1\] \(reference-table\): the shipped reference table holds QM9's molecules"):
        build_ladder(config)


def test_the_default_run_stays_in_qm9() -> None:
    config = build_config({"suite": "molecules"})
    ladder = build_ladder(config)
    try:
        hashes = [v.params_hash for v in ladder]
        # The default DFT tier names no basis: the space gives QM9's, 6-31G, the one every published qm9 run had.
        had = [dict(t.params) | ({"basis": "6-31g"} if t.verifier == "pyscf-b3lyp" else {}) for t in config.tiers]
        plain = [type(v)(p).params_hash for v, p in zip(ladder, had)]
        assert hashes == plain  # the option added nothing else to the params a QM9 run had
        assert all(v.params.constraints.max_heavy_atoms == 9 for v in ladder)
    finally:
        for verifier in ladder:
            getattr(verifier, "close", lambda: None)()


@pytest.mark.parametrize(
    ("options", "prompt_id", "rules"),
    [
        ({}, "molecules:gap:3.00-4.00", "(C, N, O, F; at most 9 heavy atoms)"),
        ({"space": "druglike"}, "molecules:druglike:gap:3.00-4.00", "(C, N, O, F, S, Cl, Br; at most 40 heavy atoms)"),
        ({"space": "druglike", "max_heavy_atoms": 25}, "molecules:druglike:gap:3.00-4.00", "at most 25 heavy atoms"),
    ],
)
def test_prompts_state_the_space(options: dict, prompt_id: str, rules: str) -> None:
    prompt = suite_for(build_config({"suite": "molecules", "options": options})).prompts(0)[0]
    assert prompt.id == prompt_id and rules in prompt.text


@pytest.mark.parametrize(("text", "hint"), [
    ("c1ccccc1 benzene", "give 'c1ccccc1' alone"), ("CCO\tZINC000123", "give 'CCO' alone"), ("CCN # amine", "give 'CCN' alone"),
    ("C C O", None), ("Cl C ( = O ) [nH]", None),  # a tokenizer's spaced SMILES: no name in it
])
def test_a_smi_line_with_a_name_says_to_give_the_smiles_alone(text: str, hint: str | None) -> None:
    with pytest.raises(InvalidMolecule) as caught:
        check_molecule(text)
    message = str(caught.value)
    assert message.startswith("SMILES must not contain whitespace")
    assert (hint in message) if hint else message == "SMILES must not contain whitespace"
