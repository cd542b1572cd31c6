"""The example packages under ``examples/``, importable by the tests of their modules."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def math_suite_on_path() -> Iterator[Path]:
    """``examples/math_suite`` on ``sys.path`` for this module (as ``pip install -e`` would put it), then off again."""
    root = EXAMPLES / "math_suite"
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(root))
        try:
            yield root
        finally:
            for name in [m for m in sys.modules if m == "arl_math" or m.startswith("arl_math.")]:
                del sys.modules[name]


@pytest.fixture(scope="module")
def custom_tier_on_path() -> Iterator[Path]:
    """``examples/custom_tier`` on ``sys.path`` for this module, then off again."""
    root = EXAMPLES / "custom_tier"
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(root))
        try:
            yield root
        finally:
            for name in [m for m in sys.modules if m == "arl_custom_tier" or m.startswith("arl_custom_tier.")]:
                del sys.modules[name]
