"""The ledger contract, run against SQLite and PostgreSQL alike."""

from __future__ import annotations

import json
import re

import pytest

from storage.ledger import Ledger, LedgerError
from storage.records import (
    CheckpointRecord,
    LabRequest,
    Prompt,
    RewardEstimate,
    RunStatus,
    SpendRecord,
    Status,
    Tier,
    TrainingStepRecord,
    Trajectory,
    Turn,
    Verdict,
    VerifierSpec,
)


def _verdict(key: str, status: str = "ok", value: float | None = 1.0, verifier: str = "rdkit-eht", **kw) -> Verdict:
    return Verdict(
        candidate_key=key, verifier=verifier, version="1", params_hash="p0", tier=kw.pop("tier", Tier.fast),
        status=status, value=value if status == "ok" else None, **kw,
    )


def _run_with_step(ledger: Ledger, step: int = 0, n_groups: int = 2, group_size: int = 3):
    run = ledger.create_run("test", {"steps": 3})
    prompts = [Prompt(id=f"p{i}", suite="molecules", text=f"gap {i}", goal={"low": 3.0, "high": 4.0}) for i in range(n_groups)]
    ledger.add_prompts(prompts)
    trajs = []
    for g, p in enumerate(prompts):
        for j in range(group_size):
            trajs.append(
                Trajectory(
                    run_id=run.id, prompt_id=p.id, step=step, group_id=f"g{step}-{g}",
                    turns=[Turn(role="user", content=p.text), Turn(role="assistant", content=f"C{'C' * j}")],
                    final_answer=f"C{'C' * j}", candidate_key=f"molecules:C{'C' * j}", completion_tokens=j + 1,
                )
            )
    ledger.add_trajectories(trajs)
    return run, prompts, trajs


def test_the_class_docstring_lists_the_whole_interface() -> None:
    """The docstring of ``Ledger`` is its documented interface: every public name, and no name that is gone."""
    public = {name for name in dir(Ledger) if not name.startswith("_")}
    documented = set(re.findall(r"``([a-z_]+)(?:\(|``)", Ledger.__doc__ or ""))
    called = set(re.findall(r"``([a-z_]+)\(", Ledger.__doc__ or ""))
    assert public - documented == set(), "public but not documented"
    assert called - public == set(), "documented but not a method"


def test_runs_round_trip_newest_first(ledger: Ledger) -> None:
    a = ledger.create_run("first", {"steps": 2, "nested": {"x": [1, 2]}})
    b = ledger.create_run("second", {})
    runs = ledger.list_runs()
    assert [r.id for r in runs][:2] == [b.id, a.id]
    got = ledger.get_run(a.id)
    assert got.config == {"steps": 2, "nested": {"x": [1, 2]}}
    assert got.created_at.tzinfo is not None
    assert ledger.get_run(a.id[:10]).id == a.id  # unique prefix
    ledger.set_run_status(a.id, RunStatus.completed, steps_done=2)
    assert ledger.get_run(a.id).status == RunStatus.completed
    with pytest.raises(LedgerError, match="no run with id"):
        ledger.get_run("does-not-exist")


def test_verdict_cache_is_idempotent_and_batch_lookup(ledger: Ledger) -> None:
    verdicts = [_verdict(f"molecules:C{i}", value=float(i)) for i in range(50)]
    stored = ledger.put_verdicts(verdicts)
    assert all(v.id is not None for v in stored)
    again = ledger.put_verdicts(verdicts[:10] + [_verdict("molecules:C0", value=99.0)])
    assert [v.id for v in again[:10]] == [v.id for v in stored[:10]]
    assert again[-1].value == 0.0  # first verdict wins; no double payment, no overwrite
    hits = ledger.lookup_verdicts([f"molecules:C{i}" for i in range(60)], "rdkit-eht", "1", "p0")
    assert len(hits) == 50 and hits["molecules:C7"].value == 7.0
    assert ledger.lookup_verdicts(["molecules:C1"], "rdkit-eht", "2", "p0") == {}  # another version is another verdict
    # One row per cache key: the second write of C0..C9 stored nothing.
    assert [v.status for v in ledger.verdicts_for(f"molecules:C{i}" for i in range(60))] == [Status.ok] * 50


