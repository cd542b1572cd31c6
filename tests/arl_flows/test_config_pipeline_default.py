"""Config resolution picks the pipeline from the top tier's latency unless the user names one (on the toy suite)."""

from __future__ import annotations

import pytest

from arl_flows.config import ASYNC_FROM_LATENCY_S, build_config, load_config
from tests.helpers.toy_suite import REFERENCE, ToyClusterParams, toy_overrides

FAST = "tests.helpers.toy_suite:ToyLength"
QUEUE = "tests.helpers.toy_suite:ToyCluster"


def _ladder(**params: object) -> dict[str, object]:
    return toy_overrides(tiers=[{"verifier": FAST}, {"verifier": QUEUE, "params": params}])


def test_the_queue_declares_a_latency_above_the_threshold() -> None:
    """The first case below reads the queue's own latency: it must be one that makes async the default."""
    assert ToyClusterParams().latency_s > ASYNC_FROM_LATENCY_S


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, "async"),  # the queue's own latency
        ({"latency_s": 2 * ASYNC_FROM_LATENCY_S}, "async"),
        ({"latency_s": ASYNC_FROM_LATENCY_S}, "sync"),
        ({"latency_s": ASYNC_FROM_LATENCY_S / 4}, "sync"),
    ],
)
def test_a_config_that_names_no_pipeline_runs_async_behind_a_slow_top_tier(params, expected) -> None:
    assert build_config(_ladder(**params)).pipeline == expected


def test_the_default_ladder_without_a_latency_stays_sync() -> None:
    assert build_config(toy_overrides()).pipeline == "sync"  # toy-length, toy-vowels: neither declares a latency


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_pipeline_the_user_names_always_wins(mode) -> None:
    for params in ({"latency_s": 600.0}, {"latency_s": 0.01}):
        assert build_config(_ladder(**params) | {"pipeline": mode}).pipeline == mode


def test_the_choice_survives_a_profile_and_overrides(tmp_path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(f'suite = "{REFERENCE}"\nname = "toy-run"\n[[tiers]]\nverifier = "{FAST}"\n[[tiers]]\nverifier = "{QUEUE}"\n')
    assert load_config(path).pipeline == "async"
    assert load_config(path, overrides={"steps": 3}).pipeline == "async"
    assert load_config(path, overrides={"pipeline": "sync"}).pipeline == "sync"


def test_a_profile_that_changes_the_top_tier_changes_the_default_mode(tmp_path) -> None:
    """The druglike quick ladder ends at xTB (seconds), not DFT (minutes): its default is sync, with the reason the
    dry run gives; a mode the config names survives the profile (newcomer pass: "async (named in the config)")."""
    from pathlib import Path

    from arl_flows.config import pipeline_reason

    druglike = Path(__file__).resolve().parents[2] / "examples" / "druglike.toml"
    assert load_config(druglike).pipeline == "async"
    quick = load_config(druglike, profile="quick")
    assert quick.pipeline == "sync" and pipeline_reason(quick).startswith("default:")
    assert load_config(druglike, profile="quick", overrides={"steps": 2}).pipeline == "sync"
    named = tmp_path / "named.toml"
    named.write_text('pipeline = "async"\n' + druglike.read_text())  # a top-level key, before the file's tables
    assert load_config(named, profile="quick").pipeline == "async"


def test_a_profile_that_names_the_pipeline_keeps_it(monkeypatch) -> None:
    """Only the default mode is re-derived after a profile: a profile that sets one keeps it (review)."""
    from arl_flows.suites import get_suite

    suite = get_suite("molecules")

    def async_profile(config):  # noqa: ANN001, ANN202
        return config.model_copy(update={"pipeline": "async", "steps": 7})

    monkeypatch.setattr(suite, "profiles", {**suite.profiles, "async7": async_profile})
    config = load_config(profile="async7")
    assert (config.pipeline, config.steps) == ("async", 7)
