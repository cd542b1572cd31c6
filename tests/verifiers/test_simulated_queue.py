"""The simulated remote queue, on the toy suite's ``toy-cluster``: slots, refusals, resumed jobs, close, identity."""

from __future__ import annotations

import threading
import time

import pytest

from storage.records import Status
from tests.helpers.toy_suite import ToyCluster, make_candidate
from verifiers import Closable, RemoteVerifier


def test_slots_bound_the_calls_in_flight_and_every_call_is_counted() -> None:
    queue = ToyCluster({"latency_s": 0.2, "slots": 2, "cost_per_call": 7.0})
    verdicts = queue.verify_batch([make_candidate(w) for w in ("a", "ab", "abe", "abei", "abeio")])
    assert [v.value for v in verdicts] == [1.0, 1.0, 2.0, 3.0, 4.0]
    assert [v.cost_s for v in verdicts] == [7.0] * 5  # the declared price, not the seconds it waited
    assert verdicts[0].wall_s >= 0.19  # the first call waited its latency (on a slot from the start)
    assert queue.calls == 5 and queue.in_flight == 0
    assert queue.peak_in_flight == 2  # five calls, two slots: never more than two at once
    assert queue.busy_slot_s >= 2 * 0.19


def test_a_call_that_waits_for_a_slot_still_runs_its_whole_latency_after_it() -> None:
    queue = ToyCluster({"latency_s": 0.3, "slots": 1})
    verdicts = queue.verify_batch([make_candidate(w) for w in ("aa", "ee", "ii")])
    assert [v.value for v in verdicts] == [2.0, 2.0, 2.0]
    # One slot: the calls run one after another, and each waits its own latency once it has the slot (lower
    # bounds: load only adds time). Timed from the batch's submission, the later ones would have returned at once.
    assert min(v.wall_s for v in verdicts) >= 0.29
    assert queue.busy_slot_s >= 3 * 0.29


def test_a_refused_candidate_answers_at_once_without_a_slot_or_a_charge() -> None:
    queue = ToyCluster({"latency_s": 3600.0, "slots": 1})
    verdict = queue.answer(make_candidate("No!"))
    assert verdict.status == Status.invalid and "lowercase" in verdict.feedback
    assert verdict.cost_s == 0.0 and queue.calls == 0


def test_a_job_submitted_before_a_restart_waits_only_for_the_rest_of_its_latency() -> None:
    queue = ToyCluster({"latency_s": 600.0})
    verdict = queue.answer(make_candidate("aa"), submitted_at=time.time() - 3600)
    assert verdict.status == Status.ok and verdict.value == 2.0
    assert verdict.wall_s < 600.0  # no fresh latency (a bound far from any timing noise)


def test_close_ends_the_waits_with_failed_verdicts() -> None:
    queue = ToyCluster({"latency_s": 3600.0, "slots": 1})
    out = []
    waiting = threading.Thread(target=lambda: out.append(queue.answer(make_candidate("aa"))))
    waiting.start()
    time.sleep(0.1)
    queue.close()
    waiting.join(10)
    assert not waiting.is_alive()
    (verdict,) = out
    assert verdict.status == Status.failed and "closed" in verdict.feedback and verdict.cost_s == 0.0


def test_the_latency_is_fixed_per_key_and_within_the_jitter() -> None:
    queue = ToyCluster({"latency_s": 10.0, "jitter": 0.5})
    cands = [make_candidate(w) for w in ("a", "b", "c", "ab", "ba", "abc")]
    lat = [queue.latency(c) for c in cands]
    assert lat == [ToyCluster({"latency_s": 10.0, "jitter": 0.5}).latency(c) for c in cands]
    assert all(5.0 <= x <= 15.0 for x in lat) and len(set(lat)) == len(lat)
    assert ToyCluster({"latency_s": 10.0}).latency(cands[0]) == 10.0


def test_how_long_the_queue_takes_is_not_part_of_the_cache_identity() -> None:
    base = ToyCluster()
    assert ToyCluster({"latency_s": 0.1, "slots": 64, "jitter": 0.3}).params_hash == base.params_hash
    assert ToyCluster({"cost_per_call": 3.0}).params_hash != base.params_hash


def test_a_queue_answers_remotely_and_closes() -> None:
    queue = ToyCluster()
    assert isinstance(queue, RemoteVerifier) and isinstance(queue, Closable)


@pytest.mark.parametrize("params", [{"slots": 0}, {"latency_s": -1.0}, {"jitter": 1.0}])
def test_bad_queue_params_are_refused(params: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(params))):
        ToyCluster(params)
