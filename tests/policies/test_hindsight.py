"""Hindsight relabeling and hint-teacher distillation."""

from __future__ import annotations

import pytest
import torch

from policies import HintedExample, PolicyTrainer, TrainerConfig, achieved_value, collate, feedback_hint, hint_prompt, top_scale_value

from arl_flows.suites.molecules.smiles import goal_prompt_ids, goal_window

from arl_flows.suites.molecules.hindsight import relabel
from storage.records import Prompt, RewardEstimate, Status, Tier, Trajectory, Verdict

from tests.helpers.tiny_policy import make_tiny_policy


def _verdict(tier, status, value=None):
    return Verdict(candidate_key="molecules:CCO", verifier=f"v_{tier}", version="1", params_hash="0",
                   tier=tier, status=status, value=value)


def test_achieved_value_prefers_the_highest_fidelity_ok_verdict():
    verdicts = [
        _verdict(Tier.fast, Status.ok, 7.1),
        _verdict(Tier.simulation, Status.ok, 6.4),
        _verdict(Tier.high_fidelity, Status.failed),
    ]
    assert achieved_value(verdicts) == 6.4
    assert achieved_value([_verdict(Tier.fast, Status.invalid)]) is None


def _estimate(mean, std):
    return RewardEstimate(trajectory_id="t", mean=0.1, std=0.1, value_mean=mean, value_std=std, components={"p_hit": 0.0})


def test_top_scale_value_reads_the_posterior_only_when_it_is_sure():
    assert top_scale_value(_estimate(6.3, 0.0), 0.5) == 6.3  # a top-tier verdict: exact
    assert top_scale_value(_estimate(6.3, 0.4), 0.5) == 6.3
    assert top_scale_value(_estimate(6.3, 0.6), 0.5) is None
    assert top_scale_value(_estimate(float("nan"), 0.1), 0.5) is None
    invalid = RewardEstimate(trajectory_id="t", mean=-1.0, std=0.0, invalid=True)
    assert top_scale_value(invalid, 0.5) is None and top_scale_value(None, 0.5) is None