def test_failed_verdict_keeps_feedback_and_no_value(ledger: Ledger) -> None:
    ledger.put_verdicts([_verdict("molecules:X", status="failed", feedback="SCF did not converge", tier=Tier.high_fidelity)])
    v = ledger.lookup_verdicts(["molecules:X"], "rdkit-eht", "1", "p0")["molecules:X"]
    assert v.status == Status.failed and v.value is None
    assert v.feedback == "SCF did not converge"


def test_verdict_keeps_the_job_that_computed_it(ledger: Ledger) -> None:
    ledger.put_verdicts([_verdict("molecules:CC", tier=Tier.high_fidelity, job_id="4711"), _verdict("molecules:CCC")])
    found = ledger.lookup_verdicts(["molecules:CC", "molecules:CCC"], "rdkit-eht", "1", "p0")
    assert found["molecules:CC"].job_id == "4711"
    assert found["molecules:CCC"].job_id is None  # computed in the run's own process
    (again,) = ledger.put_verdicts([_verdict("molecules:CC", job_id="4712")])
    assert again.job_id == "4711"  # a second computation of a stored verdict changes nothing, its job included


def test_pending_lab_verdict_is_updated_in_place(ledger: Ledger) -> None:
    pending = _verdict("molecules:N", status="pending", verifier="lab", tier=Tier.lab, request_id="r1")
    [stored] = ledger.put_verdicts([pending])
    ledger.create_lab_requests(
        [LabRequest(id="r1", candidate_key="molecules:N", payload="N", verifier="lab", version="1", params_hash="p0")]
    )
    assert [r.id for r in ledger.lab_requests(Status.pending)] == ["r1"]
    done = ledger.submit_lab_result("r1", 9.25, notes="measured")
    assert done.id == stored.id and done.status == Status.ok and done.value == 9.25
    assert ledger.lab_requests(Status.pending) == []
    with pytest.raises(LedgerError, match="already has a result"):
        ledger.submit_lab_result("r1", 1.0)
    with pytest.raises(LedgerError, match="no lab request"):
        ledger.submit_lab_result("nope", 1.0)
    with pytest.raises(LedgerError, match="must be a number"):
        ledger.submit_lab_result("r1", "abc")  # type: ignore[arg-type]
    # A final verdict arriving through put_verdicts also replaces a pending one.
    ledger.put_verdicts([_verdict("molecules:O", status="pending", verifier="lab", tier=Tier.lab)])
    [final] = ledger.put_verdicts([_verdict("molecules:O", value=7.5, verifier="lab", tier=Tier.lab)])
    assert final.status == Status.ok and final.value == 7.5
    assert ledger.integrity_problems() == []


def test_step_queries_verdicts_and_rewards(ledger: Ledger) -> None:
    run, _prompts, trajs = _run_with_step(ledger)
    [v_ok] = ledger.put_verdicts([_verdict(trajs[0].candidate_key, value=3.5)])
    ledger.put_verdicts([_verdict(trajs[1].candidate_key, status="invalid", feedback="valence error on atom 3")])
    ledger.add_reward_estimates(
        [
            RewardEstimate(trajectory_id=t.id, run_id=run.id, step=0, mean=0.9 if i == 0 else 0.1, std=0.05,
                           fidelity=Tier.fast, verdict_ids=[v_ok.id])
            for i, t in enumerate(trajs)
        ]
    )
    rows = ledger.step_trajectories(run.id, 0)
    assert len(rows) == 6 and all(est is not None for _, est in rows)
    assert rows[0][0].turns[1].trainable
    assert [t.group_id for t, _ in rows] == ["g0-0"] * 3 + ["g0-1"] * 3  # insertion order
    assert [e.mean for _, e in rows] == [0.9] + [0.1] * 5
    # What hindsight reads about a failed candidate: its verdicts, feedback included.
    feedback = {v.candidate_key: v.feedback for v in ledger.verdicts_for([t.candidate_key for t in trajs])}
    assert feedback == {trajs[0].candidate_key: "", trajs[1].candidate_key: "valence error on atom 3"}
    assert ledger.verdicts_for([trajs[1].candidate_key], verifiers=["another"]) == []
    top = ledger.top_candidates(run.id, n=2)
    assert top[0]["candidate_key"] == trajs[0].candidate_key and top[0]["values"]["rdkit-eht"] == 3.5
    # Re-estimating a trajectory replaces its estimate (a lab result arrived).
    ledger.add_reward_estimates([RewardEstimate(trajectory_id=trajs[1].id, run_id=run.id, step=0, mean=0.7, std=0.0)])
    assert dict((t.id, e.mean) for t, e in ledger.step_trajectories(run.id, 0))[trajs[1].id] == 0.7



