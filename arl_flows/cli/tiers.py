"""``arl tiers``: what verifiers are registered, and what parameters they take."""

from __future__ import annotations

import json
from typing import Any

import typer
from pydantic import BaseModel
from rich.table import Table

from arl_flows.cli._common import UserError, app, console, cost_text, print_json, shown

# Command bodies import what they run (the ledger, the flows, Prefect, the suites' heavy parts) when they
# run, so that `arl --help` loads none of it.

tiers_app = typer.Typer(help="Registered verifier tiers (built-in, entry points, config references).", no_args_is_help=True)
app.add_typer(tiers_app, name="tiers")


def _registry():  # noqa: ANN202 - imported lazily so `arl --help` stays fast
    from verifiers import registry

    return registry


def _describe(cls: Any) -> dict[str, Any]:
    return {
        "name": cls.name,
        "suite": cls.suite,
        "tier": str(cls.tier),
        "version": cls.version,
        "cost_model": cls.cost_model.model_dump(),
        "cost": cost_text(cls.cost_model, short=True),
        "origin": cls.origin,
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "description": cls.description or (cls.__doc__ or "").strip().split("\n")[0],
        "status": "ok",
    }


def _describe_broken(plugin: Any) -> dict[str, Any]:
    """A tier entry point that did not load: what is known of it, and the fix."""
    return {
        "name": plugin.name, "suite": "-", "tier": "-", "version": "-", "cost_model": None, "cost": "-",
        "origin": "broken", "class": plugin.value, "description": f"does not import: {plugin.error}; {plugin.fix}", "status": "broken",
        "distribution": plugin.distribution, "error": plugin.error,
    }


@tiers_app.command("list")
def list_tiers(
    suite: str | None = typer.Option(None, "--suite", help="Only verifiers of this suite."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List every registered verifier: name, suite, tier, version, cost model, origin ('broken': its plugin does not import)."""
    registry = _registry()
    classes = registry.for_suite(suite) if suite else list(registry)
    rows = [_describe(cls) for cls in classes]
    if not suite:
        rows += [_describe_broken(plugin) for plugin in registry.broken()]
    if suite and not rows:
        suites = sorted({str(cls.suite) for cls in registry if cls.suite})
        raise UserError(f"no verifiers of suite {suite[:100]!r}; suites with verifiers: {', '.join(suites)}")
    if as_json:
        print_json(rows)
        return
    table = Table(title="verifier tiers (cost: CPU-seconds, n = size, e.g. heavy atoms)")
    columns = ("name", "suite", "tier", "version", "cost", "origin")  # descriptions: --json or `tiers show`
    for column in columns:
        table.add_column(column, no_wrap=column in ("name", "tier"))
    for row in rows:
        table.add_row(*(shown(row[c]) if row[c] is not None else "any" for c in columns))
    console.print(table)


def _type_text(annotation: Any) -> str:
    """A field's type as a reader writes it: ``float``, ``int | None``, ``Literal['mmff', 'xtb']``."""
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("pathlib.", "")


def _param_rows(model: Any, values: dict[str, Any], prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(name, type, default, description) per parameter; a nested params model's fields are listed as ``outer.inner``."""
    rows = []
    for name, field in model.model_fields.items():
        annotation, value = field.annotation, values.get(name)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) and isinstance(value, dict):
            rows += _param_rows(annotation, value, f"{prefix}{name}.")
            continue
        rows.append((f"{prefix}{name}", _type_text(annotation), json.dumps(value, default=str), field.description or ""))
    return rows


@tiers_app.command("show")
def show_tier(
    name: str = typer.Argument(..., help="Verifier name, or a 'package.module:Class' reference."),
    as_json: bool = typer.Option(False, "--json/--no-json", help="Print metadata and the params JSON schema instead of tables."),
) -> None:
    """Show one verifier's metadata and a table of its params (name, type, default, description)."""
    from verifiers import VerifierNotFound

    try:
        cls = _registry().get(name)
    except VerifierNotFound as exc:
        raise UserError(str(exc)) from None
    except (ImportError, TypeError, ValueError) as exc:
        raise UserError(str(exc)) from None
    data = _describe(cls)
    defaults = cls.Params().model_dump(mode="json")
    if as_json:
        print_json(data | {"params_schema": cls.Params.model_json_schema(), "default_params": defaults})
        return
    about = Table(title=f"verifier {shown(cls.name)}", show_header=False)
    about.add_column("field", no_wrap=True)
    about.add_column("value", overflow="fold")
    for key in ("suite", "tier", "version", "cost", "origin", "class", "description"):
        about.add_row(key, shown(data[key]) if data[key] is not None else "any")
    console.print(about)
    params = Table(title="params (set them in a run config's tiers entry; --json for the JSON schema)")
    for column in ("name", "type", "default"):
        params.add_column(column, overflow="fold")
    params.add_column("description", overflow="fold")
    for row in _param_rows(cls.Params, defaults):
        params.add_row(*(shown(cell, 300) for cell in row))
    console.print(params)
