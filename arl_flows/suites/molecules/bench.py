"""``arl bench`` (added by the molecules suite): the benchmark commands of ARL's source checkout, where there is one.

The commands, their options and their harnesses live in the checkout's
``benchmarks`` package (``benchmarks/cli.py``), which the wheel does not ship.
Where that package imports (tests, ``python -m``, ``PYTHONPATH``) its app is
``arl bench``. The console script of an editable install does not have the
checkout on its import path, so the checkout is found from pip's record of
that install (``direct_url.json``, PEP 610). Anywhere else every ``arl bench``
invocation, ``--help`` included, says in one line what it needs.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import typer
from typer.core import TyperGroup

from arl_flows.cli._common import UserError

__all__ = ["NEEDS_CHECKOUT", "bench_app"]

NEEDS_CHECKOUT = (
    "arl bench needs ARL's source checkout (its benchmarks package is not in the wheel): "
    "clone the repository and run it from an editable install (pip install -e .)"
)


def _editable_checkout() -> Path | None:
    """The folder ARL was installed from in editable mode, if it holds the ``benchmarks`` package."""
    try:
        record = distribution("arl").read_text("direct_url.json")
    except PackageNotFoundError:
        return None
    if not record:
        return None
    origin = json.loads(record)
    if not origin.get("dir_info", {}).get("editable"):
        return None  # a wheel or an archive: no checkout beside it
    url = urlparse(origin.get("url", ""))
    checkout = Path(unquote(url.path)) if url.scheme == "file" else None
    return checkout if checkout is not None and (checkout / "benchmarks" / "cli.py").is_file() else None


def _checkout_app() -> typer.Typer | None:
    """``benchmarks.cli``'s app, from the import path or the editable install's checkout; None without a checkout."""
    if importlib.util.find_spec("benchmarks") is None:
        checkout = _editable_checkout()
        if checkout is None:
            return None
        sys.path.append(str(checkout))
    try:
        module = importlib.import_module("benchmarks.cli")
    except ModuleNotFoundError as exc:
        if exc.name in ("benchmarks", "benchmarks.cli"):  # another project's top-level ``benchmarks``
            return None
        raise
    return module.bench_app


class _NeedsCheckout(TyperGroup):
    """``arl bench`` without the checkout: whatever follows it, the one line of what it needs."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        raise UserError(NEEDS_CHECKOUT)


_found = _checkout_app()
bench_app = _found if _found is not None else typer.Typer(
    cls=_NeedsCheckout, help="Benchmarks on the molecule ladder; they need ARL's source checkout (not in the wheel).",
)
