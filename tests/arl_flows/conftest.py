"""One Prefect test harness per session, one small pretrained prior shared by all flow tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

# A prior small enough to pretrain in about a minute on 2 cores (shared by the session). A copy trained with
# our own code ships in tests/data/tiny_prior and is installed instead of pretraining (below the default
# quality gate on purpose: min_validity 0; max_minutes is only a safety cap).
TINY_PRIOR = {"n_layer": 2, "n_embd": 64, "n_head": 2, "max_steps": 400, "max_minutes": 60.0, "min_validity": 0.0,
              "eval_samples": 50, "batch_size": 64}
TINY_PRIOR_DIR = Path(__file__).resolve().parents[1] / "data" / "tiny_prior"


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[str]:
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    # 120 s timed out at a load of 10 (five tests of one worker errored in a CI run beside other jobs).
    with prefect_test_harness(server_startup_timeout=300):
        yield str(PREFECT_API_URL.value())


@pytest.fixture(scope="session")
def session_arl_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("arl_flows_home")
    old = os.environ.get("ARL_HOME")
    os.environ["ARL_HOME"] = str(home)
    try:
        import json
        import shutil

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


@pytest.fixture
def flow_home(session_arl_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ARL_HOME", str(session_arl_home))
    return session_arl_home


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


@pytest.fixture
def overrides():  # noqa: ANN201
    """Factory of run-config overrides for a small, fast run (see quick_overrides)."""
    return quick_overrides


@pytest.fixture
def toy_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``ARL_HOME`` of a run of the core's toy suite (``tests/helpers/toy_suite.py``): nothing to pretrain or copy."""
    home = tmp_path / "arl_home"
    monkeypatch.setenv("ARL_HOME", str(home))
    return home
