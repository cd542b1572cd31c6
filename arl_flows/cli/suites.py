"""``arl suites``: the problems ARL can train on (built-in, from installed packages, or a module:Class reference).

:func:`add_suite_commands` adds each installed suite's own command groups to
``arl`` (the molecules suite's ``arl prior``, the code suite's ``arl tasks``);
:mod:`arl_flows.cli.entry` calls it once the core's groups are in. A suite that fails to import does not break the CLI: it is warned about in
one line, ``arl suites list`` shows it as broken, and only what names it fails.
"""

from __future__ import annotations

from typing import Any

import typer

from arl_flows.cli._common import UserError, app, console, print_json, shown
from arl_flows.suites.capabilities import suite_commands, suite_profiles

# Command bodies import what they run (the ledger, the flows, Prefect, the suites' heavy parts) when they
# run, so that `arl --help` loads none of it.

suites_app = typer.Typer(help="Suites: one plugin per problem (prompts, ladder, objective, policy).", no_args_is_help=True)
app.add_typer(suites_app, name="suites")


def _describe(cls: Any) -> dict[str, Any]:
    from arl_flows.suites import suite_origin

    options = cls.Options()
    tiers = cls.defaults.get("tiers", [])
    scheduler = cls.defaults.get("scheduler", {})
    return {
        "name": cls.name,
        "description": cls.description,
        "origin": suite_origin(cls),
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "tiers": [t["verifier"] if isinstance(t, dict) else str(t) for t in tiers],
        "objective": cls.defaults.get("objective") or _window(scheduler),
        "prompts": cls.prompts_source(options),
        "needs_policy_path": cls.needs_policy_path,
        "profiles": ["default", *suite_profiles(cls)],
        "commands": [name for name, _ in suite_commands(cls)],
        "options": {
            name: {"default": _jsonable(getattr(options, name)), "description": field.description or ""}
            for name, field in cls.Options.model_fields.items()
        },
    }


def _window(scheduler: dict[str, Any]) -> dict[str, Any]:
    if "target_low" not in scheduler:
        return {}
    return {
        "kind": "window",
        "low": scheduler["target_low"],
        "high": scheduler["target_high"],
        "softness": scheduler.get("window_softness", 0.0),
    }


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


def _describe_broken(plugin: Any) -> dict[str, Any]:
    """A suite entry point that did not load: what is known of it, and the fix."""
    return {
        "name": plugin.name, "description": f"does not import: {plugin.error}; {plugin.fix}", "origin": "broken", "class": plugin.value, "tiers": [],
        "status": "broken", "distribution": plugin.distribution, "error": plugin.error,
    }


@suites_app.command("list")
def list_suites(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Every installed suite: name, origin ('broken': its plugin does not import), ladder, description."""
    from arl_flows.suites import broken_suites, suite_classes

    rows = [_describe(cls) | {"status": "ok"} for cls in suite_classes().values()]
    rows += [_describe_broken(plugin) for plugin in broken_suites()]
    if as_json:
        print_json(rows)
        return
    from rich.table import Table

    table = Table(title=f"{len(rows)} suites (`arl suites show NAME` for options)")
    for column in ("name", "origin", "tiers", "description"):
        table.add_column(column)
    for r in rows:
        table.add_row(shown(r["name"]), r["origin"], shown(" -> ".join(r["tiers"])), shown(r["description"]))
    console.print(table)


@suites_app.command("show")
def show_suite(
    name: str = typer.Argument(..., help="Suite name, or a 'package.module:Class' reference."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """One suite: its tiers, objective, prompts source, options, origin."""
    from arl_flows.suites import SuiteNotFound, get_suite

    try:
        cls = get_suite(name)
    except (SuiteNotFound, ImportError, ValueError) as exc:
        raise UserError(" ".join(str(exc).split())) from None
    info = _describe(cls)
    if as_json:
        print_json(info)
        return
    console.print(f"[bold]{shown(info['name'])}[/bold] ({info['origin']}, {shown(info['class'])})")
    console.print(shown(info["description"]))
    console.print(f"tiers: {shown(' -> '.join(info['tiers']))}")
    objective = info["objective"]
    console.print("objective: " + (shown(", ".join(f"{k}={v}" for k, v in objective.items())) if objective else "the scheduler's default"))
    console.print(f"prompts: {shown(info['prompts'])}")
    console.print(f"policy: {'policy_path (a local model) is required' if info['needs_policy_path'] else 'ships with the suite'}")
    console.print(f"profiles: {', '.join(map(shown, info['profiles']))}")
    if info["commands"]:
        console.print(f"commands: {', '.join('arl ' + shown(c) for c in info['commands'])}")
    from rich.table import Table

    table = Table(title="[options]")
    for column in ("option", "default", "description"):
        table.add_column(column)
    for opt, meta in info["options"].items():
        table.add_row(shown(opt), shown(str(meta["default"]), 80), shown(meta["description"]))
    console.print(table)


def suite_panel(suite: str) -> str:
    """The ``arl --help`` panel of a suite's commands, e.g. "Molecules suite"; the core's are under "Core"."""
    return f"{suite.capitalize()} suite"


def add_suite_commands() -> None:
    """Add each installed suite's command groups to ``app`` under its panel; call it after the core's groups."""
    from arl_flows.suites import suite_classes

    found = suite_classes()  # a suite that does not import is warned about and left out
    taken = {group.name for group in app.registered_groups} | {c.name for c in app.registered_commands}
    for cls in found.values():
        for name, sub in suite_commands(cls):
            if name not in taken:  # a suite cannot shadow a core command or another suite's
                app.add_typer(sub, name=name, rich_help_panel=suite_panel(cls.name))
                taken.add(name)
