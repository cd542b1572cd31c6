"""The SMILES grammar constraint: it never bans a token of a valid SMILES, and what it bans RDKit rejects."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest
import torch
from rdkit import Chem, rdBase
from transformers import AutoTokenizer

from arl_flows.suites.molecules.grammar import SmilesGrammar, space_grammar
from arl_flows.suites.molecules.prior import DRUGLIKE_LABELS, DRUGLIKE_PRIOR_DIR
from arl_flows.suites.molecules.smiles import goal_prompt_ids
from policies import DecodingConstraint, Policy

_MOSES_TEST = Path(__file__).resolve().parents[5] / "shared" / "data" / "moses" / "test.csv.gz"
_DRUGLIKE = ("H", "C", "N", "O", "F", "S", "Cl", "Br")


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(DRUGLIKE_PRIOR_DIR)


@pytest.fixture(scope="module")
def grammar(tokenizer):
    return space_grammar(tokenizer, "druglike")


def _ids(tokenizer, smiles: str) -> list[int]:
    return tokenizer(smiles, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]


def _first_banned(grammar: SmilesGrammar, ids: list[int]) -> int | None:
    """The position of the first id the grammar bans (None: it allows them all, eos included)."""
    state = grammar.start()
    for t, token in enumerate(ids):
        try:
            grammar.advance(state, token)  # checks the token against allowed(state) first
        except ValueError:
            return t
    return None


def _moses_smiles() -> list[str]:
    """The druglike prior's 30,000 shipped MOSES molecules (its goal labels), and 500 of MOSES test as MOSES writes them (if shared/ has it)."""
    with gzip.open(DRUGLIKE_LABELS, "rt", newline="") as fh:
        smiles = [row["smiles"] for row in csv.DictReader(fh)]
    if _MOSES_TEST.is_file():
        with gzip.open(_MOSES_TEST, "rt", newline="") as fh:
            smiles += [row["SMILES"] for _, row in zip(range(500), csv.DictReader(fh))]
    return smiles


def test_the_grammar_is_a_decoding_constraint(grammar, tokenizer):
    assert isinstance(grammar, DecodingConstraint)
    assert grammar.vocab_size == len(tokenizer)


def test_it_never_bans_a_token_of_a_moses_smiles(grammar, tokenizer):
    smiles = _moses_smiles()
    assert len(smiles) >= 3000
    # A SMILES with a symbol the prior has no token for is one the prior cannot write, so the grammar rightly bans its
    # <unk>: of the 30,000 labeled molecules, one, which RDKit's aromatic form writes with an explicit [H] on an imine
    # nitrogen (the Kekule SMILES the prior trains on has none).
    unwritable = [s for s in smiles if tokenizer.unk_token_id in _ids(tokenizer, s)]
    assert len(unwritable) <= len(smiles) // 1000, unwritable[:5]
    banned = [(s, t) for s in smiles if s not in unwritable and (t := _first_banned(grammar, _ids(tokenizer, s))) is not None]
    assert banned == []


def test_it_never_bans_a_token_of_other_writings_of_the_same_molecules(grammar, tokenizer):
    """Random atom orders (branches and ring bonds elsewhere) and Kekule forms (explicit ring double bonds)."""
    written = []
    for i, s in enumerate(_moses_smiles()[:500]):
        mol = Chem.MolFromSmiles(s)
        written.append(Chem.MolToSmiles(mol, doRandom=True))
        Chem.Kekulize(mol, clearAromaticFlags=True)
        written.append(Chem.MolToSmiles(mol, kekuleSmiles=True, doRandom=True, canonical=i % 2 == 0))
    for s in written:
        ids = _ids(tokenizer, s)
        if tokenizer.unk_token_id not in ids:
            assert _first_banned(grammar, ids) is None, s


# Each prefix + next token the grammar bans, and a completion of it RDKit rejects (the rule's evidence).
_BANNED = [
    ("", "(", "(C)C"), ("", "=", "=CC"), ("", "1", "1CC1"), ("", ".", ".C"), ("", "<eos>", ""),
    ("C", ")", "C)"), ("C(", "(", "C((C))C"), ("C(", ")", "C()C"), ("C(", ".", "C(.C)C"), ("C(", "1", "C(1CC1)"),
    ("C(=", "1", "C(=1)CC1"), ("C=", "(", "C=(C)C"), ("C=", "=", "C==C"), ("C=", ".", "C=.C"), ("C=", "<eos>", "C="),
    ("C.", ".", "C..C"), ("C.", "1", "C.1CC1"), ("C.", "<eos>", "C."), ("C1", "1", "C11"), ("C1C", "1", "C1C1"),
    ("C12CC1", "2", "C12CC12"), ("C1CC", "<eos>", "C1CC"), ("C(C", "<eos>", "C(C"), ("Cc", "<eos>", "Cc"),
    ("C", "+", "C+C"), ("C", "@", "C@C"),
    # valence: an aliphatic atom's bonds never exceed its largest valence, a bond's order never an atom's capacity
    ("CF", "C", "CFC"), ("CF", "(", "CF(C)"), ("C=", "F", "C=F"), ("C#", "O", "C#O"), ("CO", "=", "CO=C"),
    ("CC(C)(C)(C)", "(", "CC(C)(C)(C)(C)"), ("CC(C)(C)(C)", "C", "CC(C)(C)(C)C"), ("C=C=", "1", "C=C=1CC1"),
    # liveness: an open ring-bond label keeps an atom that can still bond within reach
    ("C1CC", "F", "C1CCF1"), ("CO", "1", "CO1CC1"), ("C1CC(C)(C)(C", ")", "C1CC(C)(C)(C)C1"),
]