def test_molecule_relabels_use_the_top_tier_scale_not_a_lower_tiers_raw_value(smiles_tokenizer):
    """An xTB gap is ~2 eV below the DFT gap the goals are on: relabel with the calibrated posterior."""
    from types import SimpleNamespace

    from arl_flows.config import load_config
    from arl_flows.suites import Failure
    from arl_flows.suites.molecules.suite import MoleculeSuite

    tok = smiles_tokenizer
    suite = MoleculeSuite(load_config())  # hindsight: min_fidelity simulation, max_value_std 0.5
    completion = tok("CCO", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    prompt = Prompt(id="p", suite="molecules", text="gap 3-4", goal={"low": 3.0, "high": 4.0})
    traj = Trajectory(id="t", prompt_id="p", step=0, group_id="g", final_answer="CCO", candidate_key="molecules:CCO")
    fast, xtb = _verdict(Tier.fast, Status.ok, 4.9), _verdict(Tier.simulation, Status.ok, 4.2)
    failures = [
        Failure(traj, prompt, completion, [fast, xtb], _estimate(6.3, 0.4)),  # relabelled at 6.0-6.5, not 4.0-4.5
        Failure(traj, prompt, completion, [fast, xtb], _estimate(6.3, 0.8)),  # posterior too wide: skipped
        Failure(traj, prompt, completion, [fast], _estimate(6.3, 0.3)),  # only the fast tier answered: skipped
    ]
    relabeled, hinted = suite.hindsight(SimpleNamespace(tokenizer=tok), failures)
    assert [ex.goal for ex in relabeled] == [(6.0, 6.5)] and not hinted


def test_relabel_rewrites_the_goal_to_the_achieved_bin(smiles_tokenizer):
    tok = smiles_tokenizer
    completion = tok("CCO", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    ex = relabel(completion, 6.43, tok)
    assert ex.goal == (6.0, 6.5) and goal_window(tok, ex.prompt_ids) == (6.0, 6.5)
    assert ex.completion_ids == completion
    with pytest.raises(ValueError, match="non-finite"):
        relabel(completion, float("nan"), tok)


def test_relabeled_sft_raises_the_completion_likelihood_under_the_new_goal(tiny_policy):
    tok = tiny_policy.tokenizer
    ex = relabel(tok("CC(=O)N", add_special_tokens=False)["input_ids"] + [tok.eos_token_id], 6.43, tok)
    before = _loglik(tiny_policy, ex.prompt_ids, ex.completion_ids)
    trainer = PolicyTrainer(tiny_policy, TrainerConfig(lr=3e-3))
    for _ in range(5):
        metrics = trainer.distill_step(relabeled=[ex])
    assert _loglik(tiny_policy, ex.prompt_ids, ex.completion_ids) > before + 1.0
    assert metrics["loss/sft"] > 0


def test_hint_prompt_shapes():
    assert hint_prompt([1, 10, 4], [7, 8]) == [1, 10, 7, 8, 4]  # hint goes before the separator
    text = hint_prompt("Write a molecule with gap 3-4 eV.", feedback_hint(5.2, "gap too large", unit="eV"))
    assert "achieved 5.2 eV" in text and "gap too large" in text
    with pytest.raises(TypeError):
        hint_prompt("text", [1, 2])


def test_kl_is_zero_when_teacher_and_student_contexts_are_equal(tiny_policy):
    tok = tiny_policy.tokenizer
    prompt = goal_prompt_ids(tok, 3.0, 3.5)
    r = tiny_policy.sample([prompt], group_size=4, max_new_tokens=8, seed=0)
    examples = [
        HintedExample(prompt, prompt, r.completion_ids[i][r.completion_mask[i] > 0].tolist()) for i in range(4)
    ]
    metrics = PolicyTrainer(tiny_policy).distill_step(hinted=examples)
    assert abs(metrics["loss/distill_kl"]) < 1e-6
    assert metrics["grad/norm"] < 1e-5


def test_student_learns_the_hinted_tokens_from_a_hinted_teacher(smiles_tokenizer):
    """Toy task: the hint is the answer "CCO". A teacher that reads the hint (a separate frozen
    model, fitted here by SFT to answer what the hint says) is distilled into a student that does
    not see it; the student's log-prob of the hinted answer must rise."""
    tok = smiles_tokenizer
    prompt = goal_prompt_ids(tok, 3.0, 3.5)
    answer = tok("CCO", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    hinted = hint_prompt(prompt, answer[:-1])

    teacher = make_tiny_policy(tok, seed=1)
    fit = PolicyTrainer(teacher, TrainerConfig(lr=1e-2))
    for _ in range(30):
        fit.distill_step(relabeled=[_as_example(hinted, answer)])

    student = make_tiny_policy(tok, seed=2)
    before = _loglik(student, prompt, answer)
    trainer = PolicyTrainer(student, TrainerConfig(lr=1e-2))
    for step in range(8):
        r = student.sample([prompt], group_size=8, max_new_tokens=6, seed=step)
        examples = [
            HintedExample(prompt, hinted, r.completion_ids[i][r.completion_mask[i] > 0].tolist()) for i in range(8)
        ]
        metrics = trainer.distill_step(hinted=examples, teacher=teacher)
        assert metrics["loss/distill_kl"] > 0
    assert _loglik(student, prompt, answer) > before + 2.0


def _loglik(policy, prompt_ids, completion_ids) -> float:
    """The policy's log-likelihood of ``completion_ids`` after ``prompt_ids``."""
    seq, mask = list(prompt_ids) + list(completion_ids), [0.0] * len(prompt_ids) + [1.0] * len(completion_ids)
    with torch.no_grad():
        logps, m = policy.logprobs(collate([seq], [mask], policy.tokenizer.pad_token_id))
    return float((logps * m).sum())


def _as_example(prompt_ids, completion_ids):
    from policies import RelabeledExample

    return RelabeledExample(list(prompt_ids), list(completion_ids), (0.0, 0.0))
