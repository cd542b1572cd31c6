"""`arl run` in the druglike space (examples/druglike.toml, its quick ladder), 1 step: the tiers check the run's space."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.helpers.cli_runner import run_one_step_in_process

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "druglike.toml"


@pytest.mark.slow(seconds=55)  # the shipped druglike prior, live EHT and GFN2-xTB on drug-sized molecules
def test_a_druglike_run_verifies_in_its_space(prefect_harness, flow_home, tmp_path: Path) -> None:
    pytest.importorskip("tomli_w")
    from arl_flows.config import load_config

    config = tomllib.loads(EXAMPLE.read_text())
    config |= {"steps": 1, "name": "druglike-run", "rollout": {"prompts_per_step": 2},
               "tiers": [{"verifier": "rdkit-eht"}, {"verifier": "gfn2-xtb", "params": {"threads": 1}}]}
    config["trainer"] |= {"group_size": 4}
    config["scheduler"] |= {"budget_per_step": 20.0, "budget_per_run": 20.0}
    rows = run_one_step_in_process(config, tmp_path / "druglike.toml")
    assert load_config(tmp_path / "druglike.toml").suite_options.space == "druglike"
    assert len(rows) == 8
