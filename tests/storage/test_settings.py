"""storage.settings: ARL_* variables read in one place, at call time, with one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.ledger import default_database_url
from storage.settings import settings


def test_settings_follow_the_environment_at_call_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARL_HOME", str(tmp_path / "a"))
    assert settings().home == tmp_path / "a"
    monkeypatch.setenv("ARL_HOME", str(tmp_path / "b"))  # set after the first read: obeyed
    assert settings().home == tmp_path / "b"
    assert settings().run_dir("r1") == tmp_path / "b" / "runs" / "r1"
    assert default_database_url() == f"sqlite:///{tmp_path / 'b' / 'ledger.db'}"
    monkeypatch.setenv("ARL_DATABASE_URL", "postgresql+psycopg://u@h/db")
    assert default_database_url() == "postgresql+psycopg://u@h/db"


def test_the_cache_is_under_home_unless_arl_cache_dir_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ARL_CACHE_DIR", raising=False)
    assert settings().cache == tmp_path / "home" / "cache"
    monkeypatch.setenv("ARL_CACHE_DIR", str(tmp_path / "shared"))
    assert settings().cache == tmp_path / "shared"
    assert settings().home == tmp_path / "home"  # the ledger and runs stay where they were


def test_an_empty_variable_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARL_HOME", "")
    assert settings().home == Path.home() / ".arl"


@pytest.mark.parametrize(("value", "on"), [("1", True), ("yes", True), ("0", False), ("off", False), ("", False)])
def test_traceback_switch(value: str, on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARL_TRACEBACK", value)
    assert settings().traceback is on


def test_the_benchmarks_variables_are_not_product_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """ARL_BENCH_* belongs to benchmarks/settings.py: the product neither reads nor rejects it."""
    monkeypatch.setenv("ARL_BENCH_TORCH_THREADS", "many")
    assert "bench_torch_threads" not in settings().model_dump()


def test_a_home_written_with_a_tilde_or_relative_is_one_fixed_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ARL_HOME='~/x' made a folder named '~' in the current directory; a relative one moved with it."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("ARL_HOME", "~/arl-home")
    monkeypatch.setenv("ARL_CACHE_DIR", "cache-here")
    monkeypatch.chdir(tmp_path)
    s = settings()
    assert s.home == tmp_path / "user" / "arl-home" and s.cache == tmp_path / "cache-here"
    assert s.ledger_url == f"sqlite:///{tmp_path / 'user' / 'arl-home' / 'ledger.db'}"


def test_a_home_of_an_unknown_user_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from storage.settings import SettingsError

    monkeypatch.setenv("ARL_HOME", "~no-such-user-xyz/arl")
    with pytest.raises(SettingsError, match="ARL_HOME: .*a user's home that this machine does not know"):
        settings()
