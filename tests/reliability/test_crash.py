"""Crash safety: a run killed at any moment resumes without losing or re-buying a verdict.

The chained runs have files of their own, so that xdist runs them beside this one:
``test_crash_chain.py`` signals one run at every stage boundary of a step (SIGKILL,
SIGTERM, SIGINT) and at random moments and resumes it after each;
``test_crash_async.py`` kills an asynchronous run with top-tier calls in flight.
Here, the soak variant of the latter at every kill point inside the pipeline, and
the soak tests that run
20 independent random SIGKILL trials and 6 SIGTERM/SIGINT ones. The
default-suite tests check the harness's own bookkeeping on hand-made inputs
and, in process, the narrowest window of a step: a crash after the
checkpoint is on disk but before the step is recorded.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import signal
import subprocess
import sys

import pytest

from benchmarks import crash

TOP = crash.TOP_TIER


# ---------------------------------------------------------------------- the harness's bookkeeping
def test_the_tiny_prior_is_checked_once_per_cache_and_copied_after(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARL_CACHE_DIR", str(tmp_path / "cache"))
    checks, check = [], crash._check_prior
    monkeypatch.setattr(crash, "_check_prior", lambda home, kept: (checks.append(home), check(home, kept)))
    # Two harnesses at once on an empty cache (the test workers start theirs together): one checks it in a
    # subprocess and keeps it, the other waits for it and copies the kept one.
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(crash.ensure_prior, [tmp_path / "one", tmp_path / "three"]))
    assert len(checks) == 1
    (kept,) = (tmp_path / "cache" / "harness_tiny_prior").iterdir()
    (name,) = [p.name for p in (tmp_path / "one" / "priors").iterdir()]
    assert [p.name for p in kept.iterdir()] == [name]
    (kept / name / "marker").write_text("from the cache")
    crash.ensure_prior(tmp_path / "two")  # no subprocess: the kept copy
    assert len(checks) == 1 and (tmp_path / "two" / "priors" / name / "marker").read_text() == "from the cache"
    assert [p.name for p in (tmp_path / "three" / "priors").iterdir()] == [name]
    assert sorted(p.name for p in (tmp_path / "two" / "priors" / name).iterdir()) == sorted(
        [*(p.name for p in (tmp_path / "one" / "priors" / name).iterdir()), "marker"]
    )


def test_lost_verdicts_sees_missing_and_changed_rows_but_lets_pending_become_final() -> None:
    k = ("molecules:C", TOP, "1", "h")
    before = {
        k: ("ok", 5.0),
        ("molecules:CC", TOP, "1", "h"): ("failed", None),
        ("molecules:CO", "lab", "1", "h"): ("pending", None),
        ("molecules:N", TOP, "1", "h"): ("ok", 7.0),
    }
    after = {
        k: ("ok", 5.0),
        ("molecules:CO", "lab", "1", "h"): ("ok", 3.2),  # a lab answer arrived: fine
        ("molecules:N", TOP, "1", "h"): ("ok", 7.5),  # overwritten: lost
    }
    lost = crash.lost_verdicts(before, after)
    assert len(lost) == 2
    assert any("molecules:CC: missing" in x for x in lost) and any("molecules:N: was ok 7.0" in x for x in lost)
    assert crash.lost_verdicts(before, before) == []


def test_top_tier_calls_are_classified_as_first_inflight_or_duplicate() -> None:
    trial = crash.Trial(index=0, signal="kill", target="verify", target_step=0, delay_s=0.0)
    killed = [("start", 1, "", "molecules:A"), ("done", 1, "ok", "molecules:A"), ("start", 1, "", "molecules:B")]
    # A was written before the kill; B was in flight.
    after_kill = {("molecules:A", TOP, "1", "h"): ("ok", 4.0)}
    resumed = [("start", 2, "", "molecules:B"), ("start", 2, "", "molecules:C")]
    crash._count_top_calls(trial, killed, resumed, after_kill)
    assert (trial.top_calls, trial.inflight_redone, trial.duplicate_top_calls) == (4, 1, 0)

    trial = crash.Trial(index=1, signal="kill", target="verify", target_step=0, delay_s=0.0)
    resumed_again = resumed + [("start", 2, "", "molecules:A"), ("start", 2, "", "molecules:C")]
    crash._count_top_calls(trial, killed, resumed_again, after_kill)
    assert trial.duplicate_top_calls == 2  # A was already stored; C twice in one process


def test_count_log_lines_survive_as_whole_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.counting_tier import COUNT_LOG_ENV, CountingReferenceTable, read_count_log

    from arl_flows.suites.molecules.chemistry import make_candidate

    log = tmp_path / "calls.log"
    monkeypatch.setenv(COUNT_LOG_ENV, str(log))
    verifier = CountingReferenceTable({"cost_per_call": 5.0})
    verdicts = verifier.verify_batch([make_candidate("CCO"), make_candidate("not a smiles")])
    assert [v.status.value for v in verdicts] == ["ok", "invalid"]
    events = [(e, s) for e, _, s, _ in read_count_log(log)]
    assert events == [("start", ""), ("done", "ok"), ("start", ""), ("done", "invalid")]


# ---------------------------------------------------------------------- the checkpoint window, in process
QUICK_PRIOR = crash.TINY_PRIOR | {"max_steps": 40, "eval_samples": 10}


@pytest.mark.slow  # 15 s on 2 loaded cores, about 7 s idle
def test_crash_between_checkpoint_and_step_record_resumes_from_the_last_done_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint of step 1 is on disk but the step is not recorded: resume must redo step 1 from step 0's weights."""
    import torch

    from arl_flows.config import load_config
    from arl_flows.step import run_step
    from arl_flows.training import RunSession
    from policies import Policy, PolicyConfig
    from storage.ledger import Ledger

    monkeypatch.setenv("ARL_HOME", str(tmp_path / "home"))
    config_path = crash.write_config(tmp_path / "run.toml", name="window", steps=3, seed=0, seconds_per_call=0.0)
    config = load_config(config_path, overrides={"prior": QUICK_PRIOR})
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    session = RunSession.open(config, Ledger(url))
    run_step(session, 0)

    class Killed(BaseException):
        pass

    def killed(*_args: object, **_kwargs: object) -> None:
        raise Killed  # the process dies before the step's transaction commits

    monkeypatch.setattr(session.ledger, "record_step", killed)
    with pytest.raises(Killed):
        run_step(session, 1)
    assert (run_dir := Path(tmp_path / "home" / "runs" / session.run.id / "step-00001")).exists()

    ledger = Ledger(url)
    assert ledger.integrity_problems() == []
    assert ledger.get_run(session.run.id).steps_done == 1
    resumed = RunSession.open(config, ledger, resume=session.run.id)
    (step0,) = [c for c in ledger.checkpoints(session.run.id) if c.step == 0]
    expected = Policy.load(step0.path, PolicyConfig()).model.state_dict()
    got = resumed.policy.model.state_dict()
    assert all(torch.equal(got[k], expected[k]) for k in expected), "resume did not start from step 0's checkpoint"
    for step in range(resumed.start_step, 3):
        run_step(resumed, step)
    resumed.finish()
    assert ledger.integrity_problems() == []
    assert [c.step for c in ledger.checkpoints(session.run.id)] == [0, 1, 2]
    assert run_dir.exists()


