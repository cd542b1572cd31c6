"""``arl tiers``: what verifiers are registered, and what parameters they take."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.table import Table

from arl_flows.cli import app
from arl_flows.cli._common import UserError, console, print_json, shown

tiers_app = typer.Typer(help="Registered verifier tiers (built-in, entry points, config references).", no_args_is_help=True)
app.add_typer(tiers_app, name="tiers")


def _registry():  # noqa: ANN202 - imported lazily so `arl --help` stays fast
    from verifiers import registry

    return registry


def _cost_text(cost: Any) -> str:
    text = f"{cost.base:.3g}"
    if cost.per_unit:
        size = "n" if cost.exponent == 1 else f"n^{cost.exponent:g}"
        text += f"+{cost.per_unit:.2g}*{size}"
    return text


def _describe(cls: Any) -> dict[str, Any]:
    return {
        "name": cls.name,
        "suite": cls.suite,
        "tier": str(cls.tier),
        "version": cls.version,
        "cost_model": cls.cost_model.model_dump(),
        "cost": _cost_text(cls.cost_model),
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


@tiers_app.command("show")
def show_tier(
    name: str = typer.Argument(..., help="Verifier name, or a 'package.module:Class' reference."),
    as_json: bool = typer.Option(True, "--json/--no-json", help="Print the params JSON schema (default)."),
) -> None:
    """Show one verifier's metadata and the JSON schema of its params."""
    from verifiers import VerifierNotFound

    try:
        cls = _registry().get(name)
    except VerifierNotFound as exc:
        raise UserError(str(exc)) from None
    except (ImportError, TypeError, ValueError) as exc:
        raise UserError(str(exc)) from None
    data = _describe(cls)
    data["params_schema"] = cls.Params.model_json_schema()
    data["default_params"] = cls.Params().model_dump(mode="json")
    if as_json:
        print_json(data)
    else:
        console.print(json.dumps(data, indent=2, default=str), highlight=False, markup=False)
