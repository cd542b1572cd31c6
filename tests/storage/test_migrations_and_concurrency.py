"""Migrations up/down, and several processes writing overlapping verdicts at once."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sqlalchemy import create_engine, inspect, text

from storage.ledger import Ledger, LedgerError


def test_upgrade_from_empty_downgrade_one_step_upgrade_again(db_url: str) -> None:
    ledger = Ledger(db_url, migrate=False)
    assert ledger.current_revision() is None
    ledger.upgrade()
    head = ledger.current_revision()
    tables = set(inspect(create_engine(db_url)).get_table_names())
    assert {"runs", "verdicts", "trajectories", "lab_requests", "spend", "checkpoints"} <= tables
    assert "score" not in {c["name"] for c in inspect(create_engine(db_url)).get_columns("verdicts")}
    ledger.downgrade("-1")
    assert ledger.current_revision() != head
    assert "job_id" not in {c["name"] for c in inspect(create_engine(db_url)).get_columns("verdicts")}
    ledger.downgrade("-1")
    assert "group_ids" not in {c["name"] for c in inspect(create_engine(db_url)).get_columns("training_steps")}
    ledger.downgrade("-1")
    assert "score" in {c["name"] for c in inspect(create_engine(db_url)).get_columns("verdicts")}
    ledger.downgrade("-1")
    assert "policy_version" not in {c["name"] for c in inspect(create_engine(db_url)).get_columns("trajectories")}
    ledger.downgrade("-1")
    assert "value_mean" not in {c["name"] for c in inspect(create_engine(db_url)).get_columns("reward_estimates")}
    ledger.downgrade("-1")
    assert "lab_requests" not in set(inspect(create_engine(db_url)).get_table_names())
    ledger.upgrade()
    assert ledger.current_revision() == head
    ledger.create_run("after-migrations")
    ledger.close()


def test_verdict_rows_written_with_a_score_column_read_back_after_it_is_dropped(db_url: str) -> None:
    """Rows from before revision 0005 keep their value, values and cache key; the score column goes."""
    from storage.records import Status, Tier

    ledger = Ledger(db_url, migrate=False)
    ledger.upgrade("0004")
    with create_engine(db_url).begin() as conn:
        conn.execute(text(
            'INSERT INTO verdicts (candidate_key, verifier, version, params_hash, tier, status, value, "values", score, '
            "uncertainty, feedback, cost_s, wall_s, request_id, created_at) VALUES ('molecules:CO', 'gfn2-xtb', '1', "
            "'abcd', 'simulation', 'ok', 3.5, '{\"gap_ev\": 3.5}', 1.0, NULL, '', 0.25, 0.5, NULL, "
            "'2026-11-30 12:00:00')"
        ))
    ledger.upgrade()
    assert "score" not in {c["name"] for c in inspect(create_engine(db_url)).get_columns("verdicts")}
    (old,) = ledger.lookup_verdicts(["molecules:CO"], "gfn2-xtb", "1", "abcd").values()
    assert (old.status, old.tier, old.value, old.values, old.cost_s) == (Status.ok, Tier.simulation, 3.5, {"gap_ev": 3.5}, 0.25)
    assert "score" not in old.model_dump()
    ledger.close()


def test_trajectories_keep_the_sampling_policy_version_tokens_and_logprobs(db_url: str) -> None:
    from storage.records import Prompt, Trajectory

    ledger = Ledger(db_url)
    run = ledger.create_run("async")
    ledger.add_prompts([Prompt(id="p", suite="molecules", text="gap")])
    recorded = Trajectory(run_id=run.id, prompt_id="p", step=3, group_id="g", final_answer="CO", candidate_key="molecules:CO",
                          policy_version=2, completion_ids=[7, 9, 2], behaviour_logprobs=[-0.25, -1.5, -0.125])
    bare = Trajectory(run_id=run.id, prompt_id="p", step=3, group_id="g", final_answer="C", candidate_key="molecules:C")
    ledger.add_trajectories([recorded, bare])
    got = {t.id: t for t, _ in ledger.step_trajectories(run.id, 3)}
    assert got[recorded.id].policy_version == 2
    assert got[recorded.id].completion_ids == [7, 9, 2] and got[recorded.id].behaviour_logprobs == [-0.25, -1.5, -0.125]
    assert (got[bare.id].policy_version, got[bare.id].completion_ids, got[bare.id].behaviour_logprobs) == (None, None, None)
    with pytest.raises(ValueError, match="same length"):
        Trajectory(prompt_id="p", step=0, group_id="g", final_answer="C", candidate_key="k", completion_ids=[1],
                   behaviour_logprobs=[-1.0, -2.0])
    ledger.close()



def test_reward_rows_from_before_the_posterior_columns_read_back_from_their_components(db_url: str) -> None:
    """Revision 0002 kept the posterior and the invalid flag as JSON components; after 0003 they read back typed."""
    import json

    from storage.records import Prompt, Trajectory

    ledger = Ledger(db_url)
    run = ledger.create_run("old")
    ledger.add_prompts([Prompt(id="p", suite="molecules", text="gap")])
    trajs = [Trajectory(run_id=run.id, prompt_id="p", step=0, group_id="g", final_answer=s, candidate_key=f"molecules:{s}")
             for s in ("C", "CC")]
    ledger.add_trajectories(trajs)
    ledger.downgrade("0002")
    engine = create_engine(db_url)
    with engine.begin() as conn:
        assert "value_mean" not in {c["name"] for c in inspect(conn).get_columns("reward_estimates")}
        for traj, comps in zip(trajs, ({"value_mean": 3.3, "value_std": 0.4, "p_hit": 0.6}, {"invalid": 1.0}), strict=True):
            conn.execute(
                text("INSERT INTO reward_estimates (trajectory_id, run_id, step, mean, std, fidelity, verdict_ids, components) "
                     "VALUES (:t, :r, 0, 0.5, 0.1, NULL, :v, :c)"),
                {"t": traj.id, "r": run.id, "v": "[]", "c": json.dumps(comps)},
            )
    engine.dispose()
    ledger.upgrade()
    got = {t.id: e for t, e in ledger.step_trajectories(run.id, 0)}
    assert (got[trajs[0].id].value_mean, got[trajs[0].id].value_std, got[trajs[0].id].invalid) == (3.3, 0.4, False)
    assert got[trajs[0].id].components == {"p_hit": 0.6}
    assert got[trajs[1].id].invalid and got[trajs[1].id].value_mean is None and got[trajs[1].id].components == {}
    ledger.close()

def test_step_group_ids_are_a_column_and_old_steps_with_them_in_the_metrics_read_back(db_url: str) -> None:
    """Before revision 0006 a step's learned group ids sat in its metrics blob; the upgrade moves them to the column."""
    import json

    from storage.records import TrainingStepRecord

    ledger = Ledger(db_url)
    run = ledger.create_run("async")
    ledger.record_step(TrainingStepRecord(run_id=run.id, step=0, metrics={"reward/mean": 0.5}, group_ids=["g0", "g1"]))
    (new,) = ledger.training_steps(run.id)
    assert new.group_ids == ["g0", "g1"] and new.metrics == {"reward/mean": 0.5}
    ledger.downgrade("0005")
    engine = create_engine(db_url)
    with engine.begin() as conn:
        blob = conn.execute(text("SELECT metrics FROM training_steps")).scalar_one()  # PostgreSQL decodes JSON, SQLite not
        assert (blob if isinstance(blob, dict) else json.loads(blob))["pipeline/groups"] == ["g0", "g1"]
        conn.execute(text("INSERT INTO training_steps (run_id, step, metrics, created_at) VALUES (:r, 1, :m, :t)"),
                     {"r": run.id, "m": json.dumps({"reward/mean": 0.25, "pipeline/groups": ["g2"]}), "t": "2026-01-01 00:00:00"})
        conn.execute(text("INSERT INTO training_steps (run_id, step, metrics, created_at) VALUES (:r, 2, :m, :t)"),
                     {"r": run.id, "m": json.dumps({"reward/mean": 0.0}), "t": "2026-01-01 00:00:00"})
    engine.dispose()
    ledger.upgrade()
    steps = ledger.training_steps(run.id)
    assert [(s.step, s.group_ids) for s in steps] == [(0, ["g0", "g1"]), (1, ["g2"]), (2, [])]
    assert all("pipeline/groups" not in s.metrics for s in steps) and steps[1].metrics == {"reward/mean": 0.25}
    ledger.close()