# ---------------------------------------------------------------------- real processes, real signals
def _check(trials: list, n: int) -> dict:
    totals = crash.summarize(trials)
    failures = {t.index: t.problems for t in trials if t.problems}
    assert not failures, f"failed trials: {failures}"
    assert totals["trials"] == n
    assert totals["verdicts_lost"] == 0
    assert totals["duplicate_top_calls"] == 0
    return totals


def test_a_harness_started_in_the_background_still_gives_its_runs_ctrl_c() -> None:
    """A shell's `cmd &` starts the harness with SIGINT ignored, and its children inherit that.

    Each run must still get Python's Ctrl-C handler, as a terminal's foreground job does: otherwise a Ctrl-C the
    chain sends is silently ignored and the run completes (what made the stage-kill chain fail in CI).
    """
    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    as_background = {"preexec_fn": lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)}
    bare = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, **as_background)
    assert bare.stdout.strip() == "False"  # the control: an inherited SIG_IGN stays ignored
    command = crash.arl_command()
    command[2] = command[2].split("from arl_flows")[0] + probe
    fixed = subprocess.run(command, capture_output=True, text=True, check=True, **as_background)
    assert fixed.stdout.strip() == "True"


def test_chain_counts_a_stored_verdict_computed_again_as_a_duplicate() -> None:
    segments = [
        [("start", 1, "", "molecules:A"), ("done", 1, "ok", "molecules:A"), ("start", 1, "", "molecules:B")],
        [("start", 2, "", "molecules:B"), ("start", 2, "", "molecules:A")],  # B was in flight; A was stored
        [("start", 3, "", "molecules:C"), ("start", 3, "", "molecules:C")],  # twice in one process
    ]
    stored_before = [set(), {"molecules:A"}, {"molecules:A", "molecules:B"}]
    assert crash._chain_top_calls(segments, stored_before) == (2, 1)
    assert crash._chain_top_calls(segments[:2], [set(), set()]) == (0, 2)
    # The async pipeline records each call before sending it: work redone must be a call recorded in flight.
    assert crash._chain_top_calls(segments[:2], [set(), set()], [set(), {"molecules:B"}]) == (1, 1)


@pytest.mark.soak
def test_async_signals_at_every_kill_point_inside_the_pipeline_then_resume(tmp_path: Path) -> None:
    """Sampler ahead, calls in flight, between GRPO and checkpoint, before a checkpoint, the final drain; SIGTERM and Ctrl-C too."""
    report = crash.run_chain(crash.async_kills(), workdir=tmp_path, steps=2, seed=0, pipeline="async")
    assert report["problems"] == []
    assert report["verdicts_lost"] == 0 and report["duplicate_top_calls"] == 0
    assert sum(k["killed"] for k in report["kills"]) >= len(crash.ASYNC_KILLS) - 2, report["kills"]
    for k in report["kills"]:
        if k["killed"] and k["sig"] != "kill" and k["status_after_kill"] != "completed":
            assert (k["exit_code"], k["status_after_kill"]) == (130, "interrupted")


@pytest.mark.soak
def test_sigkill_at_random_moments_then_resume(tmp_path: Path) -> None:
    trials = crash.run_trials(20, ["kill"], seed=1, workdir=tmp_path)
    totals = _check(trials, 20)
    # A kill aimed late in the last step may find the run already completed (publishing its report).
    assert totals["kills"] - totals["kills_after_completion"] >= 15
    assert len(totals["stages_hit"]) >= 3, totals["stages_hit"]


@pytest.mark.soak
def test_sigterm_and_ctrl_c_stop_cleanly_then_resume(tmp_path: Path) -> None:
    trials = crash.run_trials(6, ["term", "int"], seed=2, workdir=tmp_path)
    _check(trials, 6)
    for t in trials:
        if t.killed and t.status_after_kill != "completed":
            assert (t.exit_code, t.status_after_kill) == (130, "interrupted")
