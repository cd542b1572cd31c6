"""The benchmarks' own environment settings, read apart from the product's (``storage.settings``).

Each field ``name`` is read from ``ARL_BENCH_NAME`` at each call, as the
product reads its ``ARL_*`` variables; a bad value is one line naming the
variable.
"""

from __future__ import annotations

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["BenchSettings", "bench_settings"]


class BenchSettings(BaseSettings):
    """Environment settings of the benchmark harnesses; each field ``name`` is read from ``ARL_BENCH_NAME``."""

    model_config = SettingsConfigDict(env_prefix="ARL_BENCH_", env_ignore_empty=True, extra="ignore", frozen=True)

    torch_threads: int = Field(
        default=1,
        ge=1,
        description="torch threads of `arl bench learning` and `arl bench pipeline` (the verifiers' workers use the other cores).",
    )


def bench_settings() -> BenchSettings:
    """The settings as the environment says now (a bad value: one ValueError line naming the variable)."""
    try:
        return BenchSettings()
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "ARL_BENCH_" + str(first["loc"][0]).upper() if first.get("loc") else "an ARL_BENCH_* variable"
        raise ValueError(f"{name}: {first['msg']} (got {first.get('input')!r}); fix or unset it") from None
