"""Policy wrapper: padding-correct log-probs, sampling log-probs, trajectory masks, checkpoints."""

from __future__ import annotations

import pytest
import torch

from policies import Policy, collate

from arl_flows.suites.molecules.smiles import goal_prompt_ids
from storage.records import Turn, TurnKind


def _sequences(tok):
    return [
        goal_prompt_ids(tok, 3.0, 3.5) + tok("CCO", add_special_tokens=False)["input_ids"],
        goal_prompt_ids(tok, 5.0, 7.0) + tok("c1ccccc1N", add_special_tokens=False)["input_ids"],
        goal_prompt_ids(tok, 9.0, 9.5) + tok("C", add_special_tokens=False)["input_ids"],
    ]


def test_left_and_right_padding_give_the_same_logprobs(tiny_policy):
    tok = tiny_policy.tokenizer
    seqs = _sequences(tok)
    masks = [[1.0] * len(s) for s in seqs]
    right, rmask = tiny_policy.logprobs(collate(seqs, masks, tok.pad_token_id, "right"))
    left, lmask = tiny_policy.logprobs(collate(seqs, masks, tok.pad_token_id, "left"))
    for b, s in enumerate(seqs):
        n = len(s)
        torch.testing.assert_close(right[b, :n], left[b, -n:], atol=1e-5, rtol=0)
        assert rmask[b, 0] == 0 and lmask[b, -n] == 0  # the first token has no context
        # and each equals the row scored alone, without any padding
        alone, _ = tiny_policy.logprobs(collate([s], [masks[b]], tok.pad_token_id))
        torch.testing.assert_close(right[b, :n], alone[0], atol=1e-5, rtol=0)


def test_sample_logps_match_logprobs_and_flags(tiny_policy):
    tok = tiny_policy.tokenizer
    prompts = [goal_prompt_ids(tok, 3.0, 3.5), goal_prompt_ids(tok, 4.0, 6.0)]
    r = tiny_policy.sample(prompts, group_size=3, temperature=0.7, top_p=0.95, max_new_tokens=6, seed=1)
    assert r.completion_ids.shape[0] == 6 and r.group_size == 3
    assert r.prompt_index.tolist() == [0, 0, 0, 1, 1, 1]
    again = tiny_policy.completion_logprobs(r)
    torch.testing.assert_close(again, r.logps, atol=1e-5, rtol=0)
    for row in range(6):
        ids, m = r.completion_ids[row], r.completion_mask[row]
        ended = bool((ids[m > 0] == tok.eos_token_id).any())
        assert bool(r.truncated[row]) == (not ended)
        if r.truncated[row]:
            assert m.sum() == 6
    same = tiny_policy.sample(prompts, group_size=3, temperature=0.7, top_p=0.95, max_new_tokens=6, seed=1)
    assert torch.equal(same.completion_ids, r.completion_ids)  # seeded


def test_sample_rejects_bad_arguments(tiny_policy):
    with pytest.raises(ValueError, match="temperature"):
        tiny_policy.sample([[1, 2]], temperature=0)
    with pytest.raises(ValueError, match="empty prompt"):
        tiny_policy.sample([[]])


def test_trajectory_mask_excludes_prompt_and_observations(tiny_policy):
    tok = tiny_policy.tokenizer
    turns = [
        Turn(role="assistant", content="CC", kind=TurnKind.tool_call),
        Turn(role="tool", content="O", kind=TurnKind.observation),
        Turn(role="assistant", content="CCN"),
    ]
    ids, mask = tiny_policy.encode_trajectory(goal_prompt_ids(tok, 3.0, 3.5), turns)
    assert mask == [0.0] * 3 + [1.0, 1.0] + [0.0] + [1.0, 1.0, 1.0]  # prompt, tool call, observation, answer
    logps, lmask = tiny_policy.logprobs(collate([ids], [mask], tok.pad_token_id))
    assert lmask[0].tolist() == mask and logps.shape == (1, len(ids))


def test_checkpoint_round_trip_gives_identical_logits(tiny_policy, tmp_path):
    tok = tiny_policy.tokenizer
    seqs = _sequences(tok)
    batch = collate(seqs, [[1.0] * len(s) for s in seqs], tok.pad_token_id)
    path, sha = tiny_policy.save(tmp_path / "ckpt")
    assert len(sha) == 64 and (tmp_path / "ckpt" / "model.safetensors").exists()
    loaded = Policy.load(path)
    assert torch.equal(
        loaded.forward_logits(batch.input_ids, batch.attention_mask),
        tiny_policy.forward_logits(batch.input_ids, batch.attention_mask),
    )
    assert loaded.tokenizer("C[NH3+]Cl")["input_ids"] == tok("C[NH3+]Cl")["input_ids"]
    record = loaded.checkpoint(tmp_path / "again", run_id="r1", step=3)
    assert record.sha256 == sha and record.step == 3


def test_save_replacing_swaps_the_whole_directory_and_leaves_no_temporary(tiny_policy, tmp_path):
    target = tmp_path / "prior"
    target.mkdir()
    (target / "stale.txt").write_text("from an older prior")
    tiny_policy.save_replacing(target, {"pretrain_report.json": '{"steps": 1}'})
    assert not (target / "stale.txt").exists() and (target / "pretrain_report.json").read_text() == '{"steps": 1}'
    assert Policy.load(target).tokenizer.get_vocab() == tiny_policy.tokenizer.get_vocab()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prior"]


def test_load_refuses_a_non_model_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        Policy.load(tmp_path)
