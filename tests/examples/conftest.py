"""The example packages under ``examples/``, importable by the tests of their modules."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example_on_path(folder: str, package: str) -> Iterator[Path]:
    """``examples/<folder>`` on ``sys.path`` until the generator closes, then off again with ``package`` unimported."""
    root = EXAMPLES / folder
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(root))
        try:
            yield root
        finally:
            for name in [m for m in sys.modules if m == package or m.startswith(f"{package}.")]:
                del sys.modules[name]


@pytest.fixture(scope="module")
def math_suite_on_path() -> Iterator[Path]:
    """``examples/math_suite`` on ``sys.path`` for this module (as ``pip install -e`` would put it), then off again."""
    yield from _example_on_path("math_suite", "arl_math")


@pytest.fixture(scope="module")
def custom_tier_on_path() -> Iterator[Path]:
    """``examples/custom_tier`` on ``sys.path`` for this module, then off again."""
    yield from _example_on_path("custom_tier", "arl_custom_tier")
