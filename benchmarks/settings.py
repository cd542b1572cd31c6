"""The benchmarks' own environment settings, read apart from the product's (``storage.settings``).

Each field ``name`` is read from ``ARL_BENCH_NAME`` at each call, as the
product reads its ``ARL_*`` variables; a bad value is one line naming the
variable.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from storage.settings import read_settings

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
    return read_settings(BenchSettings)
