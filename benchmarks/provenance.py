"""Where a benchmark report came from: the commit, the package versions and the machine.

Every report a harness here writes or prints carries this record, so a figure
in ``docs/benchmarks.md`` can be traced to the code and the machine that made
it, and a rerun on another machine can be told apart from a regression.
"""

from __future__ import annotations

import os
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

__all__ = ["PACKAGES", "format_provenance", "provenance", "with_provenance"]

# The distributions whose version moves a benchmark's numbers: ARL itself, its tensors, its chemistry, its flows.
PACKAGES = ("arl", "torch", "rdkit", "pyscf", "tblite", "prefect")

_CHECKOUT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=_CHECKOUT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance() -> dict[str, Any]:
    """The commit (with whether the tree had uncommitted changes), package versions (None: not installed), machine."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": _git("rev-parse", "HEAD"),
        "dirty": None if status is None else bool(status),
        "packages": {name: _version(name) for name in PACKAGES},
        "python": platform.python_version(),
        "machine": {
            "cpu_count": os.cpu_count(),
            "cpu_model": _cpu_model(),
            "platform": platform.platform(),
        },
    }


def with_provenance(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` with its ``provenance`` entry (a copy; a report that has one keeps it)."""
    return report if "provenance" in report else {**report, "provenance": provenance()}


def format_provenance(record: dict[str, Any] | None = None) -> str:
    """One line of the record for a printed or markdown report."""
    p = record or provenance()
    commit = (p["commit"] or "unknown")[:12] + (" (uncommitted changes)" if p["dirty"] else "")
    packages = ", ".join(f"{k} {v or '-'}" for k, v in p["packages"].items())
    m = p["machine"]
    return f"commit {commit}; {packages}; python {p['python']}; {m['cpu_count']} CPUs ({m['cpu_model']}), {m['platform']}"
