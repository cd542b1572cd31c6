"""A plugin that no longer imports (its editable package moved or deleted) breaks only what names it.

The broken plugin is a real installed distribution as ``importlib.metadata``
sees one: a ``fakeplug-0.1.dist-info`` folder on ``PYTHONPATH`` whose entry
points name a module that does not exist.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SUITE_EP = "arl.suites:fake-suite"
TIER_EP = "arl.verifiers:fake-tier"


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("broken-site")
    info = site / "fakeplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[arl.suites]\nfake-suite = fakeplug_missing.suite:Suite\n\n[arl.verifiers]\nfake-tier = fakeplug_missing.tier:Tier\n",
        encoding="utf-8",
    )
    return site


def _arl(args: list[str], site: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "ARL_HOME": str(home),
        "OMP_NUM_THREADS": "1", "COLUMNS": "200",
    }
    env.pop("ARL_TRACEBACK", None)
    return subprocess.run(
        [sys.executable, "-c", "from arl_flows.cli import main; main()", *args],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600,
    )


def _warnings(stderr: str, entry_point: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: plugin") and f"entry point {entry_point} " in line]


def _assert_one_warning(result: subprocess.CompletedProcess[str], entry_point: str) -> None:
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    (line,) = _warnings(result.stderr, entry_point)
    assert "distribution 'fakeplug'" in line and "fakeplug_missing" in line
    assert line.endswith("fix it or `pip uninstall fakeplug`"), line


def test_lists_show_the_broken_plugins(broken_site: Path, tmp_path: Path) -> None:
    tiers = _arl(["tiers", "list", "--json"], broken_site, tmp_path)
    assert tiers.returncode == 0, tiers.stderr
    _assert_one_warning(tiers, TIER_EP)
    rows = {row["name"]: row for row in json.loads(tiers.stdout)}
    assert rows["fake-tier"]["status"] == "broken" and rows["fake-tier"]["distribution"] == "fakeplug"
    assert rows["rdkit-eht"]["status"] == "ok"  # the built-in tiers are still there

    suites = _arl(["suites", "list", "--json"], broken_site, tmp_path)
    assert suites.returncode == 0, suites.stderr
    _assert_one_warning(suites, SUITE_EP)
    rows = {row["name"]: row for row in json.loads(suites.stdout)}
    assert rows["fake-suite"]["status"] == "broken" and "pip uninstall fakeplug" in rows["fake-suite"]["description"]
    assert rows["molecules"]["status"] == "ok"

    table = _arl(["suites", "list"], broken_site, tmp_path)
    assert table.returncode == 0, table.stderr
    assert "fake-suite" in table.stdout and "broken" in table.stdout


@pytest.mark.slow  # 29 s on 2 loaded cores, about 14 s idle
def test_commands_that_do_not_need_it_work(broken_site: Path, tmp_path: Path) -> None:
    result = _arl(["verify", "--suite", "molecules", "--tiers", "fast", "--answer", "CCO", "--json"], broken_site, tmp_path)
    assert result.returncode == 0, result.stderr
    _assert_one_warning(result, TIER_EP)
    assert "rdkit-eht" in result.stdout


@pytest.mark.slow  # 94 s on 2 loaded cores, about 47 s idle
def test_naming_it_is_one_error_line(broken_site: Path, tmp_path: Path) -> None:
    config = tmp_path / "fake.toml"
    config.write_text('suite = "fake-suite"\n', encoding="utf-8")
    for args, what in (
        (["config", "show", "--config", str(config)], "suite 'fake-suite' is broken"),
        (["verify", "--suite", "molecules", "--tiers", "fake-tier", "--answer", "CCO"], "verifier 'fake-tier' is broken"),
    ):
        result = _arl(args, broken_site, tmp_path)
        assert result.returncode == 2, (args, result.stderr)
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr, result.stderr
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and what in errors[0] and "pip uninstall fakeplug" in errors[0], result.stderr
        assert len(_warnings(result.stderr, SUITE_EP)) <= 1 and len(_warnings(result.stderr, TIER_EP)) <= 1


def test_venvs_the_tests_build_leave_out_plugins_the_user_installed(broken_site: Path, tmp_path: Path) -> None:
    from tests.helpers.venvs import third_party_site

    site = tmp_path / "site"
    shutil.copytree(broken_site, site)  # the user's plugin, installed into this environment
    (site / "numpy").mkdir()
    (site / "arl-0.1.dist-info").mkdir()
    (site / "arl-0.1.dist-info" / "entry_points.txt").write_text("[arl.suites]\nmolecules = arl_flows.suites:Suite\n")
    mirror = third_party_site(tmp_path / "deps", source=site)
    assert sorted(p.name for p in mirror.iterdir()) == ["arl-0.1.dist-info", "numpy"]
    assert (mirror / "numpy").resolve() == (site / "numpy").resolve()
