"""Scheduler settings for tests that score molecules: the window a ``SchedulerConfig`` gets from no default of its own.

The core's scheduler has no default target window (a window is a property of a
problem); the molecules suite supplies 3-4 eV in its defaults. Tests and
benchmarks that build a ``SchedulerConfig`` by hand pass that window
explicitly through :func:`gap_window_config`.
"""

from __future__ import annotations

from typing import Any

from arl_flows.suites.molecules.suite import MoleculeSuite
from verifiers.scheduler import SchedulerConfig

__all__ = ["GAP_WINDOW", "gap_window_config"]

GAP_WINDOW: dict[str, float] = {
    key: MoleculeSuite.defaults["scheduler"][key] for key in ("target_low", "target_high")
}
"""The molecules suite's default target window of the HOMO-LUMO gap (eV), as ``SchedulerConfig`` fields."""


def gap_window_config(**fields: Any) -> SchedulerConfig:
    """A ``SchedulerConfig`` with the molecules suite's gap window and ``fields`` (which may give their own window)."""
    return SchedulerConfig(**{**GAP_WINDOW, **fields})
