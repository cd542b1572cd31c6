"""Fixtures of the benchmark tests: the tiny prior's ARL home, a small run's overrides, synthetic ladders.

The same fixtures as the flow tests' (``tests/arl_flows/conftest.py``) and the scheduler tests'
(``tests/verifiers/scheduler/conftest.py``), built on the same helpers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.synthetic_ladder import SyntheticTier, make_ladder, make_pool
from tests.helpers.tiny_prior import install_tiny_prior, quick_overrides
from verifiers.base import Candidate


@pytest.fixture(scope="session")
def session_arl_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ARL home with the tiny prior (:mod:`tests.helpers.tiny_prior`), shared by the session's benchmark runs."""
    return install_tiny_prior(tmp_path_factory.mktemp("bench_home"))


@pytest.fixture
def flow_home(session_arl_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ARL_HOME", str(session_arl_home))
    return session_arl_home


@pytest.fixture
def overrides():  # noqa: ANN201
    """Factory of run-config overrides for a small, fast run (see quick_overrides)."""
    return quick_overrides


@pytest.fixture
def ladder_factory() -> Callable[..., list[SyntheticTier]]:
    return make_ladder


@pytest.fixture
def pool_factory() -> Callable[..., tuple[list[Candidate], dict[str, float]]]:
    return make_pool
