"""The molecules suite's part of the pipeline default: its default ladder, the simulated cluster, the DFT tier's hint."""

from __future__ import annotations

import pytest

from arl_flows.config import ASYNC_FROM_LATENCY_S, build_config, load_config


def test_the_default_ladder_stays_sync() -> None:
    assert build_config({}).pipeline == "sync"


def test_the_simulated_cluster_runs_async_by_its_own_latency(tmp_path) -> None:
    """Its declared 10 s wait is above the threshold, from a config as from a file that gives it no params."""
    ladder = [{"verifier": "rdkit-eht"}, {"verifier": "simulated-cluster"}]
    assert build_config({"tiers": ladder}).pipeline == "async"
    assert build_config({"tiers": [ladder[0], {**ladder[1], "params": {"latency_s": ASYNC_FROM_LATENCY_S}}]}).pipeline == "sync"
    path = tmp_path / "run.toml"
    path.write_text('[[tiers]]\nverifier = "rdkit-eht"\n[[tiers]]\nverifier = "simulated-cluster"\n')
    assert load_config(path).pipeline == "async"


def _molecules(space: str | None, top: str = "pyscf-b3lyp", **params: object) -> dict[str, object]:
    data: dict[str, object] = {"tiers": [{"verifier": "rdkit-eht"}, {"verifier": top, "params": params}]}
    if space is not None:
        data["options"] = {"space": space}
    return data


@pytest.mark.parametrize("top", ["pyscf-b3lyp", "reference-or-dft"])
def test_local_dft_runs_async_in_the_druglike_space_and_stays_sync_in_qm9(top) -> None:
    # Drug size: the DFT tier's latency hint is its cost model at the space's typical size (minutes).
    # reference-or-dft keeps its 6-31G (its table correction is fitted there), which has no Br: in the druglike
    # space it must name a basis that covers the space (the ladder refuses it otherwise, and the mode stays sync).
    druglike = {"basis": "6-31G*"} if top == "reference-or-dft" else {}
    assert build_config(_molecules("druglike", top, **druglike)).pipeline == "async"
    assert build_config(_molecules("qm9", top)).pipeline == "sync"
    assert build_config(_molecules(None, top)).pipeline == "sync"
    if top == "reference-or-dft":
        assert build_config(_molecules("druglike", top)).pipeline == "sync"  # refused where the ladder is built


def test_a_latency_the_dft_tier_is_given_wins_over_the_space_hint() -> None:
    assert build_config(_molecules("druglike", latency_s=ASYNC_FROM_LATENCY_S / 2)).pipeline == "sync"
    assert build_config(_molecules("qm9", latency_s=4 * ASYNC_FROM_LATENCY_S)).pipeline == "async"
    assert build_config(_molecules("druglike") | {"pipeline": "sync"}).pipeline == "sync"
