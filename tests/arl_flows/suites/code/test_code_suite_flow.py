"""The code suite through a training run: a text policy (built here from a config, never downloaded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.ledger import Ledger


def _tiny_text_policy(directory: Path) -> str:
    """A 1-layer GPT-2 with a byte-level BPE tokenizer trained on the bundled task texts."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    from arl_flows.suites.code import load_tasks

    texts = [t.prompt + "\n" + t.reference for t in load_tasks()] + ["<think></think><code></code>"]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=400, min_frequency=1, special_tokens=["<pad>", "<s>", "</s>"])
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_layer=1, n_embd=32, n_head=2, n_positions=256,
                                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id))
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return str(directory)


def _code_overrides(policy_path: str, **extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "name": "code-run",
        "suite": "code",
        "policy_path": policy_path,
        "steps": 1,
        "code_tasks": ["sum-to-n", "factorial"],
        "rollout": {"prompts_per_step": 2},
        "trainer": {"group_size": 2, "max_new_tokens": 24},
    }
    base.update(extra)
    return base


def test_code_config_needs_a_policy_path() -> None:
    from arl_flows.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="policy_path"):
        load_config(overrides={"suite": "code"})
    cfg = load_config(overrides={"suite": "code", "policy_path": "/models/qwen"})
    assert [t.verifier for t in cfg.tiers] == ["code-format", "code-exec", "code-tests"]
    assert cfg.scheduler.policy == "all" and cfg.hindsight.hint_teacher


def test_code_suite_training_run(prefect_harness, tmp_path: Path, sqlite_url: str) -> None:
    from arl_flows.flows import run_training

    policy = _tiny_text_policy(tmp_path / "policy")
    summary = run_training(_code_overrides(policy), database_url=sqlite_url)
    assert summary["status"] == "completed" and summary["trajectories"] == 4
    ledger = Ledger(sqlite_url)
    rows = ledger.step_trajectories(summary["id"], 0)
    # An untrained model writes no valid <think>/<code> answer: the composed code reward is the format failure.
    for traj, est in rows:
        assert traj.candidate_key.startswith("code:")
        assert est is not None and est.mean == -1.0 and est.components == {"format": -1.0}
    verdicts = ledger.verdicts_for([t.candidate_key for t, _ in rows])
    assert verdicts and all(v.verifier == "code-format" and v.status.value == "invalid" for v in verdicts)
    assert all(v.feedback for v in verdicts)  # feedback names the problem
    assert ledger.integrity_problems() == []


def test_code_suite_rewards_a_correct_answer_through_the_session(tmp_path: Path, sqlite_url: str) -> None:
    """Score hand-written trajectories through the same verify path a run uses (reward composition end to end)."""
    from arl_flows.config import load_config
    from arl_flows.step import StepHooks, verify
    from arl_flows.training import RunSession, StepState
    from storage.records import Trajectory
    from arl_flows.suites.code import get_task

    policy = _tiny_text_policy(tmp_path / "policy")
    ledger = Ledger(sqlite_url)
    session = RunSession.open(load_config(overrides=_code_overrides(policy)), ledger)
    prompts = session.suite.prompts(0)
    ledger.add_prompts(prompts)
    task = get_task("sum-to-n")
    answers = [
        f"<think>sum</think><code>\n{task.reference}\n</code>",
        "<think>guess</think><code>print(5050)</code>",
    ]
    trajs, cands = [], []
    for i, text in enumerate(answers):
        cand, final, turns = session.suite.completion(prompts[0], text)
        cands.append(cand)
        trajs.append(Trajectory(run_id=session.run.id, prompt_id=prompts[0].id, step=0, group_id="g", turns=turns,
                                final_answer=final, candidate_key=cand.key, completion_tokens=20))
    ledger.add_trajectories(trajs)
    session.steps[0] = StepState(trajectories=trajs, candidates=cands, prompts=prompts)
    result = verify(session, 0, StepHooks())
    honest, hardcoded = result.estimates
    assert honest.mean > 1.0 and honest.fidelity.value == "high_fidelity"
    assert hardcoded.mean < honest.mean and hardcoded.components["outcome"] < 0  # the hidden tests catch it
    session.finish()
