"""Bad input at the newer entry points: each once gave an internal error, a wrong exit code, lost data or a wrong result.

Each case now ends in one line naming the fix, or in the right result: a
lone surrogate in one rerank candidate, ``completion_ids`` of the wrong
length, an infinite window softness, ledger rows that do not read back
(``arl db check`` names them, ``arl report`` leaves them out), and a one-tier
``arl rerank`` whose error keeps its reason.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest

from storage.ledger import Ledger, LedgerError
from tests.helpers.cli_runner import arl, assert_no_traceback, assert_user_error

TWO_TIERS = ["--tiers", "rdkit-eht,reference-table", "--tier-param", "reference-table.cost_per_call=2"]


def _input(tmp_path: Path, candidates: list[str]) -> Path:
    path = tmp_path / "in.jsonl"
    # json.dumps writes a lone surrogate as its \ud800 escape, which json.loads reads back as the lone code point.
    path.write_text(json.dumps({"window": [3.0, 4.0], "candidates": candidates}) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def rerun_ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(ledger URL, run id) of one real rerank run, with a lone surrogate among its candidates."""
    tmp = tmp_path_factory.mktemp("rerank")
    url = f"sqlite:///{tmp / 'ledger.db'}"
    code, out, err = arl(["rerank", "--input", str(_input(tmp, ["CCO", "c1ccccc1", "C\ud800C"])), "--n", "3", "--k", "3",
                          "--json", "--ledger", url, *TWO_TIERS])
    assert code == 0, err
    [result] = json.loads(out)
    return url, result["run_id"]


# ---------------------------------------------------------------- rerank


def test_one_candidate_with_a_lone_surrogate_is_ranked_invalid_and_the_rest_are_ranked(rerun_ledger: tuple[str, str]) -> None:
    url, run_id = rerun_ledger
    with Ledger(url) as ledger:
        top = ledger.top_candidates(run_id, n=10)
    answers = {t["answer"] for t in top}
    assert {"CCO", "c1ccccc1", "C\ufffdC"} <= answers  # the surrogate is stored as U+FFFD, the others as given
    odd = next(t for t in top if t["answer"] == "C\ufffdC")
    assert odd["values"] and set(odd["values"].values()) == {"invalid"}


def test_rerank_with_one_tier_says_why_in_its_one_line(tmp_path: Path) -> None:
    code, out, err = arl(["rerank", "--input", str(_input(tmp_path, ["CCO"])), "--tiers", "rdkit-eht",
                          "--ledger", f"sqlite:///{tmp_path / 'l.db'}"])
    assert_user_error(code, err, out=out)
    assert "at least two verifiers" in err and "validation error for" not in err


# ---------------------------------------------------------------- TieredReward and objectives


def test_completion_ids_of_the_wrong_length_name_the_fix(tmp_path: Path) -> None:
    from arl_flows.integrations import TieredReward

    with TieredReward("molecules", objective=(3.0, 4.0), budget_per_call=10.0, ledger_url=f"sqlite:///{tmp_path / 'l.db'}",
                      tiers=["rdkit-eht", ("reference-table", {"cost_per_call": 1.0})]) as reward:
        with pytest.raises(ValueError, match="got 1 completion_ids for 2 completions; pass one list of token ids"):
            reward(["<gap>"] * 2, ["CCO", "CCN"], completion_ids=[[1, 2]])
        assert len(reward(["<gap>"] * 2, ["CCO", "CCN"], completion_ids=[[1, 2], [3]])) == 2


@pytest.mark.parametrize("softness", [math.inf, math.nan])
def test_a_window_softness_that_is_not_finite_is_refused(softness: float) -> None:
    from pydantic import ValidationError

    from arl_flows.integrations import Window
    from verifiers.objectives import Objective, Term
    from verifiers.scheduler.config import SchedulerConfig

    with pytest.raises(ValidationError, match="softness"):
        Term(kind="window", property="value", low=3.0, high=4.0, softness=softness)
    with pytest.raises(ValidationError, match="window_softness"):
        SchedulerConfig(window_softness=softness)
    with pytest.raises(ValueError, match="softness"):  # one line (a plain ValueError), not pydantic's dump
        Window(low=3.0, high=4.0, softness=softness)
    # a finite softness still rewards by distance, so values far outside the window get almost nothing
    soft = Objective(terms=[Term(kind="window", property="value", low=3.0, high=4.0, softness=1e6)])
    assert soft.terms[0].desirability([100.0])[0] < 1.0


