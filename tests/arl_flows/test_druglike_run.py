"""`arl run` in the druglike space (examples/druglike.toml, its quick ladder), 1 step: the tiers check the run's space."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from storage.ledger import Ledger
from tests.helpers.cli_runner import arl_run_subprocess

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "druglike.toml"


@pytest.mark.slow  # the shipped druglike prior, live EHT and GFN2-xTB on drug-sized molecules
def test_a_druglike_run_verifies_in_its_space(prefect_harness, flow_home, tmp_path: Path) -> None:
    tomli_w = pytest.importorskip("tomli_w")
    from arl_flows.config import load_config

    config = tomllib.loads(EXAMPLE.read_text())
    config |= {"steps": 1, "name": "druglike-run", "rollout": {"prompts_per_step": 2},
               "tiers": [{"verifier": "rdkit-eht"}, {"verifier": "gfn2-xtb", "params": {"threads": 1}}]}
    config["trainer"] |= {"group_size": 4}
    config["scheduler"] |= {"budget_per_step": 20.0, "budget_per_run": 20.0}
    cfg = tmp_path / "druglike.toml"
    cfg.write_text(tomli_w.dumps(config))
    assert load_config(cfg).suite_options.space == "druglike"

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    out = arl_run_subprocess(cfg, url, prefect_harness, flow_home)
    assert "completed" in out and "Traceback" not in out
    ledger = Ledger(url)
    run = ledger.list_runs()[0]
    rows = [e for _, e in ledger.step_trajectories(run.id, 0) if e is not None]
    assert len(rows) == 8
