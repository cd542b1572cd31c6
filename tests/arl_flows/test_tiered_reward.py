"""TieredReward and the verl adapter, with the real ladder, scheduler and ledger (no trainer needed here)."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

import numpy as np
import pytest

from arl_flows.integrations import TieredReward, Window, compute_score, compute_score_batch
from storage.ledger import Ledger

# Fast tier, xTB in its worker process, the QM9 table on top (charged as a DFT call would be).
LADDER = ["rdkit-eht", ("gfn2-xtb", {"threads": 1, "workers": 1}), ("reference-table", {"cost_per_call": 5.0})]
# The fast tier and the table alone: for tests about the call's contract rather than the isolation.
TWO_TIERS = ["rdkit-eht", ("reference-table", {"cost_per_call": 5.0})]
QM9 = ["CCO", "c1ccncc1", "CC(=O)C", "OCC#N"]  # in the shipped table except where the table lacks them


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def test_a_call_writes_a_run_and_a_repeat_is_a_cache_hit(tmp_path: Path) -> None:
    with TieredReward("molecules", objective=(3.0, 8.0), budget_per_call=100.0, ledger_url=_url(tmp_path), tiers=LADDER,
                      policy="all") as reward:
        rewards = reward(["<gap>"] * 5, ["CCO", "c1ccncc1", "not a smiles((", "CCO", "C C O"])
        assert len(rewards) == 5 and all(0.0 <= r <= 1.0 for r in rewards)
        first = reward.last_details
        assert first[2].status == "invalid" and first[2].reward == 0.0 and first[2].reason
        assert first[0].reason is None
        assert first[0].candidate_key == first[3].candidate_key == first[4].candidate_key  # spaces from a SMILES tokenizer
        assert first[0].new >= 2 and first[0].tier in ("simulation", "lab")
        spent = reward.last_call.spend_s
        assert spent > 0 and reward.last_call.cache_hits == 0

        again = reward(["<gap>"], ["CCO"])
        assert again == pytest.approx([rewards[0]], abs=1e-9)
        assert reward.last_details[0].cached >= 2 and reward.last_details[0].new == 0
        assert reward.last_call.spend_s == 0.0 and reward.last_call.cache_hits == 1
        run_id = reward.run_id

    ledger = Ledger(_url(tmp_path))
    summary = ledger.run_summary(run_id)
    assert summary["status"] == "completed" and summary["steps_done"] == 2 and summary["trajectories"] == 6
    assert math.isclose(sum(summary["spend_by_tier"].values()), spent, rel_tol=1e-6)
    assert [s["step"] for s in summary["steps"]] == [0, 1]
    assert summary["steps"][1]["spend_by_tier"] in ({}, {"fast": 0.0})
    # Another reward on the same ledger (a new trainer run) pays nothing for what is known.
    with TieredReward("molecules", objective=(3.0, 8.0), budget_per_call=100.0, ledger_url=_url(tmp_path), tiers=LADDER,
                      policy="all") as other:
        other(["x"], ["c1ccncc1"])
        assert other.last_call.spend_s == 0.0 and other.last_details[0].new == 0


def test_the_budget_caps_the_spend_of_a_call(tmp_path: Path) -> None:
    with TieredReward("molecules", objective=Window(low=3.0, high=8.0), budget_per_call=6.0, ledger_url=_url(tmp_path),
                      tiers=TWO_TIERS, policy="all") as reward:
        reward(["p"] * 4, QM9)
        assert reward.last_call.calls["reference-table"] == 1  # one 5 s top-tier call fits in 6 s, two do not
        assert reward.last_call.spend_s <= 6.0 + 1e-9
        tiers = {d.tier for d in reward.last_details}
        assert tiers == {"lab", "fast"}


def test_a_passed_deadline_starts_no_batch_and_still_answers(tmp_path: Path) -> None:
    with TieredReward("molecules", objective=(3.0, 4.0), budget_per_call=100.0, ledger_url=_url(tmp_path), tiers=TWO_TIERS,
                      max_wait_s=0.0) as reward:
        rewards = reward(["p"] * 2, ["CCO", "c1ccncc1"])
        assert len(rewards) == 2 and all(math.isfinite(r) for r in rewards)
        assert sum(reward.last_call.calls.values()) == 0 and reward.last_call.stopped_by_deadline
        assert {d.status for d in reward.last_details} == {"unverified"}


def test_async_forms_and_trl_logging_hooks(tmp_path: Path) -> None:
    metrics: dict[str, float] = {}
    columns: dict[str, list] = {}
    with TieredReward("molecules", objective=(3.0, 8.0), budget_per_call=100.0, ledger_url=_url(tmp_path), tiers=TWO_TIERS,
                      policy="all") as reward:
        details = asyncio.run(reward.ascore(["p", "p"], ["CCO", "CCN"]))
        assert [d.completion for d in details] == ["CCO", "CCN"]
        async_reward = reward.as_async()
        assert asyncio.iscoroutinefunction(type(async_reward).__call__)
        got = asyncio.run(async_reward(prompts=["p"], completions=[[{"role": "assistant", "content": "CCO"}]],
                                       log_metric=metrics.__setitem__,
                                       log_extra=lambda col, vals: columns.setdefault(col, []).extend(vals)))
        assert got == pytest.approx([details[0].reward], abs=1e-9)
    assert metrics["arl/cache_hits"] == 1.0 and metrics["arl/spend_s"] == 0.0
    assert columns["arl_tier"] == [details[0].tier] and len(columns["arl_std"]) == 1


def test_code_suite_rewards_a_correct_answer_above_a_wrong_one(tmp_path: Path) -> None:
    from arl_flows.suites.code import get_task

    right = f"<think>sum</think><code>{get_task('sum-to-n').reference}</code>"
    wrong = "<think>guess</think><code>print(1)</code>"
    with TieredReward("code", budget_per_call=60.0, ledger_url=_url(tmp_path), policy="all") as reward:
        rewards = reward(["task"] * 2, [right, wrong], task_id=["sum-to-n", "sum-to-n"])
        assert rewards[0] > rewards[1]
        assert reward.last_details[0].tier == "high_fidelity"
        with pytest.raises(ValueError, match="task_id"):
            reward(["task"], [right])


def test_verl_batch_and_single_shapes(tmp_path: Path) -> None:
    """Called as verl's batch reward manager does (keyword arrays of objects) and as its naive one does."""
    options = {"ledger_url": _url(tmp_path), "tiers": TWO_TIERS, "budget_per_call": 100.0, "policy": "all"}
    scores = compute_score_batch(
        data_sources=np.array(["molecules", "molecules", "arl/molecules"], dtype=object),
        solution_strs=np.array(["CCO", "bad((", "CCO"], dtype=object),
        ground_truths=np.array(["3.0,8.0", "3.0,8.0", [3.0, 8.0]], dtype=object),
        extra_infos=np.array([{"index": 0}, {"index": 0}, {"index": 1}], dtype=object),
        **options,
    )
    assert len(scores) == 3 and scores[1]["score"] == 0.0 and scores[1]["invalid"] == 1.0 and scores[0]["invalid"] == 0.0
    # One candidate key in two groups: verified once, in this call (not a cache hit yet).
    assert scores[0]["score"] == pytest.approx(scores[2]["score"], abs=1e-9) and scores[2]["cached"] == 0.0
    assert scores[0]["spend_s"] > 0 and scores[0]["tier_rank"] >= 1
    single = compute_score(data_source="molecules", solution_str="CCO", ground_truth={"low": 3.0, "high": 8.0},
                           extra_info={"index": 2}, **options)
    assert single["score"] == pytest.approx(scores[0]["score"], abs=1e-9) and single["cached"] == 1.0
    with pytest.raises(ValueError, match="not an ARL suite"):
        compute_score(data_source="gsm8k", solution_str="4", ground_truth="4", **options)


