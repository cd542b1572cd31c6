"""Reward composition against hand-computed values."""

import math

import pytest

from storage.records import Status, Tier, Verdict
from arl_flows.suites.code.reward import RewardWeights, code_reward, cosine_length_penalty, repeat_penalty

ONE_TURN = "<think>t</think><code>print(1)</code>"


def verdict(tier, status, value=None, **values):
    return Verdict(
        candidate_key="k", verifier=f"v-{tier}", version="1", params_hash="h", tier=tier, status=status,
        value=value, values=values,
    )  # fmt: skip


FAST_OK = verdict(Tier.fast, Status.ok, 1.0)


def exec_ok(correct, exit="success", turns=None):
    turns = turns or [{"outcome": exit, "correct": correct}]
    return verdict(Tier.simulation, Status.ok, 1.0 if correct else 0.0, exit=exit, turns=turns)


def hidden_ok(passed):
    return verdict(Tier.high_fidelity, Status.ok, 1.0 if passed else 0.0)


CASES = [
    # (answer, verdicts, tokens, expected total, expected components)
    ("<think>t</think><code>print(1)", [], 10, -1.0, {"format": -1.0}),
    (ONE_TURN, [verdict(Tier.fast, Status.invalid)], 10, -1.0, {"format": -1.0}),
    (ONE_TURN, [FAST_OK, verdict(Tier.simulation, Status.invalid)], 10, -1.0, {"format": -1.0}),
    (ONE_TURN, [FAST_OK, exec_ok(True), hidden_ok(True)], 10, 1.65, {"format": 0.2, "execution": 0.3, "outcome": 1.0, "process": 0.15}),
    (ONE_TURN, [FAST_OK, exec_ok(False), hidden_ok(False)], 10, 0.45, {"execution": 0.3, "outcome": -0.2}),
    (ONE_TURN, [FAST_OK, exec_ok(False, "error"), hidden_ok(False)], 10, -0.75, {"execution": -0.5, "outcome": -0.2, "process": -0.25}),
    (ONE_TURN, [FAST_OK, exec_ok(False, "timeout"), hidden_ok(False)], 10, -0.75, {"execution": -0.5}),
    # Exec says right (hard-coded print), hidden tests say wrong: the higher tier decides.
    (ONE_TURN, [FAST_OK, exec_ok(True), hidden_ok(False)], 10, 0.45, {"outcome": -0.2}),
    # Halfway between budget 512 and 1024 tokens: -0.5 * (1 - cos(pi/2)) / 2 = -0.25.
    (ONE_TURN, [FAST_OK, exec_ok(True), hidden_ok(True)], 768, 1.4, {"length": -0.25}),
    (ONE_TURN, [FAST_OK, exec_ok(True), hidden_ok(True)], 5000, 1.15, {"length": -0.5}),
]


@pytest.mark.parametrize(("text", "verdicts", "tokens", "total", "parts"), CASES)
def test_reward_table(text, verdicts, tokens, total, parts):
    r = code_reward(text, verdicts, completion_tokens=tokens)
    assert r.total == pytest.approx(total)
    assert r.total == pytest.approx(sum(r.components.values()))
    for name, value in parts.items():
        assert r.components[name] == pytest.approx(value)


def test_format_failure_stops():
    r = code_reward("no tags at all", [FAST_OK, exec_ok(True), hidden_ok(True)], completion_tokens=1)
    assert r.stopped and r.total == -1.0 and r.components == {"format": -1.0}


def test_repeat_penalty_grows():
    assert repeat_penalty(["a", "b"], 0.1) == 0.0
    assert repeat_penalty(["a", "a", "a"], 0.1) == pytest.approx(-0.3)  # 0 + 0.1 + 0.2
    assert repeat_penalty(["a", "b", "a", "b", "a"], 0.1) == pytest.approx(-0.4)  # a: 0.1+0.2, b: 0.1


def test_cosine_length_penalty_shape():
    assert cosine_length_penalty(100, 512, 1024, 0.5) == 0.0
    assert cosine_length_penalty(512, 512, 1024, 0.5) == 0.0
    assert cosine_length_penalty(640, 512, 1024, 0.5) == pytest.approx(-0.5 * (1 - math.cos(math.pi / 4)) / 2)
    assert cosine_length_penalty(10_000, 512, 1024, 0.5) == pytest.approx(-0.5)


def test_multi_turn_process_rewards():
    text = (
        "<think>a</think><code>print(1/0)</code><observation>err</observation>"
        "<think>b</think><code>print(1/0)</code><observation>err</observation>"
        "<think>c</think><code>print(5050)</code>"
    )
    turns = [
        {"outcome": "error", "correct": False},
        {"outcome": "error", "correct": False},
        {"outcome": "success", "correct": True},
    ]
    r = code_reward(text, [FAST_OK, exec_ok(True, turns=turns), hidden_ok(True)], completion_tokens=50)
    assert r.per_turn == pytest.approx([-0.5, -0.5, 0.3])
    # process = 0.5 * mean(-0.5, -0.5, 0.3) = -0.11667; repeat: the 2nd identical turn costs 0.1
    assert r.components["process"] == pytest.approx(0.5 * (-0.7 / 3))
    assert r.components["repeat"] == pytest.approx(-0.1)
    assert r.total == pytest.approx(0.2 + 0.3 + 1.0 - 0.7 / 6 - 0.1)


