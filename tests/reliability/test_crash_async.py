"""Crash safety of the asynchronous pipeline: a run SIGKILLed with top-tier calls in flight resumes them
once and loses nothing (the soak variant, at every kill point, is in ``test_crash.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import crash


@pytest.mark.slow(seconds=150)
@pytest.mark.timeout(1200)  # a run, its kill and its resume: minutes at a load of 10
def test_async_sigkill_with_top_tier_calls_in_flight_then_resume(tmp_path: Path) -> None:
    """The asynchronous pipeline killed while top-tier calls are out: resume continues them, loses and re-buys nothing."""
    report = crash.run_chain(crash.async_kills([("kill", "top-in-flight", 0)]), workdir=tmp_path, steps=2, seed=0,
                             pipeline="async")
    assert report["problems"] == []
    assert [k["killed"] for k in report["kills"]] == [True]
    assert report["verdicts_lost"] == 0 and report["duplicate_top_calls"] == 0
    assert report["inflight_redone"] >= 1  # the call out at the kill was resumed (its request still pending), once
