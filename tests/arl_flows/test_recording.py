"""The one batch recorder: completions become ledger trajectories of one shape, and recorded tokens a rollout.

Runs on the core's toy suite (``tests/helpers/toy_suite.py``) and a real
ledger; the policy is the toy suite's own (a one-layer GPT-2 of letters).
"""

from __future__ import annotations

import pytest
import torch
from tests.helpers.toy_suite import toy_overrides

from arl_flows.config import load_config
from arl_flows.recording import Completion, has_behaviour, record_batch, rollout_from_tokens
from arl_flows.suites import suite_for
from storage.ledger import Ledger


def _suite():  # noqa: ANN202
    return suite_for(load_config(overrides=toy_overrides()))


def test_record_batch_writes_one_trajectory_per_completion_grouped_by_run_step_and_group(ledger: Ledger) -> None:
    suite = _suite()
    run = ledger.create_run("recording")
    prompts = suite.prompts(0)
    rows = [
        Completion(prompt=prompts[0], group=0, text="banana", completion_tokens=6, prompt_tokens=1),
        Completion(prompt=prompts[0], group=0, text="Sky", completion_tokens=3, truncated=True),
        Completion(prompt=prompts[1], group=1, text="kiwi", completion_tokens=4, policy_version=3,
                   completion_ids=[9, 10, 11, 12], behaviour_logprobs=[-0.5, -1.0, -0.25, -2.0]),
    ]
    trajectories, candidates = record_batch(ledger, suite, run.id, 2, rows)

    assert [c.key for c in candidates] == [t.candidate_key for t in trajectories]
    assert candidates[0].key == "toy:banana" and not candidates[1].valid  # "Sky" is not a lowercase word
    assert [t.group_id for t in trajectories] == [f"{run.id[:8]}-2-0", f"{run.id[:8]}-2-0", f"{run.id[:8]}-2-1"]
    stored = [t for t, _ in ledger.step_trajectories(run.id, 2)]
    assert [t.id for t in stored] == [t.id for t in trajectories]
    assert [(t.completion_tokens, t.truncated, t.policy_version) for t in stored] == [(6, False, None), (3, True, None), (4, False, 3)]
    assert stored[2].behaviour_logprobs == [-0.5, -1.0, -0.25, -2.0]
    assert set(ledger.get_prompts([p.id for p in prompts])) == {p.id for p in prompts}
    assert not has_behaviour(stored) and has_behaviour(stored[2:])


@pytest.mark.parametrize("recorded", [True, False], ids=["behaviour-logprobs", "recomputed"])
def test_rollout_from_tokens_pads_like_the_sampler_and_keeps_or_recomputes_old_logprobs(recorded: bool) -> None:
    from policies import PolicyConfig

    suite = _suite()
    policy = suite.load_policy(PolicyConfig())
    completions = [[5, 6, 7], [8], [9, 10]]
    logps = [[-0.1, -0.2, -0.3], [-0.4], [-0.5, -0.6]] if recorded else None
    rollout = rollout_from_tokens(policy, [[1], [1, 4]], [0, 0, 1], completions, [False, True, False],
                                  ["abc", "d", "ef"], 1.0, group_size=2, logps=logps)

    assert rollout.completion_ids.shape == (3, 3) and rollout.prompt_ids.shape == (3, 2)
    assert rollout.completion_mask.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]
    assert rollout.prompt_mask.tolist() == [[0, 1], [0, 1], [1, 1]]  # prompts left-padded, completions right-padded
    assert rollout.truncated.tolist() == [False, True, False] and rollout.prompt_index.tolist() == [0, 0, 1]
    if recorded:
        expected = torch.tensor([[-0.1, -0.2, -0.3], [-0.4, 0, 0], [-0.5, -0.6, 0]], dtype=rollout.logps.dtype)
        assert torch.allclose(rollout.logps, expected)
    else:
        assert torch.all(rollout.logps[rollout.completion_mask.bool()] < 0)
        assert torch.all(rollout.logps[~rollout.completion_mask.bool()] == 0)