def test_reward_posterior_and_invalid_flag_are_typed_fields_that_round_trip(ledger: Ledger) -> None:
    run, _p, trajs = _run_with_step(ledger)
    ledger.add_reward_estimates(
        [
            RewardEstimate(trajectory_id=trajs[0].id, run_id=run.id, mean=0.8, std=0.1, value_mean=3.4, value_std=0.25,
                           components={"p_hit": 0.9}),
            RewardEstimate(trajectory_id=trajs[1].id, run_id=run.id, mean=0.0, std=0.0, invalid=True),
        ]
    )
    got = {t.id: e for t, e in ledger.step_trajectories(run.id, 0) if e is not None}
    assert (got[trajs[0].id].value_mean, got[trajs[0].id].value_std, got[trajs[0].id].invalid) == (3.4, 0.25, False)
    assert got[trajs[0].id].components == {"p_hit": 0.9}
    assert (got[trajs[1].id].value_mean, got[trajs[1].id].value_std, got[trajs[1].id].invalid) == (None, None, True)
    # A re-estimate replaces the posterior too, not only the reward.
    ledger.add_reward_estimates([RewardEstimate(trajectory_id=trajs[0].id, run_id=run.id, mean=0.9, std=0.0, value_mean=3.5, value_std=0.0)])
    again = {t.id: e for t, e in ledger.step_trajectories(run.id, 0) if e is not None}[trajs[0].id]
    assert (again.mean, again.value_mean, again.value_std) == (0.9, 3.5, 0.0)

def test_record_tiers_replaces_the_spec_of_the_same_name(ledger: Ledger) -> None:
    import sqlalchemy as sa

    ledger.record_tiers([])  # nothing to record is not an error
    ledger.record_tiers([VerifierSpec(name="rdkit-eht", tier=Tier.fast, version="1", expected_cost=0.01),
                         VerifierSpec(name="lab", tier=Tier.lab, version="1", expected_cost=3600.0)])
    ledger.record_tiers([VerifierSpec(name="rdkit-eht", tier=Tier.simulation, version="2", expected_cost=0.5,
                                      params={"k": 1}, origin="config")])
    engine = sa.create_engine(ledger.url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT name, tier, version, expected_cost, params, origin FROM verifier_tiers ORDER BY name"))
            got = [(r.name, r.tier, r.version, r.expected_cost, r.params if isinstance(r.params, dict) else json.loads(r.params), r.origin)
                   for r in rows]
    finally:
        engine.dispose()
    assert got == [("lab", "lab", "1", 3600.0, {}, "built-in"), ("rdkit-eht", "simulation", "2", 0.5, {"k": 1}, "config")]


def test_spend_steps_checkpoints_and_summary(ledger: Ledger, tmp_path) -> None:
    import hashlib

    run, _p, trajs = _run_with_step(ledger)
    ledger.put_verdicts(
        [],  # a step whose verdicts were all cached still bills what its escalation spent
        spend=[
            SpendRecord(run_id=run.id, step=0, tier=Tier.fast, verifier="rdkit-eht", cost_s=0.5, calls=6),
            SpendRecord(run_id=run.id, step=0, tier=Tier.simulation, verifier="gfn2-xtb", cost_s=2.0, calls=2),
            SpendRecord(run_id=run.id, step=1, tier=Tier.fast, verifier="rdkit-eht", cost_s=0.25, calls=3),
        ],
    )
    assert ledger.spend_by_tier(run.id) == {"fast": 0.75, "simulation": 2.0}
    assert ledger.spend_by_step(run.id)[0] == {"fast": 0.5, "simulation": 2.0}
    ledger.record_step(TrainingStepRecord(run_id=run.id, step=0, metrics={"reward/mean": 0.3}))
    ckpt = tmp_path / "step-0"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"weights")
    checkpoint = CheckpointRecord(run_id=run.id, step=0, path=str(ckpt), sha256=hashlib.sha256(b"weights").hexdigest())
    # Redoing a step replaces its metrics; its checkpoint lands in the same transaction.
    ledger.record_step(TrainingStepRecord(run_id=run.id, step=0, metrics={"reward/mean": 0.4}), checkpoint=checkpoint)
    assert [s.metrics for s in ledger.training_steps(run.id)] == [{"reward/mean": 0.4}]
    assert ledger.get_run(run.id).steps_done == 1
    assert [c.path for c in ledger.checkpoints(run.id)] == [str(ckpt)]
    summary = ledger.run_summary(run.id)
    assert summary["trajectories"] == 6 and summary["steps_done"] == 1 and summary["checkpoints"] == 1
    assert summary["spend_by_tier"]["simulation"] == 2.0
    assert summary["candidates"] == 3 and summary["verdicts_by_status"] == {}
    assert [(m["step"], m["reward_mean"], m["calls_by_tier"]) for m in summary["steps"]] == [(0, 0.4, {"fast": 6, "simulation": 2})]
    assert ledger.integrity_problems() == []
    (ckpt / "model.safetensors").write_bytes(b"half-writ")
    assert any("sha256" in p for p in ledger.integrity_problems())


