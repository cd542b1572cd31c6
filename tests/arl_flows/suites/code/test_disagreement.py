"""Disagreement between tiers: flagged on the reward estimate, stored, counted per step in the report.

Code: the visible check (code-exec) against the hidden tests (code-tests), through the real tiers, the
scheduler and the ledger. Molecules: a DFT value far outside the surrogate's interval predicted from
the lower tiers (a real surrogate fitted on paired values).
"""

from __future__ import annotations

import numpy as np
import pytest

from storage.ledger import Ledger
from storage.records import RewardEstimate, Status, TierDisagreement, TrainingStepRecord, Trajectory
from arl_flows.suites.code import CodeExecution, CodeTests, get_task, make_candidate
from verifiers.disagreement import interval_disagreement, pass_fail_disagreement

LIMITS = {"cpu_s": 2, "wall_s": 10}


def _ans(code: str) -> str:
    return f"<think>t</think>\n<code>\n{code}\n</code>"


def test_pass_fail_table():
    cand = make_candidate("sum-to-n", _ans("print(1)"))
    ex, ts = CodeExecution({"limits": LIMITS}), CodeTests({"limits": LIMITS})
    ok1, ok0 = ex.verdict(cand, Status.ok, value=1.0), ex.verdict(cand, Status.ok, value=0.0)
    up1, up0 = ts.verdict(cand, Status.ok, value=1.0, feedback="5/5"), ts.verdict(cand, Status.ok, value=0.0, feedback="0/5")
    assert pass_fail_disagreement(ok1, up1) is None and pass_fail_disagreement(ok0, up0) is None
    assert pass_fail_disagreement(ok1, up0).kind == "lower_pass_upper_fail"
    assert pass_fail_disagreement(ok0, up1).kind == "lower_fail_upper_pass"
    # A tier that did not answer ok has no opinion.
    assert pass_fail_disagreement(ok1, ts.verdict(cand, Status.failed, feedback="sandbox")) is None
    assert pass_fail_disagreement(ex.verdict(cand, Status.invalid, feedback="policy"), up1) is None
    assert pass_fail_disagreement(None, up0) is None


def test_interval_rule():
    cand = make_candidate("sum-to-n", _ans("print(1)"))
    low, up = CodeExecution().verdict(cand, Status.ok, value=3.0), CodeTests().verdict(cand, Status.ok, value=5.5)
    assert interval_disagreement(low, up, mean=5.0, std=0.2) is None  # 2.5 std from the mean: within z = 4
    assert interval_disagreement(low, up, mean=5.0, std=0.2, z=2.0).kind == "outside_interval"
    assert interval_disagreement(low, up, mean=4.0, std=0.2).upper_value == 5.5  # 7.5 std
    assert interval_disagreement(low, up, mean=4.0, std=0.0) is None  # no interval, no judgement


def _code_step(ledger: Ledger, answers: list[str]):
    from arl_flows.config import load_config
    from arl_flows.suites import suite_for
    from arl_flows.step import verify_candidates
    from arl_flows.ladder import build_ladder
    from verifiers.scheduler import Scheduler

    cfg = load_config(overrides={"suite": "code", "policy_path": "/models/x", "code_tasks": ["sum-to-n"],
                                 "rollout": {"prompts_per_step": 1}})  # fmt: skip
    suite = suite_for(cfg)
    scheduler = Scheduler(build_ladder(cfg), cfg.scheduler, featurize=suite.featurize)
    run = ledger.create_run("disagreement", cfg.model_dump(mode="json") | {"steps": 1})
    prompts = suite.prompts(0)
    ledger.add_prompts(prompts)
    trajs, cands = [], []
    for text in answers:
        cand, final, turns = suite.completion(prompts[0], text)
        cands.append(cand)
        trajs.append(Trajectory(run_id=run.id, prompt_id=prompts[0].id, step=0, group_id="g", turns=turns,
                                final_answer=final, candidate_key=cand.key, completion_tokens=20))  # fmt: skip
    ledger.add_trajectories(trajs)
    result = verify_candidates(ledger, scheduler, suite, run.id, 0, trajs, cands)
    ledger.record_step(TrainingStepRecord(run_id=run.id, step=0, metrics={"reward/mean": 0.0}))
    return run, result


