"""The ``arl`` command line.

Each command group lives in its own module and registers itself on ``app``;
:mod:`arl_flows.cli.entry` imports them all, adds the installed suites' groups
and defines ``main``. Importing this package runs none of that: the names below
load ``entry`` when first used (PEP 562), so a module that needs only the shared
objects (``arl_flows.cli._common``) gets them without the whole app, and a
suite's command module, imported while ``entry`` looks the suites up, does not
import the half-built app back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from arl_flows.cli.entry import CORE_PANEL, UserError, app, console, main

__all__ = ["CORE_PANEL", "UserError", "app", "console", "main"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from arl_flows.cli import entry

    value = getattr(entry, name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
