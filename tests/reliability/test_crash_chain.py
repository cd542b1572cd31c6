"""Crash safety, chained: one ``arl run`` (real subprocesses, ``benchmarks.crash``) signalled at every stage
boundary of a step and at a random moment, resumed after each, loses and re-buys no verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import crash


@pytest.mark.slow(seconds=240)
@pytest.mark.timeout(1800)  # a chain of 6+ runs and resumes: past 600 s at a load of 10
def test_signals_at_every_stage_boundary_and_random_moments_then_resume(tmp_path: Path) -> None:
    """One run killed at each stage of a step (SIGTERM and Ctrl-C among them) and at a random moment, resumed each time."""
    # Three steps, so a stage kill that lands a moment late (a replayed step takes milliseconds) still leaves
    # work for the kills after it: with two, a late one can let the run complete before the last stage kill.
    # One random moment, not two: each kill is one more `arl run` process (about 30 CPU-s); the soak tests in
    # test_crash.py draw twenty.
    kills = crash.stage_kills(random_kills=1, steps=3, seed=3)
    report = crash.run_chain(kills, workdir=tmp_path, steps=3, seed=3)
    assert report["problems"] == []
    assert report["verdicts_lost"] == 0 and report["duplicate_top_calls"] == 0
    assert sum(k["killed"] for k in report["kills"]) >= len(crash.STAGE_KILLS)
    assert len(report["stages_hit"]) >= 4, report["stages_hit"]
