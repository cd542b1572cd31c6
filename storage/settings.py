"""ARL's settings from the environment, read in one place (variables ``ARL_*``).

Every package reads ``ARL_HOME`` and the other variables through
:func:`settings`, never through ``os.environ``. It builds a fresh
:class:`Settings` on each call rather than caching one at import, so a test
(or a harness) that sets ``ARL_HOME`` after import is obeyed; building one
costs microseconds. The module lives in ``storage`` because every package may
import ``storage`` and ``storage`` imports nothing of ours; it needs only
pydantic-settings (no SQLAlchemy, no Prefect).

Variables that only carry state between our own processes (``ARL_PREFECT_LOG``
in :mod:`arl_flows.prefect_env`) and Prefect's own ``PREFECT_*`` settings are
not user settings and are not here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "SettingsError", "read_settings", "settings"]


class SettingsError(ValueError):
    """An ``ARL_*`` variable holds a value that cannot be used (the message names it and says what to set)."""


class Settings(BaseSettings):
    """Environment settings of ARL; each field ``name`` is read from ``ARL_NAME``."""

    model_config = SettingsConfigDict(env_prefix="ARL_", env_ignore_empty=True, extra="ignore", frozen=True)

    home: Path = Field(
        default_factory=lambda: Path.home() / ".arl",
        description="ARL's folder: the default ledger, cached priors and surrogates, run checkpoints, logs (default ~/.arl).",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the ledger; default: an SQLite file ledger.db under home.",
    )
    cache_dir: Path | None = Field(
        default=None,
        description=(
            "Where ARL keeps data it recomputes when missing (canonical reference tables, fingerprints of shipped "
            "training sets); default: cache under home. Safe to share between runs and to delete."
        ),
    )
    traceback: bool = Field(
        default=False, description="Print an internal error's traceback instead of writing it to a log file (ARL_TRACEBACK=1)."
    )

    @field_validator("home", "cache_dir")
    @classmethod
    def _absolute(cls, path: Path | None) -> Path | None:
        # A shell expands `~` only where it starts a word: ARL_HOME='~/x' reached us as it is, and a relative folder
        # would move with the current directory. Both are taken as the user meant them: a fixed folder.
        if path is None:
            return None
        try:
            return path.expanduser().absolute()
        except RuntimeError:  # '~someone' of no known user
            raise ValueError(f"{str(path)[:80]!r} starts with a user's home that this machine does not know; give a "
                             "folder path") from None

    @field_validator("traceback", mode="before")
    @classmethod
    def _any_word_but_off(cls, value: object) -> bool:
        # Any value but an explicit "off" word turns it on, as ARL_TRACEBACK=yes always has.
        return str(value).strip().lower() not in ("", "0", "false", "no", "off")

    @property
    def ledger_url(self) -> str:
        """``database_url`` if set, else the SQLite file ``home/ledger.db``."""
        return self.database_url or f"sqlite:///{self.home / 'ledger.db'}"

    @property
    def cache(self) -> Path:
        """``cache_dir`` if set, else ``home/cache``."""
        return self.cache_dir or self.home / "cache"

    def run_dir(self, run_id: str) -> Path:
        """Where a run's checkpoints and logs go: ``home/runs/<run id>``."""
        return self.home / "runs" / run_id


S = TypeVar("S", bound=BaseSettings)


def read_settings(model: type[S], error: type[Exception] = ValueError) -> S:
    """``model`` as the environment says now; a bad value raises ``error`` with one line naming its variable."""
    try:
        return model()
    except ValidationError as exc:
        first = exc.errors()[0]
        prefix = str(model.model_config.get("env_prefix", ""))
        name = prefix + str(first["loc"][0]).upper() if first.get("loc") else f"an {prefix}* variable"
        raise error(f"{name}: {str(first['msg']).removeprefix('Value error, ')} (got {first.get('input')!r}); fix or unset it") from None


def settings() -> Settings:
    """The settings as the environment says now (a bad value: :class:`SettingsError` naming the variable)."""
    return read_settings(Settings, SettingsError)
