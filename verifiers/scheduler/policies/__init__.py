"""Escalation policies, one file each, registered by name.

Adding a policy is one file in this folder: a subclass of
:class:`verifiers.scheduler.escalation.EscalationPolicy` with a ``name``,
decorated with :func:`register_policy`. Every module here is imported when
the registry is first read, so the new name is known to ``SchedulerConfig``
(a run config naming an unknown policy fails at load, listing these).
A policy with settings of its own adds ``NAME_settings.py``: a pydantic model
decorated with :func:`register_settings`, whose fields ``SchedulerConfig``
takes as its own (``voi_settings.py``).
Baselines that need what a run does not have (the true values, thresholds
tuned on labelled data) are not registered: the benchmarks build them and
pass them to the ``Scheduler`` as instances (``benchmarks/baselines.py``).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from verifiers.scheduler.escalation import EscalationPolicy
from verifiers.scheduler.policies._settings import register_settings, settings_models

__all__ = ["make_policy", "policy_class", "policy_names", "register_policy", "register_settings", "settings_models"]

_POLICIES: dict[str, type[EscalationPolicy]] = {}
_loaded = False


def register_policy(cls: type[EscalationPolicy]) -> type[EscalationPolicy]:
    """Class decorator: record a policy under its ``name``."""
    name = getattr(cls, "name", "")
    if not name:
        raise TypeError(f"escalation policy {cls.__qualname__} must set the class attribute 'name'")
    existing = _POLICIES.get(name)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        raise ValueError(f"scheduler policy name {name!r} is taken by {existing.__module__}.{existing.__qualname__}")
    _POLICIES[name] = cls
    return cls


def _load() -> dict[str, type[EscalationPolicy]]:
    global _loaded
    if not _loaded:
        for module in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{module.name}")
        _loaded = True
    return _POLICIES


def policy_names() -> list[str]:
    """Every registered policy name, sorted."""
    return sorted(_load())


def policy_class(name: str) -> type[EscalationPolicy]:
    """The policy class registered as ``name``; an unknown name lists the known ones."""
    policies = _load()
    if name not in policies:
        raise ValueError(f"unknown scheduler policy {name!r}; known: {', '.join(sorted(policies))}")
    return policies[name]


def make_policy(name: str, config: Any) -> EscalationPolicy:
    """Build the policy registered as ``name`` for a scheduler config."""
    return policy_class(name).build(config)