def test_a_config_with_an_infinite_softness_is_one_line_naming_the_field(tmp_path: Path) -> None:
    from arl_flows.config import ConfigError, load_config

    config = tmp_path / "run.toml"
    config.write_text('suite = "molecules"\n[objective]\n[[objective.terms]]\nkind = "window"\nproperty = "value"\n'
                      "low = 3.0\nhigh = 4.0\nsoftness = inf\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="softness.*finite") as caught:
        load_config(config)
    assert "\n" not in str(caught.value)


# ---------------------------------------------------------------- ledger rows that do not read back


def _damage(url: str, sql: list[str]) -> None:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        for statement in sql:
            conn.execute(statement)


def _copy(url: str, tmp_path: Path) -> str:
    """A copy of the ledger to damage (SQLite's backup: it includes what is still in the write-ahead log)."""
    target = tmp_path / "damaged.db"
    with sqlite3.connect(url.removeprefix("sqlite:///")) as source, sqlite3.connect(target) as copy:
        source.backup(copy)
    return f"sqlite:///{target}"


def test_db_check_names_verdict_rows_that_do_not_read_back_and_report_leaves_them_out(
    rerun_ledger: tuple[str, str], tmp_path: Path
) -> None:
    url, run_id = rerun_ledger
    damaged = _copy(url, tmp_path)
    code, out, err = arl(["db", "check", "--url", damaged])
    assert code == 0, out + err  # clean before the damage
    with sqlite3.connect(damaged.removeprefix("sqlite:///")) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM verdicts ORDER BY id LIMIT 3")]
    _damage(damaged, [f"UPDATE verdicts SET status = 'bogus' WHERE id = {ids[0]}",
                      f"UPDATE verdicts SET \"values\" = '{{not json' WHERE id = {ids[1]}",
                      f"UPDATE verdicts SET created_at = 'yesterday' WHERE id = {ids[2]}"])
    code, out, err = arl(["db", "check", "--url", damaged, "--json"])
    assert_no_traceback(code, out, err)
    assert code == 1
    problems = json.loads(out)["problems"]
    for row, says in zip(ids, ["status 'bogus' is not one of", "values is not JSON", "created_at is not a timestamp"]):
        assert any(p.startswith(f"verdicts row {row}: {says}") for p in problems), problems

    code, out, err = arl(["report", run_id[:12], "--url", damaged, "--out", str(tmp_path / "report")])
    assert_no_traceback(code, out, err)
    assert code == 0, err
    assert (tmp_path / "report" / "report.md").is_file()
    [warning] = [line for line in err.splitlines() if line.strip()]
    assert warning.startswith("warning: 3 verdict rows") and "`arl db check`" in warning


def test_a_cache_lookup_of_an_unreadable_verdict_is_a_ledger_error(rerun_ledger: tuple[str, str], tmp_path: Path) -> None:
    url, _ = rerun_ledger
    damaged = _copy(url, tmp_path)
    with sqlite3.connect(damaged.removeprefix("sqlite:///")) as conn:
        key, verifier, version, params_hash = conn.execute(
            "SELECT candidate_key, verifier, version, params_hash FROM verdicts ORDER BY id LIMIT 1").fetchone()
    _damage(damaged, [f"UPDATE verdicts SET \"values\" = 'nope' WHERE candidate_key = '{key}' AND verifier = '{verifier}'"])
    with Ledger(damaged) as ledger, pytest.raises(LedgerError, match="arl db check"):
        ledger.lookup_verdicts([key], verifier, version, params_hash)


@pytest.mark.parametrize("sql, says", [
    ("UPDATE runs SET status = 'weird'", "status 'weird' is not one of"),
    ("UPDATE trajectories SET created_at = 'nope'", "created_at is not a timestamp"),
])
def test_a_run_or_trajectory_row_that_does_not_read_back_stops_the_report_in_one_line(
    rerun_ledger: tuple[str, str], tmp_path: Path, sql: str, says: str
) -> None:
    url, run_id = rerun_ledger
    damaged = _copy(url, tmp_path)
    _damage(damaged, [sql])
    code, out, err = arl(["report", run_id[:12], "--url", damaged, "--out", str(tmp_path / "report")])
    assert_user_error(code, err, out=out)
    assert says in err and "`arl db check`" in err
    code, out, err = arl(["db", "check", "--url", damaged])
    assert code == 1 and says in out, out + err


@pytest.mark.parametrize("softness", ["inf", "nan", "-1", "soft"])
def test_a_goal_softness_that_is_not_a_finite_width_is_one_line(softness: str) -> None:
    code, out, err = arl(["verify", "--suite", "molecules", "--goal", "window=[3,4]", "--goal", f"softness={softness}",
                          "--answer", "CCO", "--tiers", "fast"])
    assert_user_error(code, err, out=out)
    assert "softness" in err and "finite" in err


def test_on_every_backend_a_verdict_with_an_unknown_status_is_left_out_counted_and_named(db_url: str) -> None:
    from sqlalchemy import create_engine, text

    from storage.records import Status, Tier, Verdict

    with Ledger(db_url) as ledger:
        stored = ledger.put_verdicts([
            Verdict(candidate_key=f"k{i}", verifier="v", version="1", params_hash="p", tier=Tier.fast, status=Status.ok,
                    value=float(i)) for i in range(3)
        ])
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE verdicts SET status = 'bogus' WHERE id = :id"), {"id": stored[1].id})
    engine.dispose()
    with Ledger(db_url) as ledger:
        got = ledger.verdicts_for(["k0", "k1", "k2"])
        assert [v.candidate_key for v in got] == ["k0", "k2"] and ledger.unreadable_verdicts == 1
        assert ledger.unreadable_rows() == [
            f"verdicts row {stored[1].id}: status 'bogus' is not one of failed, invalid, ok, pending, timeout: "
            "reads leave it out or stop at it; delete the row or restore a backup"
        ]
        assert ledger.unreadable_rows()[0] in ledger.integrity_problems()
