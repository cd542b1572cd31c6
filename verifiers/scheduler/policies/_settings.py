"""The registry of policies' own settings models (``NAME_settings.py`` next to a policy's file).

Apart from the policy registry because ``SchedulerConfig`` reads it while it is
defined: a settings module imports only pydantic and this registry, never the
scheduler, so reading the settings imports no policy.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from pydantic import BaseModel

__all__ = ["register_settings", "settings_models"]

_SETTINGS: list[type[BaseModel]] = []
SUFFIX = "_settings"


def register_settings(cls: type[BaseModel]) -> type[BaseModel]:
    """Class decorator: a policy's settings model, whose fields become ``SchedulerConfig``'s."""
    if cls not in _SETTINGS:
        _SETTINGS.append(cls)
    return cls


def settings_models() -> tuple[type[BaseModel], ...]:
    """Every policy's settings model: each ``*_settings`` module of this folder, imported by name order."""
    package = __name__.rpartition(".")[0]
    for module in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
        if module.name.endswith(SUFFIX):
            importlib.import_module(f"{package}.{module.name}")
    return tuple(_SETTINGS)
