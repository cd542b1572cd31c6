"""``arl bench`` is the checkout's ``benchmarks.cli`` app; where that package does not import, one line says what it needs.

The wheel's own view (no ``benchmarks`` package at all) is in tests/packaging/test_wheel.py (slow: it builds the
wheel); here a child process of this checkout is given the same view by making ``benchmarks`` unimportable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import typer.main

ROOT = Path(__file__).resolve().parents[4]

NEEDS_CHECKOUT = (
    "error: arl bench needs ARL's source checkout (its benchmarks package is not in the wheel): "
    "clone the repository and run it from an editable install (pip install -e .)"
)


def test_in_the_checkout_arl_bench_is_the_benchmarks_app() -> None:
    from arl_flows.cli import app
    from benchmarks.cli import bench_app

    from arl_flows.suites.molecules.bench import bench_app as mounted

    assert mounted is bench_app
    group = typer.main.get_command(app).commands["bench"]
    assert sorted(group.commands) == ["advantages", "learning", "pipeline", "scheduler"]


def test_without_the_benchmarks_package_every_bench_invocation_is_one_line(tmp_path: Path) -> None:
    invocations = [["bench"], ["bench", "--help"], ["bench", "scheduler", "--help"], ["bench", "scheduler", "--limit", "10"],
                   ["bench", "pipeline", "--modes", "sync"], ["bench", "no-such-command"], ["--help"]]
    script = (
        "import json, sys\n"
        "sys.modules['benchmarks'] = None  # as in the wheel: no benchmarks package importable\n"
        "from tests.helpers.cli_runner import arl\n"
        f"print(json.dumps([arl(args) for args in {invocations!r}]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ARL_", "PYTHON"))}
    env |= {"ARL_HOME": str(tmp_path / "home"), "COLUMNS": "200", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(done.stdout.splitlines()[-1])
    for args, (code, out, err) in zip(invocations[:-1], results[:-1], strict=True):
        assert code == 2 and out.strip() == "" and err.strip() == NEEDS_CHECKOUT, (args, code, out, err)
    code, out, _ = results[-1]
    assert code == 0 and "bench" in out and "source checkout" in out  # `arl --help` still lists it
    assert not (tmp_path / "artifacts").exists()  # nothing computed, nothing cached
