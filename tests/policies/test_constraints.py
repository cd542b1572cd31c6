"""Constrained decoding in the core: masked sampling, constrained rescoring, and the unconstrained path unchanged."""

from __future__ import annotations

import pytest
import torch

from arl_flows.suites.molecules.smiles import goal_prompt_ids
from policies import ConstrainedRows, DecodingConstraint, PolicyTrainer, TrainerConfig, completion_masks


class _EndAfterTrigger:
    """A toy grammar over ids alone: ``banned`` ids never come; once ``trigger`` came, only eos may follow."""

    def __init__(self, vocab_size: int, eos: int, trigger: int, banned: set[int]):
        self.vocab_size = vocab_size
        self.eos, self.trigger = eos, trigger
        self._free = torch.ones(vocab_size, dtype=torch.bool)
        self._free[list(banned)] = False
        self._end = torch.zeros(vocab_size, dtype=torch.bool)
        self._end[eos] = True

    def start(self) -> bool:
        return False

    def advance(self, state: bool, token_id: int) -> bool:
        return state or token_id == self.trigger

    def allowed(self, state: bool) -> torch.Tensor:
        return self._end if state else self._free


class _AllowAll(_EndAfterTrigger):
    def __init__(self, vocab_size: int):
        super().__init__(vocab_size, 0, -1, set())


def _prompts(tok):
    return [goal_prompt_ids(tok, 3.0, 3.5), goal_prompt_ids(tok, 5.0, 6.0)]


def _toy(tiny_policy) -> _EndAfterTrigger:
    tok = tiny_policy.tokenizer
    c_id, n_id, o_id = tok.convert_tokens_to_ids(["C", "N", "O"])
    return _EndAfterTrigger(len(tok), tok.eos_token_id, trigger=o_id, banned={c_id, n_id})


def test_a_toy_constraint_is_a_decoding_constraint(tiny_policy):
    assert isinstance(_toy(tiny_policy), DecodingConstraint)


def test_unconstrained_sampling_draws_the_tokens_it_always_drew(tiny_policy):
    """Golden tokens of the tiny policy, seed 7, recorded before constrained decoding existed."""
    r = tiny_policy.sample(_prompts(tiny_policy.tokenizer)[:1], group_size=3, temperature=0.9, top_p=0.95,
                           max_new_tokens=8, seed=7)
    assert r.completion_ids.tolist() == [
        [84, 88, 11, 27, 38, 35, 63, 49], [40, 24, 47, 72, 88, 25, 38, 17], [16, 66, 3, 27, 74, 54, 74, 72],
    ]
    torch.testing.assert_close(r.logps.sum(1), torch.tensor([-36.3821, -35.9033, -35.836]), atol=1e-3, rtol=0)


def test_an_allow_all_constraint_changes_nothing(tiny_policy):
    tok = tiny_policy.tokenizer
    plain = tiny_policy.sample(_prompts(tok), group_size=3, temperature=0.8, max_new_tokens=12, seed=3)
    masked = tiny_policy.sample(_prompts(tok), group_size=3, temperature=0.8, max_new_tokens=12, seed=3,
                                constraint=_AllowAll(len(tok)))
    assert torch.equal(plain.completion_ids, masked.completion_ids)
    torch.testing.assert_close(plain.logps, masked.logps)


def test_constrained_samples_obey_the_constraint_and_their_logps_are_the_constrained_rescoring(tiny_policy):
    tok = tiny_policy.tokenizer
    toy = _toy(tiny_policy)
    r = tiny_policy.sample(_prompts(tok), group_size=8, temperature=1.0, top_p=0.9, max_new_tokens=16, seed=0,
                           constraint=toy)
    banned = set(tok.convert_tokens_to_ids(["C", "N"]))
    ended_after_trigger = 0
    for ids, m in zip(r.completion_ids.tolist(), r.completion_mask.tolist(), strict=True):
        real = [t for t, keep in zip(ids, m, strict=True) if keep]
        assert not banned & set(real)
        if toy.trigger in real:
            assert real[real.index(toy.trigger) + 1 :] in ([], [toy.eos])
            ended_after_trigger += toy.trigger != real[-1]
    assert ended_after_trigger  # the trigger came and was followed by eos alone
    rescored = tiny_policy.completion_logprobs(r, constraint=toy)
    torch.testing.assert_close(rescored, r.logps, atol=1e-5, rtol=0)
    unconstrained = tiny_policy.completion_logprobs(r)
    assert (unconstrained <= rescored + 1e-6).all()  # renormalising over fewer ids only raises a token's log-prob
    assert (unconstrained < rescored - 1e-3).any()


def test_entropy_under_a_mask_is_finite(tiny_policy):
    tok = tiny_policy.tokenizer
    toy = _toy(tiny_policy)
    r = tiny_policy.sample(_prompts(tok), group_size=2, max_new_tokens=10, seed=1, constraint=toy)
    batch = r.token_batch()
    masks = completion_masks(toy, r.completion_ids, r.completion_mask, len(tok))  # (N, C, V)
    allowed = torch.cat([torch.ones(masks.shape[0], r.prompt_ids.shape[1], len(tok), dtype=torch.bool), masks], dim=1)
    _, _, ent = tiny_policy.logprobs(batch, allowed=allowed, with_entropy=True)
    assert torch.isfinite(ent).all()


def test_a_constraint_that_allows_nothing_is_an_error():
    class Nothing(_AllowAll):
        def allowed(self, state: bool) -> torch.Tensor:
            return torch.zeros(self.vocab_size, dtype=torch.bool)

    rows = ConstrainedRows(Nothing(5), rows=2, width=5)
    assert rows.masks([False, False]).all()  # inactive rows are not asked
    with pytest.raises(ValueError, match="allows no token for row 1"):
        rows.masks([False, True])
    with pytest.raises(ValueError, match="covers 5 token ids"):
        ConstrainedRows(Nothing(5), rows=1, width=4)


def test_the_trainer_samples_and_scores_under_its_constraint(tiny_policy):
    tok = tiny_policy.tokenizer
    toy = _toy(tiny_policy)
    trainer = PolicyTrainer(tiny_policy, TrainerConfig(group_size=4, max_new_tokens=10, num_iterations=1), constraint=toy)
    rollout = trainer.rollout(_prompts(tok), seed=2)
    banned = set(tok.convert_tokens_to_ids(["C", "N"]))
    assert not banned & set(rollout.completion_ids[rollout.completion_mask > 0].tolist())
    metrics = trainer.step(rollout, [float(i % 3) for i in range(len(rollout.texts))])
    assert torch.isfinite(torch.tensor(metrics["loss/policy"]))