@pytest.mark.parametrize(("prefix", "token", "rejected"), _BANNED)
def test_what_it_bans_rdkit_rejects(grammar, tokenizer, prefix, token, rejected):
    state = grammar.start()
    for i in tokenizer(prefix, add_special_tokens=False)["input_ids"]:
        grammar.advance(state, i)
    assert not bool(grammar.allowed(state)[tokenizer.convert_tokens_to_ids(token)])
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(rejected)
    assert mol is None or mol.GetNumAtoms() == 0


def test_ring_bonds_after_a_branch_close_on_its_parent_atom(grammar, tokenizer):
    """RDKit reads ``C(C)1CC1``: a label after ')' opens on the branch's parent, so closing it there is banned."""
    state = grammar.start()
    for i in tokenizer("CC(C)1", add_special_tokens=False)["input_ids"]:
        grammar.advance(state, i)
    one = tokenizer.convert_tokens_to_ids("1")
    assert not bool(grammar.allowed(state)[one])  # C1 opened on the branch parent itself
    grammar.advance(state, tokenizer.convert_tokens_to_ids("C"))
    assert not bool(grammar.allowed(state)[one])  # and the next atom is already its neighbour
    grammar.advance(state, tokenizer.convert_tokens_to_ids("C"))
    assert bool(grammar.allowed(state)[one])


def test_elements_outside_the_space_and_special_tokens_never_come(tokenizer):
    anything = SmilesGrammar(tokenizer)
    druglike = space_grammar(tokenizer, "druglike")
    p, i, sep = tokenizer.convert_tokens_to_ids(["P", "I", "<sep>"])
    for g in (anything, druglike):
        assert not bool(g.allowed(g.start())[sep])
    assert bool(anything.allowed(anything.start())[p]) and not bool(druglike.allowed(druglike.start())[p])
    assert not bool(druglike.allowed(druglike.start())[i])


def test_a_kekule_grammar_bans_aromatic_atoms(tokenizer):
    kekule = space_grammar(tokenizer, "druglike", kekule=True)
    c, n, big_c = tokenizer.convert_tokens_to_ids(["c", "n", "C"])
    allowed = kekule.allowed(kekule.start())
    assert not bool(allowed[c]) and not bool(allowed[n]) and bool(allowed[big_c])
    for s in _moses_smiles()[:300]:
        mol = Chem.MolFromSmiles(s)
        Chem.Kekulize(mol, clearAromaticFlags=True)
        ids = _ids(tokenizer, Chem.MolToSmiles(mol, kekuleSmiles=True))
        if tokenizer.unk_token_id not in ids:
            assert _first_banned(kekule, ids) is None, s


def test_a_banned_token_is_an_error_when_replayed(grammar, tokenizer):
    with pytest.raises(ValueError, match="breaks the SMILES grammar"):
        grammar.advance(grammar.start(), tokenizer.convert_tokens_to_ids(")"))


def test_the_prior_sampled_under_it_never_ends_open_and_its_logps_are_the_constrained_rescoring(tokenizer):
    policy = Policy.load(DRUGLIKE_PRIOR_DIR)
    grammar = space_grammar(policy.tokenizer, "druglike")
    rollout = policy.sample([goal_prompt_ids(policy.tokenizer, 5.5, 6.0)], group_size=24, max_new_tokens=72, seed=0,
                            constraint=grammar)
    with rdBase.BlockLogs():
        for text, truncated in zip(rollout.texts, rollout.truncated.tolist(), strict=True):
            if truncated:
                continue
            assert text.count("(") == text.count(")")
            mol = Chem.MolFromSmiles(text, sanitize=False)  # parses: no unclosed ring, branch or syntax error
            assert mol is not None and mol.GetNumAtoms() > 0, text
    rescored = policy.completion_logprobs(rollout, constraint=grammar)
    torch.testing.assert_close(rescored, rollout.logps, atol=1e-4, rtol=0)


def test_a_run_samples_under_its_space_s_grammar_unless_the_config_turns_it_off(tokenizer):
    from arl_flows.config import build_config
    from arl_flows.suites import suite_for
    from arl_flows.suites.capabilities import decoding_constraint

    on = decoding_constraint(suite_for(build_config({"suite": "molecules", "options": {"space": "druglike"}})), tokenizer)
    off = suite_for(build_config({"suite": "molecules", "options": {"space": "druglike", "grammar": False}}))
    assert isinstance(on, SmilesGrammar)
    assert not bool(on.allowed(on.start())[tokenizer.convert_tokens_to_ids("P")])  # druglike has no phosphorus
    assert decoding_constraint(off, tokenizer) is None
    assert decoding_constraint(object(), tokenizer) is None  # a suite without the capability samples unconstrained