def test_teach_from_ledger_learns_only_the_ladders_own_settings(ledger: Ledger) -> None:
    """History pairs come from each verifier as this run configures it: answers stored under the same names by a
    run with other parameters (or another version) do not calibrate this run's surrogate."""
    from arl_flows.ladder import build_ladder
    from arl_flows.recording import teach_from_ledger
    from storage.records import Verdict
    from verifiers.scheduler import Scheduler

    config = load_config(overrides=toy_overrides())
    suite, ladder = suite_for(config), build_ladder(config)
    fast, top = ladder[0], ladder[-1]
    words = ["banana", "kiwi", "apple", "cherry"]

    def verdicts(verifier, version: str, params: str, offset: float) -> list[Verdict]:  # noqa: ANN001
        return [Verdict(candidate_key=f"toy:{w}", verifier=verifier.name, version=version, params_hash=params,
                        tier=verifier.tier, status="ok", value=len(w) + offset) for w in words]

    ledger.put_verdicts(verdicts(fast, fast.version, fast.params_hash, 0.0) + verdicts(top, "older", top.params_hash, 50.0)
                        + verdicts(top, top.version, "other-params", 90.0))
    scheduler = Scheduler(ladder, config.scheduler)
    assert teach_from_ledger(scheduler, ledger, suite) == 0  # no top-tier answer of this run's setting yet
    ledger.put_verdicts(verdicts(top, top.version, top.params_hash, 1.0)[:3])
    assert teach_from_ledger(scheduler, ledger, suite) == 3


def test_a_top_tier_answer_far_from_all_others_is_named_and_not_learned(ledger: Ledger, caplog: pytest.LogCaptureFixture) -> None:
    """attack pass: a tier with no plausible range of its own (a user's lab-like tier) took one value in other units,
    and every later run's surrogate fitted it. The verdict stays in the ledger; the surrogate leaves it out, and says so."""
    import logging

    from arl_flows.ladder import build_ladder
    from arl_flows.recording import teach_from_ledger
    from storage.records import Verdict
    from verifiers.scheduler import Scheduler

    config = load_config(overrides=toy_overrides())
    suite, ladder = suite_for(config), build_ladder(config)
    top = ladder[-1]
    words = ["banana", "kiwi", "apple", "cherry", "melon", "grape", "lemon", "mango", "peach", "plum"]
    values = {w: float(len(w)) for w in words} | {"plum": 4000.0}
    ledger.put_verdicts([Verdict(candidate_key=f"toy:{w}", verifier=top.name, version=top.version, params_hash=top.params_hash,
                                 tier=top.tier, status="ok", value=v) for w, v in values.items()])
    scheduler = Scheduler(ladder, config.scheduler)
    with caplog.at_level(logging.WARNING, logger="arl.scheduler"):
        assert teach_from_ledger(scheduler, ledger, suite) == 10
    assert scheduler.surrogate.gross_values == {"toy:plum": 4000.0}
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"leaves out 1 {top.name} answer(s)" in said and "toy:plum = 4000" in said and "other units" in said


def test_the_reports_calibration_reads_the_runs_own_verifier_settings(ledger: Ledger) -> None:
    """`arl report`'s surrogate calibration pairs the answers of the run's ladder as configured, like a run's
    history: another setting's numbers under the same name (a wrong 'top' for every word) stay out (review)."""
    from arl_flows.ladder import build_ladder
    from arl_flows.report import _ladder_identity, surrogate_calibration
    from storage.records import Verdict

    config = load_config(overrides=toy_overrides())
    suite, ladder = suite_for(config), build_ladder(config)
    fast, top = ladder[0], ladder[-1]
    words = ["".join(chr(97 + (i * 7 + j) % 26) for j in range(3 + i % 9)) for i in range(60)]
    rows = [Verdict(candidate_key=f"toy:{w}", verifier=fast.name, version=fast.version, params_hash=fast.params_hash,
                    tier=fast.tier, status="ok", value=float(len(w))) for w in words]
    rows += [Verdict(candidate_key=f"toy:{w}", verifier=top.name, version=top.version, params_hash="other",
                     tier=top.tier, status="ok", value=100.0 + i) for i, w in enumerate(words)]
    ledger.put_verdicts(rows)
    names = [v.name for v in ladder]
    identity = _ladder_identity(config)
    assert identity == {v.name: (v.version, v.params_hash) for v in ladder}
    assert surrogate_calibration(ledger, names, suite, identity=identity) is None  # no answer of the run's own top tier
    assert surrogate_calibration(ledger, names, suite) is not None  # names alone: the other setting's numbers count
