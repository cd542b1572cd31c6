"""The simulated cluster tier: QM9 answers, per-molecule latency, bounded slots, resumed jobs."""

from __future__ import annotations

import time

import pytest

from arl_flows.suites.molecules import SimulatedClusterVerifier, make_candidate
from storage.records import Status, Tier
from verifiers import registry


@pytest.mark.parametrize(
    ("smiles", "status", "value"),
    [
        ("C", Status.ok, 13.7363),  # in the shipped QM9 table
        ("OC", Status.ok, 9.3526),  # methanol, written another way: the table is keyed canonically
        ("CC", Status.failed, None),  # ethane: not in the shipped QM9 subset
        ("C1CC", Status.invalid, None),  # unclosed ring
    ],
)
def test_answers_from_the_reference_table(smiles: str, status: Status, value: float | None) -> None:
    tier = SimulatedClusterVerifier({"latency_s": 0.0})
    (verdict,) = tier.verify_batch([make_candidate(smiles)])
    assert verdict.status == status, verdict.feedback
    assert verdict.tier == Tier.high_fidelity
    if status == Status.ok:
        assert verdict.value == pytest.approx(value)
        assert verdict.cost_s == 15.0  # the declared price, not the seconds it slept
    if status == Status.invalid:
        assert verdict.cost_s == 0.0  # refused at the door: nothing to pay


def test_slots_bound_the_calls_in_flight() -> None:
    tier = SimulatedClusterVerifier({"latency_s": 0.2, "slots": 2})
    verdicts = tier.verify_batch([make_candidate(s) for s in ("C", "N", "O", "C#C", "C#N")])
    assert [v.status for v in verdicts] == [Status.ok] * 5
    assert tier.calls == 5
    assert tier.peak_in_flight == 2  # five calls, two slots: never more than two at once
    assert tier.busy_slot_s > 0


def test_latency_is_fixed_per_molecule_and_within_the_jitter() -> None:
    tier = SimulatedClusterVerifier({"latency_s": 10.0, "jitter": 0.5})
    cands = [make_candidate(s) for s in ("C", "N", "O", "CC", "CO", "CN")]
    lat = [tier.latency(c) for c in cands]
    assert lat == [SimulatedClusterVerifier({"latency_s": 10.0, "jitter": 0.5}).latency(c) for c in cands]
    assert all(5.0 <= x <= 15.0 for x in lat)
    assert len(set(lat)) == len(lat)


def test_a_job_submitted_before_a_restart_is_continued() -> None:
    """A job sent an hour ago on a 10-minute queue is done: answering it waits for nothing more."""
    tier = SimulatedClusterVerifier({"latency_s": 600.0})
    verdict = tier.answer(make_candidate("C"), submitted_at=time.time() - 3600)
    assert verdict.status == Status.ok and verdict.value == pytest.approx(13.7363)
    assert verdict.wall_s < 600.0  # it did not wait a fresh latency (a bound far from any timing noise)


def test_registered_by_name() -> None:
    assert registry.get("simulated-cluster") is SimulatedClusterVerifier
    with pytest.raises(ValueError, match="slots"):
        registry.create("simulated-cluster", {"slots": 0})


def test_the_queue_settings_are_not_part_of_the_cache_identity() -> None:
    """A faster queue or more slots give the same answers: cached verdicts stay valid; another table does not."""
    base = SimulatedClusterVerifier()
    assert SimulatedClusterVerifier({"latency_s": 1.0, "slots": 64, "jitter": 0.3}).params_hash == base.params_hash
    assert SimulatedClusterVerifier({"value_column": "other"}).params_hash != base.params_hash


def test_close_ends_a_wait_without_an_answer() -> None:
    tier = SimulatedClusterVerifier({"latency_s": 3600.0})
    tier.close()
    verdict = tier.answer(make_candidate("C"))
    assert verdict.status == Status.failed and "closed" in verdict.feedback
