"""The fixed evaluation set: ``[eval]`` of a run config, the end of ``arl run``, ``arl runs eval`` and ``arl runs show``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arl_flows.config import EvalConfig, load_config
from arl_flows.eval_set import EvalResult, EvalSide, summary_line
from storage.ledger import Ledger
from tests.helpers.cli_runner import arl, arl_run_subprocess, assert_user_error
from tests.helpers.toy_suite import toy_overrides


def _result(before: list[float], after: list[float]) -> EvalResult:
    """A result of the shape :func:`arl_flows.eval_set.evaluate` returns, from hand-picked paired rewards."""
    import math
    import statistics

    paired = 2 * statistics.stdev([y - x for x, y in zip(before, after)]) / math.sqrt(len(before))
    side = {"validity": 1.0, "top_tier_answers": len(before), "distinct": len(before)}
    return EvalResult(
        run_id="r" * 32, eval_run_id="e" * 32, eval_seed=7_777_777, samples=len(before), prompts=1, group_size=len(before),
        last_checkpoint_step=5, budget_cpu_s=60.0, spend_cpu_s=12.0, seconds=3.0,
        before=EvalSide(reward_mean=statistics.fmean(before), **side), after=EvalSide(reward_mean=statistics.fmean(after), **side),
        two_se=1.0, paired_two_se=paired,
    )


def test_the_summary_line_says_within_or_beyond_noise_by_the_paired_rule() -> None:
    # Every pair rose by about 0.3: far beyond two paired standard errors (2 x 0.01 / sqrt(4)).
    rose = _result([0.1, 0.2, 0.3, 0.4], [0.4, 0.5, 0.62, 0.7])
    assert rose.beyond_noise_paired and not rose.beyond_noise  # the two-sample rule, which ignores the pairing, is wider
    assert EvalResult.model_validate_json(rose.model_dump_json()) == rose  # what `arl runs show` reads back
    line = summary_line(rose)
    assert "reward 0.250 -> 0.555 (+0.305, paired 2 SE 0.010: beyond noise)" in line
    assert line.startswith("eval set (1 prompt x 4 samples, 4 a side, seed 7777777)")
    # Pairs that move both ways by about as much as they move on average: within noise.
    mixed = summary_line(_result([0.1, 0.5, 0.3, 0.4], [0.4, 0.2, 0.35, 0.55]))
    assert "(+0.050, paired 2 SE " in mixed and ": within noise)" in mixed


def test_eval_config_is_checked_field_by_field() -> None:
    assert EvalConfig().samples == 0  # off unless a config turns it on
    # The sampling seed is none of a training step's (seed * 1_000_003 + step) for the seeds runs use.
    assert all(EvalConfig().seed != seed * 1_000_003 + step for seed in range(7) for step in range(10_000))
    assert load_config(overrides=toy_overrides(eval={"samples": 4})).eval.samples == 4
    # The quick profile keeps what the config asks of the evaluation set.
    assert load_config(None, "quick", overrides={"eval": {"samples": 8}}).eval.samples == 8


def test_arl_runs_eval_of_a_bad_run_is_one_line(tmp_path: Path, toy_home: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    code, out, err = arl(["runs", "eval", "no-such-run", "--url", url])
    assert_user_error(code, err, out=out)
    assert "no ledger at" in err and not (tmp_path / "l.db").exists()  # a mistyped path creates nothing
    Ledger(url).close()
    code, out, err = arl(["runs", "eval", "no-such-run", "--url", url])
    assert_user_error(code, err, out=out)
    assert "no run with id 'no-such-run'" in err
    # A run that has no checkpoint yet (nothing finished) cannot be evaluated either: one line that says so.
    run = Ledger(url).create_run("toy-run", load_config(overrides=toy_overrides()).model_dump(mode="json"))
    code, out, err = arl(["runs", "eval", run.id[:10], "--url", url])
    assert_user_error(code, err, out=out)
    assert "has no checkpoint yet" in err
    code, out, err = arl(["runs", "eval", run.id, "--samples", "1", "--url", url])
    assert_user_error(code, err, out=out)


def _artifact_keys(run_id: str) -> set[str]:
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(like_=run_id[:12])))
    return {a.key for a in arts}


@pytest.mark.slow(seconds=120)  # a real `arl run` of the toy suite in a child process, then two evaluations
def test_arl_run_ends_with_the_eval_set_and_runs_show_and_eval_read_it(prefect_harness, toy_home: Path, tmp_path: Path) -> None:
    tomli_w = pytest.importorskip("tomli_w")
    cfg = tmp_path / "run.toml"
    cfg.write_text(tomli_w.dumps(toy_overrides(eval={"samples": 4, "budget": 20.0})))
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    out = arl_run_subprocess(cfg, url, prefect_harness, toy_home)
    flat = " ".join(out.split())
    assert "eval set (1 prompt x 4 samples, 4 a side, seed 7777777): reward " in flat, flat[-2000:]
    assert "paired 2 SE " in flat and ("within noise)" in flat or "beyond noise)" in flat)
    assert "Traceback" not in out
    ledger = Ledger(url)
    [run] = [r for r in ledger.list_runs() if r.name == "toy-run"]
    # The verification the evaluation paid for is a ledger run of its own, so the spend is accounted for.
    [scoring] = [r for r in ledger.list_runs() if r.name == f"eval-{run.id}"]
    assert ledger.spend_by_tier(scoring.id) and not ledger.spend_by_tier(scoring.id).keys() - {"fast", "high_fidelity"}
    assert f"eval-{run.id[:12]}" in _artifact_keys(run.id)  # the Prefect artifact shows the same line

    code, shown, err = arl(["runs", "show", run.id[:12], "--url", url, "--json"])
    assert code == 0, err
    evaluation = json.loads(shown)["eval"]
    assert evaluation["run_id"] == run.id and evaluation["eval_run_id"] == scoring.id and evaluation["samples"] == 4
    assert evaluation["last_checkpoint_step"] == 1 and evaluation["eval_seed"] == 7_777_777
    for side in ("before", "after"):
        assert 0.0 <= evaluation[side]["reward_mean"] <= 1.0 and 0.0 <= evaluation[side]["validity"] <= 1.0
    assert evaluation["difference"] == pytest.approx(evaluation["after"]["reward_mean"] - evaluation["before"]["reward_mean"])
    assert evaluation["spend_cpu_s"] <= 20.0 + 2.0  # the toy's top tier charges 2 CPU-s a word: at most one over

    # `arl runs eval` scores it again with another size; `arl runs show` then reads the new result.
    code, again, err = arl(["runs", "eval", run.id[:12], "--samples", "6", "--url", url, "--json"])
    assert code == 0, err
    again = json.loads(again)
    assert again["samples"] == 6 and again["prompts"] == 2 and again["group_size"] == 4
    code, shown, err = arl(["runs", "show", run.id[:12], "--url", url, "--json"])
    assert code == 0 and json.loads(shown)["eval"]["samples"] == 6, err
    code, table, err = arl(["runs", "show", run.id[:12], "--url", url])
    assert code == 0 and "eval set (" in table, table