@pytest.mark.slow
def test_with_prefect_each_call_is_a_flow_run_with_tier_tasks(prefect_harness: str, tmp_path: Path) -> None:
    from prefect import get_client

    from arl_flows.reward_flows import with_prefect

    reward = with_prefect(TieredReward("molecules", objective=(3.0, 8.0), budget_per_call=100.0, ledger_url=_url(tmp_path),
                                       tiers=TWO_TIERS, policy="all", run_name="prefect-view"))
    try:
        got = reward(["p", "p"], ["CCO", "bad(("])
        assert got[1] == 0.0 and reward.reward.last_call.calls["reference-table"] == 1
    finally:
        reward.close()
    # Prefect 3 records task runs from events, asynchronously: under load a task run can still carry its default
    # name ("run-tier-24c") for a while after the flow returned. Read until the tiers' names are there.
    deadline = time.monotonic() + 120
    with get_client(sync_client=True) as client:
        while True:
            runs = [r for r in client.read_flow_runs() if r.name == "prefect-view call"]
            assert runs and runs[-1].state.is_completed()
            tasks = {t.name.split(" ")[0] for t in client.read_task_runs() if t.flow_run_id == runs[-1].id}
            if {"rdkit-eht", "reference-table"} <= tasks or time.monotonic() > deadline:
                break
            time.sleep(1.0)
    assert {"rdkit-eht", "reference-table"} <= tasks


