"""The atom-level SMILES tokenizer and goal prompts."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from arl_flows.suites.molecules.smiles import gap_bin_tokens, goal_prompt_ids, goal_window, split_smiles


def test_round_trip_on_all_qm9_smiles(smiles_tokenizer, qm9):
    tok = smiles_tokenizer
    for smiles, _ in qm9:
        ids = tok(smiles, add_special_tokens=False)["input_ids"]
        assert tok.unk_token_id not in ids
        assert tok.decode(ids) == smiles


def test_atom_level_split():
    assert split_smiles("C[NH3+]c1ccc(Cl)cc1Br") == ["C", "[NH3+]", "c", "1", "c", "c", "c", "(", "Cl", ")", "c", "c", "1", "Br"]
    assert split_smiles("C%12CC%12") == ["C", "%12", "C", "C", "%12"]
    with pytest.raises(ValueError, match="outside"):
        split_smiles("C&C")


def test_goal_window_round_trip_and_saved_tokenizer(smiles_tokenizer, tmp_path):
    tok = smiles_tokenizer
    ids = goal_prompt_ids(tok, 3.0, 4.0)
    assert tok.convert_ids_to_tokens(ids) == ["<bos>", "<gap_3.0_3.5>", "<gap_3.5_4.0>", "<sep>"]
    assert goal_window(tok, ids) == (3.0, 4.0)
    assert goal_window(tok, goal_prompt_ids(tok, 3.2, 3.3)) == (3.0, 3.5)  # snapped to the covering bin
    assert gap_bin_tokens(-5, 0.1) == ["<gap_0.5_1.0>"] and gap_bin_tokens(20, 30) == ["<gap_13.5_14.0>"]
    with pytest.raises(ValueError, match="low < high"):
        gap_bin_tokens(4.0, 3.0)
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    text = "<bos><gap_3.0_3.5><sep>CC(=O)N<eos>"
    assert again(text, add_special_tokens=False)["input_ids"] == tok(text, add_special_tokens=False)["input_ids"]
    assert again.decode(again("CC(=O)N")["input_ids"]) == "CC(=O)N"
