"""The tiny SMILES prior the flow and benchmark tests run on, and the overrides of a small, fast run.

A prior small enough to pretrain in about a minute on 2 cores. A copy trained with our own code ships in
``tests/data/tiny_prior`` and is installed instead of pretraining (below the default quality gate on purpose:
min_validity 0; max_minutes is only a safety cap).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

__all__ = ["TINY_PRIOR", "TINY_PRIOR_DIR", "install_tiny_prior", "quick_overrides"]

TINY_PRIOR = {"n_layer": 2, "n_embd": 64, "n_head": 2, "max_steps": 400, "max_minutes": 60.0, "min_validity": 0.0,
              "eval_samples": 50, "batch_size": 64}
TINY_PRIOR_DIR = Path(__file__).resolve().parents[1] / "data" / "tiny_prior"


def install_tiny_prior(home: Path) -> Path:
    """``home`` as an ARL home holding the tiny prior: the shipped copy when its config hash matches, else pretrained."""
    old = os.environ.get("ARL_HOME")
    os.environ["ARL_HOME"] = str(home)
    try:
        from arl_flows.suites.molecules.prior import PretrainConfig, load_or_pretrain, prior_cache_key, prior_dir

        config = PretrainConfig(**TINY_PRIOR)
        report = TINY_PRIOR_DIR / "pretrain_report.json"
        if report.is_file() and json.loads(report.read_text())["config_hash"] == prior_cache_key(config):
            shutil.copytree(TINY_PRIOR_DIR, prior_dir(config))
        load_or_pretrain(config)
    finally:
        if old is None:
            os.environ.pop("ARL_HOME", None)
        else:
            os.environ["ARL_HOME"] = old
    return home


def quick_overrides(**extra: object) -> dict[str, object]:
    """A 2-step run on the tiny prior with the live fast and xTB tiers and the reference table on top."""
    base: dict[str, object] = {
        "name": "test-run",
        "steps": 2,
        "prior": TINY_PRIOR,
        "rollout": {"prompts_per_step": 2},
        "trainer": {"group_size": 4, "max_new_tokens": 32, "temperature": 0.8},
        "tiers": [
            {"verifier": "rdkit-eht"},
            {"verifier": "gfn2-xtb", "params": {"threads": 1, "workers": 1}},
            {"verifier": "reference-table", "params": {"cost_per_call": 5.0}},
        ],
        "scheduler": {"policy": "all", "objective": "advantage", "target_low": 3.0, "target_high": 8.0,
                      "window_softness": 0.5, "budget_per_step": 1000.0, "budget_per_run": 5000.0},
        "tier_concurrency": {"gfn2-xtb": 1},
    }
    base.update(extra)
    return base
