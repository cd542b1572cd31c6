"""Fixtures of the scheduler tests: synthetic ladders (:mod:`tests.helpers.synthetic_ladder`)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.helpers.synthetic_ladder import SyntheticTier, make_ladder, make_pool
from verifiers.base import Candidate


@pytest.fixture
def ladder_factory() -> Callable[..., list[SyntheticTier]]:
    return make_ladder


@pytest.fixture
def pool_factory() -> Callable[..., tuple[list[Candidate], dict[str, float]]]:
    return make_pool