def test_spend_is_listed_in_ladder_order_and_names_the_verifier_that_ran(ledger: Ledger) -> None:
    run, _p, _t = _run_with_step(ledger)
    # Written top tier first: alphabetical order (fast, high_fidelity, lab, simulation) is not the ladder's either.
    ledger.put_verdicts([], spend=[
        SpendRecord(run_id=run.id, step=0, tier=Tier.lab, verifier="reference-table", cost_s=12.0, calls=1),
        SpendRecord(run_id=run.id, step=0, tier=Tier.simulation, verifier="gfn2-xtb", cost_s=2.0, calls=2),
        SpendRecord(run_id=run.id, step=0, tier=Tier.high_fidelity, verifier="pyscf-b3lyp", cost_s=30.0, calls=1),
        SpendRecord(run_id=run.id, step=0, tier=Tier.fast, verifier="rdkit-eht", cost_s=0.5, calls=6),
    ])
    ladder = ["fast", "simulation", "high_fidelity", "lab"]
    assert list(ledger.spend_by_tier(run.id)) == ladder
    assert list(ledger.spend_by_step(run.id)[0]) == ladder
    assert [(r["tier"], r["verifier"], r["cost_s"], r["calls"]) for r in ledger.spend_by_verifier(run.id)] == [
        ("fast", "rdkit-eht", 0.5, 6), ("simulation", "gfn2-xtb", 2.0, 2), ("high_fidelity", "pyscf-b3lyp", 30.0, 1),
        ("lab", "reference-table", 12.0, 1),
    ]
    ledger.record_step(TrainingStepRecord(run_id=run.id, step=0, metrics={}))
    summary = ledger.run_summary(run.id)
    assert [r["verifier"] for r in summary["spend_by_verifier"]] == ["rdkit-eht", "gfn2-xtb", "pyscf-b3lyp", "reference-table"]
    assert list(summary["steps"][0]["spend_by_tier"]) == ladder and list(summary["steps"][0]["calls_by_tier"]) == ladder


def test_delete_unfinished_step(ledger: Ledger) -> None:
    run, _p, _t = _run_with_step(ledger, step=0)
    ledger.put_verdicts([], spend=[SpendRecord(run_id=run.id, step=0, tier=Tier.fast, verifier="f", cost_s=1.0, calls=1)])
    assert ledger.delete_step_trajectories(run.id, 0) == 6
    assert ledger.step_trajectories(run.id, 0) == []
    assert ledger.spend_by_tier(run.id) == {"fast": 1.0}  # what was paid stays paid (the verdicts are cached)


def test_verdicts_and_their_spend_land_together(ledger: Ledger) -> None:
    run = ledger.create_run("spend")
    spend = [SpendRecord(run_id=run.id, step=0, tier=Tier.simulation, verifier="rdkit-eht", cost_s=0.25, calls=2)]
    ledger.put_verdicts([_verdict("molecules:A"), _verdict("molecules:B")], spend=spend)
    assert ledger.spend_by_tier(run.id) == {"simulation": 0.25}
    assert len(ledger.lookup_verdicts(["molecules:A", "molecules:B"], "rdkit-eht", "1", "p0")) == 2


def test_bulk_write_and_lookup_many(ledger: Ledger) -> None:
    verdicts = [_verdict(f"molecules:K{i}", value=float(i)) for i in range(5000)]
    ledger.put_verdicts(verdicts, return_stored=False)
    hits = ledger.lookup_verdicts([v.candidate_key for v in verdicts], "rdkit-eht", "1", "p0")
    assert len(hits) == 5000 and hits["molecules:K4321"].value == 4321.0
    assert len(ledger.ok_values("rdkit-eht")) == 5000