@pytest.mark.slow  # 63 s on 2 loaded cores, about 31 s idle
def test_the_reward_api_does_not_import_prefect() -> None:
    import subprocess
    import sys

    code = "import sys, arl_flows; arl_flows.TieredReward; print(any(m.split('.')[0] == 'prefect' for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert done.stdout.strip() == "False"


def test_group_size_splits_repeated_prompts_into_trl_groups(tmp_path: Path) -> None:
    with TieredReward("molecules", objective=(3.0, 8.0), ledger_url=_url(tmp_path), tiers=TWO_TIERS, group_size=2) as reward:
        reward(["same"] * 4, ["CCO", "CCN", "CCC", "CCO"])
        rows = reward.ledger.step_trajectories(reward.run_id, 0)
    groups = [t.group_id for t, _ in rows]
    assert len(set(groups)) == 2 and groups[0] == groups[1] != groups[2] == groups[3]
    with pytest.raises(ValueError, match="group_size"):
        TieredReward("molecules", ledger_url=_url(tmp_path), tiers=TWO_TIERS, group_size=0)


def test_the_window_has_no_core_default_and_the_suite_gives_its_own() -> None:
    from arl_flows.integrations import verification_config

    # The core has no molecule window: a Window without its edges is one line saying what to pass.
    for partial in ({}, {"low": 3.0}, {"high": 4.0}):
        with pytest.raises(ValueError, match="Window needs .*the core has no default") as caught:
            Window(**partial)
        assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match=r"a Window or a \(low, high\) pair"):
        verification_config("molecules", objective=(3.0,))  # type: ignore[arg-type]
    # No objective: the suite's window (the molecules suite's 3-4 eV, 0.5 eV softness; the code suite's own).
    molecules = verification_config("molecules").scheduler
    assert (molecules.target_low, molecules.target_high, molecules.window_softness) == (3.0, 4.0, 0.5)
    code = verification_config("code").scheduler
    assert (code.target_low, code.target_high) == (0.5, 1.0)
    # A window without softness takes the suite's; a given softness is kept.
    assert verification_config("molecules", objective=(2.0, 5.0)).scheduler.window_softness == 0.5
    given = verification_config("molecules", objective=Window(low=2.0, high=5.0, softness=0.1)).scheduler
    assert (given.target_low, given.target_high, given.window_softness) == (2.0, 5.0, 0.1)
    assert verification_config("code", objective=Window(low=0.2, high=1.0)).scheduler.window_softness == 0.0


