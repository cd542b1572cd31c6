"""Loading entry points of installed plugins, so that one broken plugin breaks only what names it.

A plugin is an entry point of some installed distribution (``arl.suites``,
``arl.verifiers``). An editable package that was moved or deleted still
leaves its entry points behind; loading one then fails. Such a plugin is
recorded as a :class:`BrokenPlugin` and reported in one warning line on
stderr (once per process) naming the distribution, the entry point and the
fix. Everything that does not need it keeps working; whatever names it (a run
config, ``arl tiers show``) gets one error line from :func:`broken_message`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from typing import Any

__all__ = ["BrokenPlugin", "broken_message", "broken_plugins", "load_plugin"]


@dataclass(frozen=True)
class BrokenPlugin:
    """An entry point that did not load: where it comes from and why it failed."""

    group: str
    name: str
    value: str
    distribution: str
    error: str

    @property
    def fix(self) -> str:
        return f"fix it or `pip uninstall {self.distribution}`"

    def line(self) -> str:
        """The one-line description used by the warning and by errors about this plugin."""
        return (
            f"plugin {self.name!r} (entry point {self.group}:{self.name} = {self.value} of distribution "
            f"{self.distribution!r}) does not import: {self.error}; {self.fix}"
        )


_broken: dict[tuple[str, str], BrokenPlugin] = {}


def load_plugin(ep: EntryPoint, check: Callable[[Any], None] | None = None) -> Any | None:
    """The object ``ep`` names (checked by ``check``, which raises on a bad one), or None when it is broken.

    A broken entry point is recorded (:func:`broken_plugins`) and warned about
    on stderr in one line, once per process.
    """
    try:
        obj = ep.load()
        if check is not None:
            check(obj)
    except Exception as exc:  # noqa: BLE001 - any failure of someone else's package makes that plugin broken, not ARL
        dist = getattr(ep, "dist", None)
        record = BrokenPlugin(
            group=ep.group,
            name=ep.name,
            value=ep.value,
            distribution=getattr(dist, "name", None) or "unknown",
            error=" ".join(f"{type(exc).__name__}: {exc}".split())[:300],
        )
        key = (ep.group, ep.name)
        if key not in _broken:
            _broken[key] = record
            print(f"warning: {record.line()}", file=sys.stderr)
        return None
    _broken.pop((ep.group, ep.name), None)
    return obj


def broken_plugins(group: str | None = None) -> list[BrokenPlugin]:
    """The plugins found broken so far in this process (of one entry point group, or all), by name."""
    return sorted((b for b in _broken.values() if group in (None, b.group)), key=lambda b: (b.group, b.name))


def broken_message(group: str, name: str) -> str | None:
    """Why plugin ``name`` of ``group`` is broken and how to fix it (one line), or None if it is not broken."""
    record = _broken.get((group, name))
    if record is None:
        return None
    return (
        f"entry point {group}:{name} of distribution {record.distribution!r} does not import ({record.error}); "
        f"{record.fix}"
    )