def test_integrity_check_finds_orphans(ledger: Ledger) -> None:
    run, _p, trajs = _run_with_step(ledger)
    ledger.add_reward_estimates([RewardEstimate(trajectory_id=trajs[0].id, run_id=run.id, mean=0.1, std=0.1, verdict_ids=[12345])])
    ledger.add_reward_estimates([RewardEstimate(trajectory_id=trajs[1].id, run_id=run.id, mean=0.1, std=0.1, fidelity=Tier.fast)])
    problems = ledger.integrity_problems()
    assert any("cite verdicts that are not stored" in p for p in problems)
    assert any("cite no verdicts" in p for p in problems)


def test_one_lab_request_per_pending_verdict(ledger: Ledger) -> None:
    """A second request for the same verdict identity is not stored: answering it would answer the first's verdict."""

    def request(request_id: str, key: str = "molecules:CCO", params_hash: str = "p0") -> LabRequest:
        return LabRequest(id=request_id, candidate_key=key, payload=key.split(":")[1], verifier="lab", version="1",
                          params_hash=params_hash)

    def ask(request_id: str) -> list[str]:  # what `arl verify --tiers lab --ledger URL` does, once per call
        ids = ledger.create_lab_requests([request(request_id)])
        ledger.put_verdicts([_verdict("molecules:CCO", status="pending", verifier="lab", tier=Tier.lab, request_id=request_id)])
        return ids

    assert ask("r1") == ["r1"]
    assert ask("r2") == ["r1"]
    assert [r.id for r in ledger.lab_requests()] == ["r1"]
    # Within one call, and next to requests that differ in identity.
    ids = ledger.create_lab_requests([request("a", "molecules:N"), request("b", "molecules:N"), request("c", "molecules:N", "p1")])
    assert ids == ["a", "a", "c"]
    assert ledger.create_lab_requests([request("r1")]) == ["r1"]  # storing a request again changes nothing
    assert sorted(r.id for r in ledger.lab_requests(Status.pending)) == ["a", "c", "r1"]
    done = ledger.submit_lab_result("r1", 5.0)
    assert done.status == Status.ok and done.value == 5.0 and done.request_id == "r1"
    with pytest.raises(LedgerError, match="no lab request"):
        ledger.submit_lab_result("r2", 5.0)
    assert ledger.integrity_problems() == []


def test_a_read_only_ledger_is_not_called_damaged(tmp_path) -> None:  # noqa: ANN001
    """`arl lab submit` on a read-only ledger was told to restore a backup of a "damaged" file."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    from storage.ledger._errors import _hint

    path = tmp_path / "ro.db"
    sqlite3.connect(path).execute("CREATE TABLE t (x INTEGER)").connection.commit()
    reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        reader.execute("INSERT INTO t VALUES (1)")
    except sqlite3.OperationalError as exc:  # SQLite's own words: "attempt to write a readonly database"
        refused = OperationalError("INSERT", {}, exc)
    reader.close()
    assert "read-only" in _hint(refused) and "damaged" not in _hint(refused)
    assert "damaged" in _hint(OperationalError("SELECT", {}, sqlite3.DatabaseError("database disk image is malformed")))


def test_ok_values_keeps_one_verifier_setting_when_asked(ledger: Ledger) -> None:
    """A ledger shared with runs of another basis set (or an older tier version) holds other numbers under the same
    verifier name: surrogate history asks for the answers of the verifier as configured now."""
    ledger.put_verdicts([
        _verdict("molecules:CCO", value=11.9, verifier="pyscf-b3lyp"),
        Verdict(candidate_key="molecules:CCO", verifier="pyscf-b3lyp", version="1", params_hash="sto-3g",
                tier=Tier.high_fidelity, status="ok", value=9.1),
        Verdict(candidate_key="molecules:CCN", verifier="pyscf-b3lyp", version="0", params_hash="p0",
                tier=Tier.high_fidelity, status="ok", value=8.0),
    ])
    assert ledger.ok_values("pyscf-b3lyp", "1", "p0") == {"molecules:CCO": 11.9}
    assert ledger.ok_values("pyscf-b3lyp", "1", "sto-3g") == {"molecules:CCO": 9.1}
    assert ledger.ok_values("pyscf-b3lyp", version="0") == {"molecules:CCN": 8.0}
    assert set(ledger.ok_values("pyscf-b3lyp")) == {"molecules:CCO", "molecules:CCN"}