def test_a_database_of_someone_else_is_refused_and_left_unchanged(db_url: str) -> None:
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE inventory (sku INTEGER PRIMARY KEY)"))
    with pytest.raises(LedgerError, match=r"not an ARL ledger: it holds other tables \(inventory\) and no alembic_version"):
        Ledger(db_url)
    assert inspect(engine).get_table_names() == ["inventory"]
    engine.dispose()


def test_a_ledger_migrated_by_another_process_while_this_one_looked_is_not_foreign(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from storage.ledger._migrations import _Migrations

    Ledger(db_url).close()  # another process's first migration, committed ...
    real, reads = _Migrations.current_revision, []

    def first_read_before_the_commit(self: _Migrations) -> str | None:
        reads.append(1)  # ... just after this process read "no migration record yet"
        return None if len(reads) == 1 else real(self)

    monkeypatch.setattr(_Migrations, "current_revision", first_read_before_the_commit)
    ledger = Ledger(db_url)  # was: "not an ARL ledger: it holds other tables (alembic_version, ...)"
    assert ledger.current_revision() is not None
    ledger.close()


def test_a_ledger_downgraded_to_base_opens_and_upgrades_again(db_url: str) -> None:
    ledger = Ledger(db_url)
    ledger.downgrade("base")  # alembic leaves an empty alembic_version table
    ledger.close()
    again = Ledger(db_url)  # was: "not an ARL ledger: it holds other tables (alembic_version) ..."
    assert again.current_revision() is not None
    again.close()


def test_bad_urls_are_clear_errors(tmp_path) -> None:
    with pytest.raises(LedgerError, match="bad database URL"):
        Ledger("not a url")
    with pytest.raises(LedgerError, match="unsupported database"):
        Ledger("mysql://x@localhost/db")
    with pytest.raises(LedgerError, match="cannot connect"):
        Ledger("postgresql+psycopg://postgres@127.0.0.1:1/nothing")


WRITER = """
import sys
from storage.ledger import Ledger
from storage.records import Tier, Verdict

url, worker, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ledger = Ledger(url)
for batch in range(0, n, 50):
    # Overlapping keys: every worker writes the same key range, in its own order.
    keys = [f"molecules:M{(i + worker * 17) % n}" for i in range(batch, batch + 50)]
    ledger.put_verdicts([
        Verdict(candidate_key=k, verifier="gfn2-xtb", version="1", params_hash="p", tier=Tier.simulation,
                status="ok", value=float(worker), cost_s=0.01)
        for k in keys
    ])
    ledger.lookup_verdicts(keys, "gfn2-xtb", "1", "p")
ledger.close()
print("done", worker)
"""


@pytest.mark.parametrize("workers", [4])
@pytest.mark.slow  # 24 s on 2 loaded cores, about 12 s idle
def test_concurrent_writers_lose_nothing_duplicate_nothing(db_url: str, workers: int) -> None:
    n = 600
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, db_url, str(w), str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for w in range(workers)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-2000:]
        assert "database is locked" not in err
    ledger = Ledger(db_url)
    values = ledger.ok_values("gfn2-xtb")
    assert len(values) == n  # no lost rows, and the unique key prevents duplicates
    assert len(ledger.verdicts_for(f"molecules:M{i}" for i in range(n))) == n
    ledger.close()
