"""Shared fixtures: ledgers on SQLite and PostgreSQL, and an isolated ARL home."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

POSTGRES_ENV = "ARL_TEST_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def postgres_admin_url() -> str:
    return os.environ.get(POSTGRES_ENV, DEFAULT_POSTGRES_URL)


@pytest.fixture(autouse=True)
def _isolated_arl_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never touch the user's ~/.arl from tests."""
    if "ARL_HOME" not in os.environ or not os.environ["ARL_HOME"].startswith(str(tmp_path_factory.getbasetemp())):
        monkeypatch.setenv("ARL_HOME", str(tmp_path_factory.mktemp("arl_home")))
    monkeypatch.delenv("ARL_DATABASE_URL", raising=False)


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """Admin URL of a reachable PostgreSQL server, or skip naming ARL_TEST_POSTGRES_URL."""
    try:
        import psycopg  # noqa: F401
        from sqlalchemy import create_engine, text
    except ImportError:
        pytest.skip(f"psycopg is not installed; install arl[postgres] and set {POSTGRES_ENV}")
    url = postgres_admin_url()
    try:
        engine = create_engine(url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"PostgreSQL not reachable at {url} ({type(exc).__name__}); set {POSTGRES_ENV} to a server URL")
    return url


def _create_pg_database(admin_url: str) -> tuple[str, str]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"arl_test_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    return name, url


def _drop_pg_database(admin_url: str, name: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """URL of a fresh PostgreSQL database, dropped after the test."""
    name, url = _create_pg_database(postgres_server)
    try:
        yield url
    finally:
        _drop_pg_database(postgres_server, name)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The same storage test against SQLite and PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        admin = request.getfixturevalue("postgres_server")
        name, url = _create_pg_database(admin)
        try:
            yield url
        finally:
            _drop_pg_database(admin, name)


@pytest.fixture
def ledger(db_url: str):  # noqa: ANN201
    from storage.ledger import Ledger

    led = Ledger(db_url)
    yield led
    led.close()


@dataclass(frozen=True)
class InstalledWheel:
    """ARL built as a wheel and installed into a fresh venv (see :func:`installed_wheel`)."""

    wheel: Path
    python: Path
    site: Path

    @property
    def arl(self) -> Path:
        return self.python.with_name("arl")


def build_wheel(source: Path, out: Path) -> Path:
    """``pip wheel`` of a project folder, offline (no build isolation), into ``out``."""
    before = set(out.glob("*.whl"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
        check=True, cwd=out, capture_output=True, text=True, timeout=600,
    )
    (wheel,) = set(out.glob("*.whl")) - before
    return wheel


def new_venv(path: Path) -> tuple[Path, Path]:
    """A fresh venv without ARL whose third-party packages come from this environment: (python, site-packages)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=300)
    python = path / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "_arl_test_deps.pth").write_text(f"{third_party_site(path.parent / f'{path.name}-deps')}\n")
    return python, site


def third_party_site(dest: Path, source: Path | None = None) -> Path:
    """``source`` (this environment's site-packages) as links in ``dest``, less the ARL plugins installed there.

    A venv a test builds reads its third-party packages from here, as a path
    entry: its ``.pth`` files are not run, so a suite or tier the user
    installed into this environment in editable mode would show in the venv
    as entry points without modules. ARL's own distribution stays.
    """
    source = source or Path(sysconfig.get_paths()["purelib"])
    dest.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        if not _is_user_arl_plugin(entry) and not (dest / entry.name).exists():
            (dest / entry.name).symlink_to(entry)
    return dest


def _is_user_arl_plugin(entry: Path) -> bool:
    """A distribution's metadata folder that declares ``arl.*`` entry points and is not ARL's own."""
    if not entry.name.endswith((".dist-info", ".egg-info")) or entry.name.split("-")[0].lower() == "arl":
        return False
    points = entry / "entry_points.txt"
    return points.is_file() and "[arl." in points.read_text(encoding="utf-8", errors="replace")


def pip_install(python: Path, wheel: Path, *options: str) -> None:
    """Install one wheel into the venv of ``python`` (no dependencies, nothing downloaded).

    Without the test's ``PYTHONPATH``: a checkout on it (with the ``arl.egg-info`` that ``pip wheel`` leaves
    there) would make pip see ARL as installed already and skip the wheel.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", *options, str(wheel)],
                   check=True, capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> InstalledWheel:
    """ARL's wheel (``pip wheel .``) installed into a fresh venv, built once per test session.

    The venv gets ARL from the wheel alone. Its third-party dependencies
    (torch, rdkit, prefect, ...) come from the test's own environment through a
    ``.pth`` line, so nothing is downloaded; the project's editable install there
    is not active in the new venv (a directory named by a ``.pth`` line is added
    to ``sys.path`` without processing the ``.pth`` files inside it).
    """
    root = Path(__file__).resolve().parents[1]
    work = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(root, work)
    python, site = new_venv(work / "venv")
    pip_install(python, wheel)
    return InstalledWheel(wheel=wheel, python=python, site=site)