def test_bad_settings_and_shapes_are_one_line_before_anything_is_written(tmp_path: Path) -> None:
    """A probe of the API as a trainer calls it: each of these was accepted and then failed, hung or wrote a stray row."""
    url = _url(tmp_path)
    for bad, match in (
        ({"max_batch": "4"}, "max_batch is the most candidates"), ({"max_batch": -1}, "max_batch"),
        ({"max_wait_s": math.nan}, "max_wait_s"), ({"max_wait_s": -1.0}, "max_wait_s"), ({"max_wait_s": "5"}, "max_wait_s"),
        ({"group_size": 1.5}, "group_size"), ({"budget_per_call": math.inf}, "give max_wait_s"),
        ({"ledger_url": "sqlite://"}, "in memory"), ({"ledger_url": "sqlite:///"}, "in memory"),
        ({"tiers": "rdkit-eht"}, "tiers is a list of rungs"), ({"tiers": ["rdkit-eht", None]}, r"tiers\[1\] is None"),
        ({"tiers": ["rdkit-eht", ("reference-table",)]}, r"tiers\[1\]"), ({"goal": [3, 4]}, "goal is one mapping"),
    ):
        with pytest.raises(ValueError, match=match):
            TieredReward("molecules", objective=(3.0, 8.0), **({"ledger_url": url, "tiers": TWO_TIERS} | bad))
    with TieredReward("molecules", objective=(3.0, 8.0), ledger_url=url, tiers=TWO_TIERS) as reward:
        for prompts, completions, kwargs, error, match in (
            (["a", "b", "c"], "CCO", {}, TypeError, "completions must be a list"),
            ("pq", ["CCO", "CC"], {}, TypeError, "prompts must be a list"),
            (["p"], [None], {}, TypeError, "text or a list of chat messages, got NoneType"),
            (["p"], [b"CCO"], {}, TypeError, "got bytes"),
            (["p"], ["CCO"], {"goal": {"window": [4, 5]}}, ValueError, "one mapping per completion"),
            (["p"], ["CCO"], {"deadline": "x"}, TypeError, "deadline"),
        ):
            with pytest.raises(error, match=match):
                reward.score(prompts, completions, **kwargs)
        assert reward.run_id is None  # nothing reached the ledger
        # OpenAI-style content parts and a message without content are text (the second an empty completion).
        parts = [[{"role": "assistant", "content": [{"type": "text", "text": "CC"}, {"type": "text", "text": "O"}]}]]
        (detail,) = reward.score(["p"], parts)
        assert detail.completion == "CCO"
        (empty,) = reward.score(["p"], [[{"role": "assistant", "content": None}]])
        assert empty.completion == "" and empty.status == "invalid"
    with pytest.raises(RuntimeError, match="closed"):
        reward(["p"], ["CCN"])
    with pytest.raises(RuntimeError, match="closed"):
        with reward:
            pass
    with Ledger(url) as ledger:
        (run,) = ledger.list_runs()
        assert run.status.value == "completed" and run.steps_done <= 2


def test_a_huge_completion_is_invalid_at_once_and_never_parsed(tmp_path: Path) -> None:
    """60,000 characters took 10 s and 200,000 over 45 s: the scheduler's features parsed what the key had refused."""
    from arl_flows.suites.molecules.features import molecule_features
    from arl_flows.suites.molecules.graph import mol_graph
    from arl_flows.suites.molecules.pretrained import _fingerprints
    from arl_flows.suites.molecules import make_candidate

    huge = "C" * 200_000
    candidate = make_candidate(huge)
    assert not candidate.valid
    assert not molecule_features(candidate).any() and mol_graph(huge) is None and _fingerprints([huge]) == [None]


