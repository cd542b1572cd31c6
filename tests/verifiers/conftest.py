"""Fixtures of the verifier tests: the example plugin, really installed (into a temporary target)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PLUGIN_SRC = ROOT / "examples" / "custom_tier"


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory where ``pip`` installed examples/custom_tier, with its dist-info and entry point.

    Installed with ``--target`` rather than into the venv, so the test leaves the
    environment as it found it; putting the directory on ``sys.path`` /
    ``PYTHONPATH`` is exactly how Python discovers an installed distribution.
    """
    work = tmp_path_factory.mktemp("plugin")
    source = work / "src"
    shutil.copytree(PLUGIN_SRC, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = work / "site"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(site), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert list(site.glob("arl_custom_tier-*.dist-info/entry_points.txt"))
    return site
