"""A suite plugin installed editable into the user's environment (as the README's stories do) stays out of the tests.

The user's environment is a throwaway venv whose site-packages holds this
environment's packages (as links, so its ``.pth`` files run) and the math
suite example installed with ``pip install -e``: its entry points and its
editable finder, nothing else. The venvs the packaging, TRL and example tests
build from such an environment must see neither the plugin's entry points nor
a broken plugin, while the user's own environment finds and loads it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

DISCOVER = (
    "import json; from arl_flows.suites import suite_classes, broken_suites; "
    "print(json.dumps({'suites': sorted(suite_classes()), 'broken': [b.name for b in broken_suites()]}))"
)


def _python(venv: Path) -> tuple[Path, Path]:
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True, timeout=120).stdout.strip())
    return python, site


def _discover(python: Path, env: dict[str, str]) -> dict[str, list[str]]:
    done = subprocess.run([str(python), "-c", DISCOVER], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_an_editable_plugin_in_the_users_environment_is_found_there_and_not_in_the_venvs_tests_build(tmp_path: Path) -> None:
    user = tmp_path / "user-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(user)], check=True, timeout=300)
    python, site = _python(user)
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not (site / entry.name).exists():
            (site / entry.name).symlink_to(entry)
    plugin = tmp_path / "math_suite"
    shutil.copytree(ROOT / "examples" / "math_suite", plugin, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-build-isolation",
                    "-q", "-e", str(plugin)], check=True, capture_output=True, text=True, timeout=600, env=env)
    env["PYTHONPATH"] = str(ROOT)

    # The user's environment finds the plugin and loads it (its module comes from the editable finder).
    found = _discover(python, env)
    assert {"math", "molecules", "code"} <= set(found["suites"]) and found["broken"] == []

    # A venv built the way the tests build theirs, from inside that environment, sees no trace of it.
    build = f"from pathlib import Path; from tests.helpers.venvs import new_venv; print(new_venv(Path({str(tmp_path / 'test-venv')!r}))[0])"
    done = subprocess.run([str(python), "-c", build], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    test_python = Path(done.stdout.strip().splitlines()[-1])
    seen = _discover(test_python, env)
    assert "math" not in seen["suites"] and {"molecules", "code"} <= set(seen["suites"]), seen
    assert seen["broken"] == [], seen
    # Control: a venv that reads every entry of that site-packages, the plugin's metadata included (what the
    # tests built before they filtered it), lists the plugin as broken: its entry points without its module.
    unfiltered = tmp_path / "unfiltered-deps"
    unfiltered.mkdir()
    for entry in site.iterdir():
        (unfiltered / entry.name).symlink_to(entry)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "unfiltered")], check=True, timeout=300)
    control_python, control_site = _python(tmp_path / "unfiltered")
    (control_site / "_deps.pth").write_text(f"{unfiltered}\n")
    assert _discover(control_python, env)["broken"] == ["math"]
