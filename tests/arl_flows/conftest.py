"""One Prefect test harness per session, one small pretrained prior shared by all flow tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.tiny_prior import install_tiny_prior, quick_overrides


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[str]:
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    # 120 s timed out at a load of 10 (five tests of one worker errored in a CI run beside other jobs).
    with prefect_test_harness(server_startup_timeout=300):
        yield str(PREFECT_API_URL.value())


@pytest.fixture(scope="session")
def session_arl_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ARL home with the tiny prior (:mod:`tests.helpers.tiny_prior`), shared by the session's flow tests."""
    return install_tiny_prior(tmp_path_factory.mktemp("arl_flows_home"))


@pytest.fixture
def flow_home(session_arl_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ARL_HOME", str(session_arl_home))
    return session_arl_home


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
