"""Config resolution picks the pipeline from the top tier's latency unless the user names one."""

from __future__ import annotations

import pytest

from arl_flows.config import ASYNC_FROM_LATENCY_S, build_config, load_config


def _ladder(**params: object) -> list[dict[str, object]]:
    return [{"verifier": "rdkit-eht"}, {"verifier": "simulated-cluster", "params": params}]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, "async"),  # the cluster's own latency (10 s)
        ({"latency_s": 2 * ASYNC_FROM_LATENCY_S}, "async"),
        ({"latency_s": ASYNC_FROM_LATENCY_S}, "sync"),
        ({"latency_s": ASYNC_FROM_LATENCY_S / 4}, "sync"),
    ],
)
def test_a_config_that_names_no_pipeline_runs_async_behind_a_slow_top_tier(params, expected) -> None:
    assert build_config({"tiers": _ladder(**params)}).pipeline == expected


def test_the_default_ladder_without_a_latency_stays_sync() -> None:
    assert build_config({}).pipeline == "sync"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_pipeline_the_user_names_always_wins(mode) -> None:
    for params in ({"latency_s": 600.0}, {"latency_s": 0.01}):
        assert build_config({"tiers": _ladder(**params), "pipeline": mode}).pipeline == mode


def test_the_choice_survives_a_profile_and_overrides(tmp_path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('[[tiers]]\nverifier = "rdkit-eht"\n[[tiers]]\nverifier = "simulated-cluster"\n')
    assert load_config(path).pipeline == "async"
    assert load_config(path, overrides={"steps": 3}).pipeline == "async"
    assert load_config(path, overrides={"pipeline": "sync"}).pipeline == "sync"


def _molecules(space: str | None, top: str = "pyscf-b3lyp", **params: object) -> dict[str, object]:
    data: dict[str, object] = {"tiers": [{"verifier": "rdkit-eht"}, {"verifier": top, "params": params}]}
    if space is not None:
        data["options"] = {"space": space}
    return data


@pytest.mark.parametrize("top", ["pyscf-b3lyp", "reference-or-dft"])
def test_local_dft_runs_async_in_the_druglike_space_and_stays_sync_in_qm9(top) -> None:
    # Drug size: the DFT tier's latency hint is its cost model at the space's typical size (minutes).
    assert build_config(_molecules("druglike", top)).pipeline == "async"
    assert build_config(_molecules("qm9", top)).pipeline == "sync"
    assert build_config(_molecules(None, top)).pipeline == "sync"


def test_a_latency_the_dft_tier_is_given_wins_over_the_space_hint() -> None:
    assert build_config(_molecules("druglike", latency_s=ASYNC_FROM_LATENCY_S / 2)).pipeline == "sync"
    assert build_config(_molecules("qm9", latency_s=4 * ASYNC_FROM_LATENCY_S)).pipeline == "async"
    assert build_config(_molecules("druglike") | {"pipeline": "sync"}).pipeline == "sync"
