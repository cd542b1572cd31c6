"""``arl config show``: the run config a run would use, resolved (the suite's defaults, the profile, the file)."""

from __future__ import annotations

import math
from enum import Enum
from pathlib import Path
from typing import Any

import typer

from arl_flows.cli._common import UserError, app

# Command bodies import what they run (the ledger, the flows, Prefect, the suites' heavy parts) when they
# run, so that `arl --help` loads none of it.

config_app = typer.Typer(help="Run configs: print the one a run would use.", no_args_is_help=True)
app.add_typer(config_app, name="config")


def resolved_toml(cfg: Any) -> str:
    """A run config as TOML that ``arl run --config`` reads back to the same config (None fields left out)."""
    import tomli_w

    data = cfg.model_dump(mode="python", exclude={"options"})
    data["options"] = cfg.suite_options.model_dump(mode="python")
    if data.get("objective") is not None:
        data["scheduler"].pop("reward", None)  # the run config declares the reward once, in [objective]
    return tomli_w.dumps(_toml_data(data))


def _toml_data(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _toml_data(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_toml_data(v) for v in value if v is not None]
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


@config_app.command("show")
def show(
    config: Path | None = typer.Option(None, "--config", "-c", help="Run config (TOML); default: the built-in one."),
    profile: str = typer.Option("default", "--profile", help="A profile of the suite ('quick' for molecules)."),
) -> None:
    """Print the resolved run config as TOML: the file's sections merged over the suite's defaults, then the profile."""
    from arl_flows.config import ConfigError, load_config

    try:
        cfg = load_config(config, profile)
    except ConfigError as exc:
        raise UserError(str(exc)) from None
    source = str(config) if config else "the built-in default config"
    print(f"# resolved from {source} (suite {cfg.suite!r}, profile {profile!r}); every field: examples/*.toml")
    print(resolved_toml(cfg), end="")
