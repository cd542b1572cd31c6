"""The example suite package end to end: installed into a venv, found by its entry points, run by `arl run`.

The venv gets the example from ``pip install`` of a copy of ``examples/math_suite``
(nothing downloaded); ARL and its dependencies come from the test's own
environment through a ``.pth`` file, as in ``installed_wheel`` (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers.venvs import third_party_site

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

TINY_PRIOR = """
[options.prior]
max_steps = 5
pairs = 20
n_layer = 1
n_embd = 16
n_head = 2
eval_samples = 4
"""


@pytest.fixture(scope="module")
def math_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(python of a venv with arl-math-suite installed, the copied example folder)."""
    work = tmp_path_factory.mktemp("math-suite")
    example = work / "math_suite"
    shutil.copytree(ROOT / "examples" / "math_suite", example, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "_arl_test_deps.pth").write_text(f"{third_party_site(work / 'deps')}\n{ROOT}\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-build-isolation",
                    "-q", str(example)], check=True, capture_output=True, text=True, timeout=600)
    return python, example


def _arl(python: Path, cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ARL_DATABASE_URL")}
    env |= {"ARL_HOME": str(home), "OMP_NUM_THREADS": "1"}
    return subprocess.run([str(python), "-c", "from arl_flows.cli import main; main()", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow(seconds=55)
def test_the_math_suite_installs_verifies_and_runs(math_venv: tuple[Path, Path], tmp_path: Path) -> None:
    python, example = math_venv
    home = tmp_path / "home"

    listed = _arl(python, example, home, "suites", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [math] = [s for s in json.loads(listed.stdout) if s["name"] == "math"]
    assert math["origin"] == "entry point" and math["tiers"] == ["math-format", "sympy-simplify", "mpmath-points"]

    shown = _arl(python, example, home, "suites", "show", "math")
    assert shown.returncode == 0, shown.stderr
    assert "mpmath-points" in shown.stdout and "task_seed" in shown.stdout

    verified = _arl(python, example, home, "verify", "--suite", "math", "--goal", "kind=derivative", "--goal", "expr=x*log(x**2)",
                    "--answer", "log(x**2)+2", "--answer", "2*log(x)+2", "--answer", "log(x)", "--answer", "log(x",
                    "--tiers", "fast,simulation,high_fidelity", "--json")
    assert verified.returncode == 0, verified.stderr
    got = {(r["input"], r["verifier"]): (r["status"], r["value"]) for r in json.loads(verified.stdout)}
    assert got[("log(x**2)+2", "sympy-simplify")] == ("ok", 1.0) and got[("log(x**2)+2", "mpmath-points")] == ("ok", 1.0)
    assert got[("2*log(x)+2", "sympy-simplify")] == ("ok", 0.0) and got[("2*log(x)+2", "mpmath-points")] == ("ok", 1.0)
    assert got[("log(x)", "mpmath-points")] == ("ok", 0.0)
    assert {got[("log(x", v)][0] for v in ("math-format", "sympy-simplify", "mpmath-points")} == {"invalid"}

    config = example / "run-tiny.toml"
    text = (example / "run.toml").read_text().split("[options.prior]")[0] + TINY_PRIOR
    text = text.replace("prompts_per_step = 4", "prompts_per_step = 2").replace("group_size = 8", "group_size = 4")
    # The fixed evaluation set is the core's, suite-agnostic: the run ends with its first policy against its last
    # checkpoint (`arl runs eval` does the same later, through the same code; tests/arl_flows/test_eval_set.py).
    assert "[eval]" not in text
    config.write_text(text + "\n[eval]\nsamples = 4\nbudget = 5.0\n")
    ran = _arl(python, example, home, "run", "--config", config.name, "--steps", "1")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]

    # What the ledger recorded, read by this process's `arl` (no suite needed to read a ledger).
    from typer.testing import CliRunner

    from arl_flows.cli import app

    url = f"sqlite:///{home / 'ledger.db'}"
    runs = json.loads(CliRunner().invoke(app, ["runs", "list", "--url", url, "--json"]).stdout)
    [run] = [r for r in runs if r["name"] == "math-calculus"]  # the evaluation's verification is a run of its own
    assert [r["name"] for r in runs if r is not run] == [f"eval-{run['id']}"]
    record = json.loads(CliRunner().invoke(app, ["runs", "show", run["id"], "--url", url, "--json"]).stdout)
    assert record["name"] == "math-calculus" and record["status"] == "completed" and record["steps_done"] == 1
    assert record["trajectories"] == 2 * 4  # prompts_per_step x group_size
    assert sum(record["verdicts_by_status"].values()) >= record["candidates"] > 0
    assert record["steps"][0]["calls_by_tier"]["fast"] == record["candidates"]  # every candidate's format is checked
    assert list((home / "priors").glob("math-*/pretrain_report.json"))  # the prior was pretrained and cached

    # The evaluation's result lives in the run's folder under its ARL_HOME: read by an `arl` of that home.
    shown = _arl(python, example, home, "runs", "show", run["id"][:12], "--json")
    assert shown.returncode == 0, shown.stderr[-2000:]
    evaluation = json.loads(shown.stdout)["eval"]
    assert evaluation["run_id"] == run["id"] and evaluation["samples"] == 4 and evaluation["group_size"] == 4
    assert {"reward_mean", "validity", "top_tier_answers"} <= evaluation["before"].keys() & evaluation["after"].keys()
    assert evaluation["spend_cpu_s"] <= 5.0 + 1.0
