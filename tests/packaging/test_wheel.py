"""The wheel carries everything a run needs: built, installed into a fresh venv, run from another directory.

The wheel and its venv come from the session fixture ``installed_wheel`` (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def wheel(installed_wheel) -> Path:  # noqa: ANN001
    return installed_wheel.wheel


@pytest.mark.slow
def test_wheel_holds_the_data_a_run_needs(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "arl_flows/suites/molecules/data/qm9_gap.csv",
        "storage/migrations/env.py",
        "storage/migrations/versions/0001_core_tables.py",
        "arl_flows/suites/code/tasks/tasks.json",
        "arl_flows/suites/molecules/data/smiles_prior/model.safetensors",
        "arl_flows/suites/molecules/data/smiles_prior/tokenizer.json",
        "arl_flows/suites/molecules/data/smiles_prior/pretrain_report.json",
        "arl_flows/suites/molecules/data/surrogate/graph_ensemble.pt",
        "arl_flows/suites/molecules/data/surrogate/report.json",
        "arl_flows/suites/molecules/data/surrogate/qm9_lower_tiers.csv.gz",
    ):
        assert required in names, f"{required} is missing from {wheel.name}"
    assert not any(n.startswith("tests/") for n in names)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: Apache-2.0" in zipfile.ZipFile(wheel).read(metadata).decode()


@pytest.mark.slow
def test_installed_wheel_runs_from_another_directory(installed_wheel, tmp_path: Path) -> None:  # noqa: ANN001
    python, site = installed_wheel.python, installed_wheel.site
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ARL_", "PYTHON"))}
    env |= {"ARL_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    arl = str(installed_wheel.arl)

    def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([arl, *args], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=timeout)
        assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    where = subprocess.run([str(python), "-c", "import arl_flows, storage; print(arl_flows.__file__)"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(site)), where

    prior = json.loads(run("prior", "show", "--json").stdout)
    assert prior["source"] == "shipped with the package" and prior["path"].startswith(str(site)), prior
    assert prior["report"]["validity"] >= 0.85 and not prior["report"]["truncated"]

    verdicts = json.loads(run("verify", "--suite", "molecules", "--smiles", "c1ccncc1", "--tiers", "fast", "--json").stdout)
    assert verdicts, verdicts

    done = run("run", "--profile", "quick", "--steps", "1")
    assert "pretraining" not in done.stdout  # the shipped prior, loaded
    runs = json.loads(run("runs", "list", "--json").stdout)
    assert [r["status"] for r in runs] == ["completed"]
    shown = json.loads(run("runs", "show", runs[0]["id"], "--json").stdout)
    assert len(shown["steps"]) == 1 and shown["steps"][0]["validity"] is not None
    assert (tmp_path / "home" / "runs" / runs[0]["id"] / "prefect.log").is_file()
    assert (tmp_path / "home" / "prefect").is_dir()  # Prefect's database under ARL_HOME
    assert "telemetry" not in (done.stdout + done.stderr).lower()
