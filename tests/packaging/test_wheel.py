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

from tests.helpers.venvs import build_wheel, new_venv, pip_install

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user's shell: none of the test's PYTHON*, ARL_* or Prefect settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ARL_", "PYTHON"))}
    return env | {"ARL_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1", "COLUMNS": "200"}


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


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
        "arl_flows/suites/molecules/data/druglike_prior/model.safetensors",
        "arl_flows/suites/molecules/data/druglike_prior/pretrain_report.json",
        "arl_flows/suites/molecules/data/druglike_prior_labels.csv.gz",
        "arl_flows/suites/molecules/data/fcd/moses_test.npz",  # the druglike prior's FCD reference
        "arl_flows/suites/molecules/data/novelty/moses_train_scaffolds.npy",  # and its scaffold novelty index
        "arl_flows/suites/molecules/data/surrogate/graph_ensemble.pt",
        "arl_flows/suites/molecules/data/surrogate/report.json",
        "arl_flows/suites/molecules/data/surrogate/qm9_lower_tiers.csv.gz",
    ):
        assert required in names, f"{required} is missing from {wheel.name}"
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)  # harnesses stay in the checkout
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: Apache-2.0" in zipfile.ZipFile(wheel).read(metadata).decode()


@pytest.mark.slow
def test_installed_wheel_runs_from_another_directory(installed_wheel, tmp_path: Path) -> None:  # noqa: ANN001
    python, site = installed_wheel.python, installed_wheel.site
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = _env(tmp_path)
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


@pytest.mark.slow
def test_arl_bench_from_the_wheel_says_in_one_line_what_it_needs(installed_wheel, tmp_path: Path) -> None:  # noqa: ANN001
    """The bench commands live in the checkout's benchmarks package: from the wheel, whatever follows ``arl bench``."""
    env = _env(tmp_path)

    def arl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(installed_wheel.arl), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    listed = arl("--help")
    assert listed.returncode == 0 and "bench" in listed.stdout and "source checkout" in listed.stdout, listed.stdout + listed.stderr
    for command in ([], ["--help"], ["scheduler", "--help"], ["scheduler", "--limit", "10"], ["learning", "--seeds", "1"]):
        done = arl("bench", *command)
        assert done.returncode == 2, done.stdout + done.stderr
        assert _lines(done.stdout + done.stderr) == [
            "error: arl bench needs ARL's source checkout (its benchmarks package is not in the wheel): "
            "clone the repository and run it from an editable install (pip install -e .)"
        ], (command, done.stdout + done.stderr)
    assert not (tmp_path / "artifacts").exists()  # nothing computed, nothing cached


@pytest.mark.slow
def test_arl_bench_from_an_editable_install_runs_the_checkouts_benchmarks(tmp_path: Path) -> None:
    """The console script's path holds neither the checkout nor the current folder; pip's record of the install does."""
    python, _ = new_venv(tmp_path / "venv")
    pip_install(python, ROOT, "--no-build-isolation", "-e")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # Two checks that only benchmarks/commands.py makes: the harness was imported from the checkout.
    for args, line in ((["scheduler", "--window", "4", "3"], "error: --window 4.0 3.0: LO must be below HI; swap them"),
                       (["learning", "--seeds", "0"], "error: --seeds must be from 1 to 1,000, got 0")):
        done = subprocess.run([str(python.parent / "arl"), "bench", *args], cwd=elsewhere, env=_env(tmp_path),
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and _lines(done.stdout + done.stderr) == [line], done.stdout + done.stderr


def _pypi_verifiers_wheel(work: Path) -> Path:
    """A real distribution named ``verifiers`` (0.1.9) with a top-level ``verifiers`` package, like the PyPI library."""
    src = work / "pypi-verifiers"
    (src / "verifiers" / "envs").mkdir(parents=True)
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "verifiers"\nversion = "0.1.9"\n\n[tool.setuptools]\npackages = ["verifiers", "verifiers.envs"]\n'
    )
    (src / "verifiers" / "__init__.py").write_text('"""RL environments."""\n\nfrom verifiers.envs import Environment\n')
    (src / "verifiers" / "envs" / "__init__.py").write_text("class Environment:\n    pass\n")
    return build_wheel(src, work)


@pytest.mark.slow
def test_the_pypi_verifiers_package_beside_arl_is_named_in_one_line(installed_wheel, tmp_path: Path) -> None:  # noqa: ANN001
    python, _site = new_venv(tmp_path / "venv")
    pip_install(python, installed_wheel.wheel)
    pip_install(python, _pypi_verifiers_wheel(tmp_path))  # installed last: its verifiers/__init__.py replaces ARL's
    env = _env(tmp_path)
    arl = str(python.with_name("arl"))
    line = ("the PyPI package 'verifiers' (0.1.9) is installed in this environment and shares ARL's import name "
            "'verifiers'; install ARL in its own virtual environment (pip uninstall verifiers)")

    broken = subprocess.run([arl, "tiers", "list"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert broken.returncode == 2 and _lines(broken.stdout + broken.stderr) == [f"error: {line}"], broken.stdout + broken.stderr

    pip_install(python, installed_wheel.wheel, "--force-reinstall")  # ARL's files back on top: ARL runs, and says why the other broke
    works = subprocess.run([arl, "tiers", "list", "--json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert works.returncode == 0, works.stdout + works.stderr
    assert "rdkit-eht" in works.stdout and _lines(works.stderr) == [f"warning: {line}"]
    imported = subprocess.run([str(python), "-c", "import verifiers"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
    assert imported.returncode == 0 and f"VerifiersNameClash: {line}" in imported.stderr, imported.stderr