def test_windows_rerank_items_and_verl_inputs_are_one_line(tmp_path: Path) -> None:
    """pydantic's dumps (type tags, links) and Python's own errors (KeyError, 'dictionary update sequence') before."""
    from arl_flows.integrations import rerank

    for bad, match in ((dict(low=4, high=3), "needs finite low < high"), (dict(low=3, high=4, softness=-1), "softness"),
                       (dict(low=3, high=4, foo=1), "foo: unknown field"), (dict(low="a", high="b"), "low: should be")):
        with pytest.raises(ValueError, match=match) as info:
            Window(**bad)
        assert "pydantic" not in str(info.value) and "\n" not in str(info.value)
    url = _url(tmp_path)
    for items, match in ((None, "items is a list of mappings"), ("abc", "items is a list of mappings"),
                         ([None], "item 1 is None"), ([{"candidates": "CCO"}], "item 1: candidates: should be a valid list"),
                         ([{"candidates": [1]}], r"item 1: candidates\.0: should be a valid string")):
        with pytest.raises(ValueError, match=match) as info:
            rerank(items, n=2, k=1, budget=1.0, ledger_url=url, tiers=TWO_TIERS)
        assert "pydantic" not in str(info.value)
    with pytest.raises(ValueError, match="needs finite low < high"):
        rerank([{"candidates": ["CCO"]}], n=1, k=1, budget=1.0, ledger_url=url, tiers=TWO_TIERS, window=(4, 3))
    for truth, info, options, match in ((None, None, {}, "give the gap window"), ("3,4", "x", {}, "extra_info of response 0"),
                                        ("3,4", None, {"objective": (3, 4)}, "reward_kwargs objective")):
        with pytest.raises(ValueError, match=match):
            compute_score("molecules", "CCO", truth, info, ledger_url=url, tiers=TWO_TIERS, **options)


def test_rerank_counts_and_routing_are_checked(tmp_path: Path) -> None:
    from arl_flows.integrations import rerank

    for options, match in ((dict(n="3"), "n and k must be whole numbers"), (dict(k=1.5), "n and k must be whole numbers"),
                           (dict(budget="5"), "budget must be a positive number")):
        with pytest.raises(ValueError, match=match):
            rerank([{"candidates": ["CCO"]}], **({"n": 1, "k": 1, "budget": 1.0} | options), ledger_url=_url(tmp_path))
    with pytest.raises(ValueError, match="routing 'nope' is not one of discovery, advantage"):
        TieredReward("molecules", objective=(3.0, 4.0), ledger_url=_url(tmp_path), tiers=TWO_TIERS, routing="nope")


def test_a_verdict_of_another_space_never_decides_a_status(tmp_path: Path) -> None:
    """One ledger, two spaces: qm9 judges paracetamol invalid (11 heavy atoms); a druglike reward asked after it
    used to read that verdict by the tier's name alone and call paracetamol invalid (and the run's validity 0)."""
    paracetamol = "CC(=O)Nc1ccc(O)cc1"
    # The fast tier and xTB: the shipped QM9 table cannot end a druglike ladder.
    kwargs = {"ledger_url": _url(tmp_path), "tiers": ["rdkit-eht", ("gfn2-xtb", {"threads": 1, "workers": 1})],
              "objective": (3.0, 8.0), "policy": "all"}
    with TieredReward("molecules", options={"space": "druglike"}, **kwargs) as druglike:
        druglike(["p"], [paracetamol])
        assert druglike.last_details[0].status == "ok"
    with TieredReward("molecules", **kwargs) as qm9:
        qm9(["p"], [paracetamol])
        assert qm9.last_details[0].status == "invalid" and qm9.last_details[0].reward == 0.0
        assert qm9.last_details[0].reason.startswith("rdkit-eht: ") and "heavy atoms" in qm9.last_details[0].reason
    with TieredReward("molecules", options={"space": "druglike"}, **kwargs) as again:
        again(["p"], [paracetamol])
        assert again.last_details[0].status == "ok" and again.last_details[0].cached >= 1
        steps = again.ledger.run_summary(again.run_id)["steps"]
    assert steps[0]["validity"] == 1.0


def test_options_and_objective_of_the_wrong_shape_say_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"options are the suite's \[options\] as a mapping, e.g. options=\{'space': 'druglike'\}"):
        TieredReward("molecules", options="druglike", ledger_url=_url(tmp_path), tiers=TWO_TIERS)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"objective must be a Window or a \(low, high\) pair, got \{'low': 3"):
        TieredReward("molecules", objective={"low": 3, "high": 4}, ledger_url=_url(tmp_path), tiers=TWO_TIERS)  # type: ignore[arg-type]
