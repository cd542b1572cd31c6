"""A real browser opens the Prefect UI served by `arl ui` and finds the training run and its artifacts."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _arl(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from arl_flows.cli import main; main()", *args],
        env=env, capture_output=True, text=True, timeout=timeout,
    )


@pytest.mark.slow
@pytest.mark.browser
def test_prefect_ui_shows_the_run_and_its_artifacts(flow_home: Path, overrides, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("headless Chromium not found at /usr/bin/chromium (apt-get install chromium; .ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (dev extra)")
    tomli_w = pytest.importorskip("tomli_w")

    config = tmp_path / "run.toml"
    config.write_text(tomli_w.dumps(overrides(steps=1, name="browser-run")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env |= {"PREFECT_HOME": str(tmp_path / "prefect"), "ARL_HOME": str(flow_home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    url = f"sqlite:///{tmp_path / 'ledger.db'}"

    # 1. A run with the embedded defaults (temporary Prefect server on PREFECT_HOME's database).
    done = _arl(["run", "--config", str(config), "--url", url], env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # 2. `arl ui` serves the same database; the run made before must show up.
    port = _free_port()
    started = _arl(["ui", "--background", "--port", str(port)], env, timeout=180)
    assert started.returncode == 0, started.stdout + started.stderr
    shot = tmp_path / "prefect-ui.png"
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, headless=True,
                args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
            )
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/runs", wait_until="networkidle", timeout=90_000)
            link = page.get_by_text("browser-run").first
            link.wait_for(timeout=90_000)
            link.click()
            page.wait_for_load_state("networkidle")
            page.get_by_text("Artifacts", exact=True).first.click()
            page.get_by_text("best-candidates", exact=False).first.wait_for(timeout=60_000)
            page.screenshot(path=str(shot), full_page=True)
            browser.close()
    finally:
        _arl(["ui", "--stop"], env, timeout=60)
    assert shot.exists() and shot.stat().st_size > 10_000
    artifacts_dir = os.environ.get("ARL_TEST_ARTIFACTS")
    if artifacts_dir:
        Path(artifacts_dir).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(artifacts_dir) / shot.name)