def test_code_disagreement_flagged_stored_and_reported(sqlite_url: str):
    from arl_flows.report import build_report, tier_disagreements

    task = get_task("sum-to-n")
    answers = [
        _ans(task.reference),  # honest: both tiers pass
        # Right on the visible call only: passes the visible check (stdout and solve(100)), fails the hidden tests.
        _ans("def solve(n):\n    return 5050\nprint(solve(100))"),
        _ans("def solve(n):\n    return n * (n + 1) // 2\nprint(solve(99))"),  # right function, wrong print
    ]
    ledger = Ledger(sqlite_url)
    run, result = _code_step(ledger, answers)
    honest, printer, misprint = result.estimates
    assert honest.disagreement is None
    assert isinstance(printer.disagreement, TierDisagreement)
    assert (printer.disagreement.kind, printer.disagreement.lower, printer.disagreement.upper) == (
        "lower_pass_upper_fail", "code-exec", "code-tests")  # fmt: skip
    assert misprint.disagreement.kind == "lower_fail_upper_pass"
    # The flag never changes the reward: the hidden tests decide the outcome part.
    assert honest.mean >= misprint.mean > printer.mean

    # Stored in the estimate row's JSON column, read back typed; components stay numbers only.
    stored = {t.final_answer: e for t, e in ledger.step_trajectories(run.id, 0)}
    assert stored[answers[1]].disagreement == printer.disagreement
    assert stored[answers[0]].disagreement is None
    assert all(isinstance(v, float) for e in stored.values() for v in e.components.values())

    per_step, flagged = tier_disagreements(ledger, run.id, [0])
    assert per_step == [{"step": 0, "estimates": 3, "flagged": 2}]
    assert sorted(f["kind"] for f in flagged) == ["lower_fail_upper_pass", "lower_pass_upper_fail"]
    md = build_report(ledger, run.id).markdown
    assert "## Disagreement between tiers" in md and "| 0 | 3 | 2 | 66.7% |" in md
    assert "lower_pass_upper_fail" in md


def test_report_without_flags_says_so(sqlite_url: str):
    from arl_flows.report import build_report

    ledger = Ledger(sqlite_url)
    run, result = _code_step(ledger, [_ans(get_task("sum-to-n").reference)])
    assert result.estimates[0].disagreement is None
    assert "No candidate was flagged in 1 step." in build_report(ledger, run.id).markdown


def test_estimate_record_rejects_an_untyped_flag():
    with pytest.raises(ValueError):
        RewardEstimate(trajectory_id="t", mean=0.0, std=0.0, disagreement={"kind": "whatever", "lower": "a", "upper": "b"})


def test_molecule_dft_far_outside_the_surrogate_interval_is_flagged():
    from arl_flows.config import load_config
    from arl_flows.suites import suite_for
    from arl_flows.ladder import build_ladder
    from arl_flows.suites.molecules.chemistry import make_candidate as make_molecule
    from verifiers.scheduler import Scheduler
    from verifiers.scheduler.surrogate import Observation

    cfg = load_config()
    suite = suite_for(cfg)
    ladder = build_ladder(cfg)
    names = [v.name for v in ladder]
    scheduler = Scheduler(ladder, cfg.scheduler, featurize=suite.featurize)
    smiles = ["C", "CC", "CCC", "CCO", "CO", "CN", "CCN", "C=O", "CC=O", "C#N", "CC#N", "OCO", "NCO", "CCCC", "CC(C)C",
              "CCCO", "CCOC", "COC", "C=C", "C=CC", "CC(=O)O", "NC=O", "OC=O", "CCCN", "c1ccccc1", "c1ccncc1", "C1CC1",
              "C1CCC1", "C1CCCC1", "FC", "FCC", "FC(F)F", "OCC=O", "CC(C)O", "CC(N)C", "N#CC#N", "C=CC=C", "CC=CC"]  # fmt: skip
    rng = np.random.default_rng(0)
    pairs = []
    for i, s in enumerate(smiles):
        cand = make_molecule(s)
        xtb = 2.0 + 0.1 * i
        pairs.append(Observation(cand.key, suite.featurize(cand), {names[0]: 5.0 + 0.05 * i, names[1]: xtb,
                                 names[2]: xtb + 2.0 + rng.normal(0, 0.05)}, payload=cand.payload))  # fmt: skip
    assert scheduler.surrogate.add(pairs) == len(pairs)

    def verdicts(cand, eht, xtb, dft):
        return [ladder[0].verdict(cand, Status.ok, value=eht), ladder[1].verdict(cand, Status.ok, value=xtb),
                ladder[2].verdict(cand, Status.ok, value=dft)]  # fmt: skip

    agree, off, no_top = make_molecule("CCCCO"), make_molecule("OCCO"), make_molecule("CCCCC")
    by_key = {
        agree.key: verdicts(agree, 5.6, 3.0, 5.02),
        off.key: verdicts(off, 5.6, 3.0, 9.5),  # DFT 4.5 eV off what xTB predicts
        no_top.key: verdicts(no_top, 5.6, 3.0, 5.0)[:2],  # no top-tier value: nothing to disagree with
    }
    estimates = [RewardEstimate(trajectory_id=f"t{i}", mean=0.5, std=0.1) for i in range(3)]
    out = suite.disagreements(scheduler, [agree, off, no_top], by_key, estimates)
    assert out[0].disagreement is None and out[2].disagreement is None
    flag = out[1].disagreement
    assert flag is not None and (flag.kind, flag.lower, flag.upper) == ("outside_interval", names[1], names[2])
    assert flag.upper_value == 9.5 and "std from" in flag.detail
