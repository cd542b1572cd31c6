"""Verifier registry: explicit registration, three ways.

1. ``@register_verifier`` on a class (records it when its module is imported).
2. The entry point group ``arl.verifiers``: how every suite's tiers are found,
   the built-in suites' included (see ``pyproject.toml``), so that the core
   names no suite.
3. A ``"module:Class"`` reference in a run config.

An import failure is an error that names the reference; nothing is skipped
silently. An entry point that does not load (its package moved or deleted) is
warned about in one line and recorded as broken (``verifiers.plugins``): other
verifiers still work, and naming it is an error that says how to fix it.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from importlib.metadata import entry_points
from typing import Any

from pydantic import ConfigDict, ValidationError

from storage.records import Tier, tier_rank
from verifiers.base import Verifier
from verifiers.plugins import BrokenPlugin, broken_message, broken_plugins, load_plugin

__all__ = [
    "ENTRY_POINT_GROUP",
    "VerifierNotFound",
    "VerifierRegistry",
    "register_verifier",
    "registry",
]

ENTRY_POINT_GROUP = "arl.verifiers"


class VerifierNotFound(LookupError):
    pass


class VerifierRegistry:
    """Name -> verifier class, with where each came from."""

    def __init__(self) -> None:
        self._classes: dict[str, type[Verifier[Any]]] = {}
        self._entry_points_loaded = False

    def register(self, cls: type[Verifier[Any]], origin: str = "built-in") -> type[Verifier[Any]]:
        for attr in ("name", "tier", "version"):
            if not getattr(cls, attr, None):
                raise TypeError(f"verifier class {cls.__qualname__} must define class attribute {attr!r}")
        if not isinstance(cls.tier, Tier):
            try:
                cls.tier = Tier(cls.tier)
            except ValueError:
                raise TypeError(f"verifier class {cls.__qualname__}: tier {cls.tier!r} is not a tier; use one of "
                                f"{', '.join(t.value for t in Tier)}") from None
        if inspect.isabstract(cls):
            raise TypeError(f"verifier class {cls.__qualname__} must implement "
                            f"{', '.join(sorted(cls.__abstractmethods__))} (see verifiers.Verifier)")
        _check_params_defaults(cls)
        cls.check_definition()
        existing = self._classes.get(cls.name)
        if existing is not None and existing is not cls:
            same = f"{existing.__module__}.{existing.__qualname__}" == f"{cls.__module__}.{cls.__qualname__}"
            if not same:
                raise ValueError(
                    f"verifier name {cls.name!r} is already registered by "
                    f"{existing.__module__}.{existing.__qualname__}; pick another name"
                )
        cls.origin = origin
        self._classes[cls.name] = cls
        return cls

    def load_entry_points(self) -> None:
        """Register every class advertised in the ``arl.verifiers`` entry point group."""
        if self._entry_points_loaded:
            return
        self._entry_points_loaded = True
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            load_plugin(ep, check=lambda cls, ep=ep: self._register_entry_point(cls, ep))

    def _register_entry_point(self, cls: Any, ep: Any) -> None:
        if not (isinstance(cls, type) and issubclass(cls, Verifier)):
            raise TypeError(f"{ep.value!r} is not a subclass of verifiers.Verifier")
        self.register(cls, origin=_origin(ep))

    def load_reference(self, ref: str) -> type[Verifier[Any]]:
        """Import and register a ``module:Class`` reference from a run config."""
        module_name, sep, attr = ref.partition(":")
        if not sep or not module_name or not attr:
            raise ValueError(f"verifier reference {ref!r} must look like 'package.module:ClassName'")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ImportError(f"cannot import module {module_name!r} of verifier reference {ref!r}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - the user's module failed while it ran: their code, one line
            raise ImportError(
                f"cannot import module {module_name!r} of verifier reference {ref!r}: {type(exc).__name__}: "
                f"{' '.join(str(exc.msg if isinstance(exc, SyntaxError) else exc).split())[:200]}{_where(exc)}"
            ) from exc
        try:
            cls = getattr(module, attr)
        except AttributeError:
            raise ImportError(f"module {module_name!r} has no attribute {attr!r} (verifier reference {ref!r})") from None
        if not (isinstance(cls, type) and issubclass(cls, Verifier)):
            raise TypeError(f"{ref!r} is not a subclass of verifiers.Verifier")
        if cls.name in self._classes and self._classes[cls.name] is cls:
            return cls
        return self.register(cls, origin="config")

    def get(self, name: str) -> type[Verifier[Any]]:
        self._ensure_loaded()
        if ":" in name and name not in self._classes:
            return self.load_reference(name)
        try:
            return self._classes[name]
        except KeyError:
            broken = broken_message(ENTRY_POINT_GROUP, name)
            if broken is not None:
                raise VerifierNotFound(f"verifier {name!r} is broken: {broken}") from None
            known = ", ".join(sorted(self._classes)) or "none"
            hint = ("; a class of your own is named 'package.module:ClassName' in a config (or installed as an "
                    "arl.verifiers entry point)")
            module, dot, attr = name.rpartition(".")
            if dot and module and attr[:1].isupper():
                hint = f"; did you mean {module + ':' + attr!r} (a class is named 'package.module:ClassName')"
            close = difflib.get_close_matches(name, list(self._classes), n=1, cutoff=0.75)
            if close:
                hint = f"; did you mean {close[0]!r}"
            raise VerifierNotFound(f"no verifier named {name!r}{hint}; registered: {known}") from None

    def create(self, name: str, params: dict[str, Any] | None = None) -> Verifier[Any]:
        return self.get(name)(params)

    def for_suite(self, suite: str) -> list[type[Verifier[Any]]]:
        """Verifier classes of one suite, cheapest tier first."""
        self._ensure_loaded()
        classes = [c for c in self._classes.values() if getattr(c, "suite", None) in (suite, None)]
        return sorted(classes, key=lambda c: (tier_rank(c.tier), c.name))

    def broken(self) -> list[BrokenPlugin]:
        """Entry points of the ``arl.verifiers`` group that did not load (shown as broken by ``arl tiers list``)."""
        self._ensure_loaded()
        return broken_plugins(ENTRY_POINT_GROUP)

    def __iter__(self) -> Iterator[type[Verifier[Any]]]:
        self._ensure_loaded()
        return iter(sorted(self._classes.values(), key=lambda c: (getattr(c, "suite", "") or "", tier_rank(c.tier), c.name)))

    def __contains__(self, name: object) -> bool:
        self._ensure_loaded()
        return name in self._classes

    def _ensure_loaded(self) -> None:
        self.load_entry_points()


def _check_params_defaults(cls: type[Verifier[Any]]) -> None:
    """A ``Params`` whose defaults its own fields refuse ("abc" for a float, -3 for ``ge=1``) is the class's error.

    pydantic does not validate defaults, so without this the class would register and fail at its first verdict.
    The defaults are validated as pydantic would with ``validate_default`` (no dump and reload, which aliases,
    computed fields and serializers would not survive).
    """
    params = getattr(cls, "Params", None)
    if params is None:
        return
    try:
        params()
    except ValidationError:
        return  # a required field without a default: a run's config must give it, and is checked then
    except Exception as exc:  # noqa: BLE001 - the class's own code (a default_factory, a validator) failed
        raise TypeError(f"verifier class {cls.__qualname__}: {params.__name__}() fails: {type(exc).__name__}: "
                        f"{' '.join(str(exc).split())[:200]}") from None
    try:
        strict = type(params.__name__, (params,), {"model_config": ConfigDict(**{**params.model_config, "validate_default": True})})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            strict()
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise TypeError(
            f"verifier class {cls.__qualname__}: the default of {params.__name__}.{field} ({err.get('input')!r:.60}) "
            f"fails its own check: {err['msg']}"
        ) from None
    except Exception:  # noqa: BLE001 - a model that cannot be subclassed this way: its defaults are left unchecked
        return


_ARL_PACKAGES = tuple(str(Path(__file__).resolve().parents[1] / name) for name in ("verifiers", "arl_flows", "storage", "policies"))


def _where(exc: BaseException) -> str:
    """' (file:line)' of the user's code that raised ``exc`` (a SyntaxError's own position), else ''.

    The last frame outside importlib and ARL's own packages: a check ARL runs on the user's class (at its
    ``@register_verifier``) is raised in ARL's code, but the line to fix is the user's.
    """
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" ({exc.filename}:{exc.lineno})"
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "importlib" not in f.filename and "<frozen" not in f.filename and not f.filename.startswith(_ARL_PACKAGES)]
    return f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def _origin(ep: Any) -> str:
    """'built-in' for the entry points ARL's own distribution declares, else 'entry point'."""
    dist = getattr(ep, "dist", None)
    return "built-in" if dist is not None and dist.name == "arl" else "entry point"


registry = VerifierRegistry()


def register_verifier(cls: type[Verifier[Any]]) -> type[Verifier[Any]]:
    """Class decorator: record a verifier in the global registry."""
    return registry.register(cls, origin="built-in")