def test_unverified_tiers_do_not_score_zero():
    # Hidden tests asked for but not verified: the stdout match earns no outcome credit (a hard-coded print would).
    for status in (Status.failed, Status.timeout, Status.pending):
        r = code_reward(ONE_TURN, [FAST_OK, exec_ok(True), verdict(Tier.high_fidelity, status)], completion_tokens=1)
        assert not r.complete and r.fidelity is None
        assert "outcome" not in r.components
        assert r.total == pytest.approx(0.2 + 0.3 + 0.15)
        full = code_reward(ONE_TURN, [FAST_OK, exec_ok(True), hidden_ok(True)], completion_tokens=1)
        assert r.total < full.total - 0.99
    # ...but a wrong stdout still costs the `wrong` part.
    r = code_reward(ONE_TURN, [FAST_OK, exec_ok(False), verdict(Tier.high_fidelity, Status.failed)], completion_tokens=1)
    assert r.components["outcome"] == pytest.approx(-0.2) and not r.complete
    # With no hidden-test verdict asked for, a passed stdout comparison is an expectation with its std, a failed one wrong.
    r = code_reward(ONE_TURN, [FAST_OK, exec_ok(True)], completion_tokens=1)
    assert r.fidelity == Tier.simulation and r.components["outcome"] == pytest.approx(0.5 * 1.0 + 0.5 * -0.2)
    assert r.std == pytest.approx(1.2 * 0.5)
    r = code_reward(ONE_TURN, [FAST_OK, exec_ok(False)], completion_tokens=1)
    assert r.components["outcome"] == pytest.approx(-0.2) and r.std == 0.0
    r = code_reward(ONE_TURN, [FAST_OK, verdict(Tier.simulation, Status.timeout)], completion_tokens=1)
    assert not r.complete and "outcome" not in r.components and "execution" not in r.components
    assert r.total == pytest.approx(0.2)


def test_weights_are_configurable_and_validated():
    w = RewardWeights(correct=2.0, exec_success=0.0)
    r = code_reward(ONE_TURN, [FAST_OK, exec_ok(True), hidden_ok(True)], completion_tokens=1, weights=w)
    assert r.total == pytest.approx(0.2 + 0.0 + 2.0 + 0.5 * 0.0)
    with pytest.raises(ValueError, match="must exceed length_budget_tokens"):
        RewardWeights(length_budget_tokens=100, length_max_tokens=50)


def test_a_tier_never_asked_carries_its_uncertainty():
    """A program that only prints the expected output, its hidden tests never asked, ranks below a verified one."""
    printer = code_reward(ONE_TURN, [FAST_OK, exec_ok(True)], completion_tokens=10)
    verified = code_reward(ONE_TURN, [FAST_OK, exec_ok(True), hidden_ok(True)], completion_tokens=10)
    assert printer.std > 0.5 and verified.std == 0.0
    # Even a verified program paying the whole length penalty ranks above it (before, both were 1.65 with std 0,
    # and any penalty on the verified one let the unverified print win the rerank).
    long_verified = code_reward(ONE_TURN, [FAST_OK, exec_ok(True), hidden_ok(True)], completion_tokens=5000)
    assert long_verified.total > printer.total
    # The rate is a weight: 1.0 trusts the visible check (no std), 0.0 takes it for wrong.
    assert code_reward(ONE_TURN, [FAST_OK, exec_ok(True)], weights=RewardWeights(unverified_pass_rate=1.0)).std == 0.0
    w0 = RewardWeights(unverified_pass_rate=0.0)
    assert code_reward(ONE_TURN, [FAST_OK, exec_ok(True)], weights=w0).components["outcome"] == pytest.approx(-0.2)


def test_suite_reward_estimate_keeps_the_std_of_what_was_not_run():
    from arl_flows.config import load_config
    from arl_flows.suites import suite_for
    from storage.records import RewardEstimate, Trajectory

    suite = suite_for(load_config(overrides={"suite": "code", "policy_path": "/models/x"}))
    traj = Trajectory(prompt_id="p", step=0, group_id="g", candidate_key="k", final_answer=ONE_TURN, completion_tokens=10)
    est = RewardEstimate(trajectory_id=traj.id, mean=0.0, std=0.0)

    class _Cand:
        key = "k"

    (unasked,) = suite.rewards([traj], [_Cand()], {"k": [FAST_OK, exec_ok(True)]}, [est])
    (verified,) = suite.rewards([traj], [_Cand()], {"k": [FAST_OK, exec_ok(True), hidden_ok(True)]}, [est])
    assert unasked.std == pytest.approx(0.6) and verified.std == 0.0
    assert verified.mean > unasked.mean
