"""Shared fixtures: ledgers on SQLite and PostgreSQL, and an isolated ARL home."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.postgres import create_database, drop_database
from tests.helpers.venvs import InstalledWheel, build_wheel, new_venv, pip_install

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # the flow and benchmark tests' Prefect

POSTGRES_ENV = "ARL_TEST_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def postgres_admin_url() -> str:
    return os.environ.get(POSTGRES_ENV, DEFAULT_POSTGRES_URL)



SLOW_TEST_SECONDS = 30.0  # what a `slow` test without its own estimate is taken to cost, on 2 busy cores


def expected_seconds(item: pytest.Item) -> float:
    """A test's expected wall time for ordering: ``@pytest.mark.slow(seconds=N)``, else 30 s if slow, else 0.5 s."""
    slow = item.get_closest_marker("slow")
    if slow is None:
        return 0.5
    return float(slow.kwargs.get("seconds", SLOW_TEST_SECONDS))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files run first; each file's own order is kept.

    ``make test`` hands whole files to its xdist workers in collection order (``--dist loadfile``). A file of
    minutes-long runs (the interrupt and crash chains) that came last alphabetically was the whole run's tail,
    with the other workers idle; started first, the short files fill in around it. A file's length is the sum of
    its tests' :func:`expected_seconds`.
    """
    first_seen: dict[str, int] = {}
    seconds: Counter[str] = Counter()
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        first_seen.setdefault(path, len(first_seen))
        seconds[path] += expected_seconds(item)

    def file_rank(item: pytest.Item) -> tuple[float, int]:
        path = item.nodeid.split("::", 1)[0]
        return -seconds[path], first_seen[path]

    items.sort(key=file_rank)  # a stable sort: each file's tests keep their order


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One ``ARL_CACHE_DIR`` for the session, set before any module or session fixture runs.

    Derived data (canonical reference tables, training-set fingerprints, the crash harness's checked tiny prior)
    is keyed by its inputs and written atomically, so one cache serves the whole session, every xdist worker (the
    folder sits beside their own base folders) and the processes the tests start. A test of a cache itself points
    ``ARL_CACHE_DIR`` at its own folder.
    """
    base = tmp_path_factory.getbasetemp()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ARL_CACHE_DIR", str((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "arl_cache"))
        yield


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


def _fresh_pg_database(admin_url: str) -> Iterator[str]:
    """URL of a new database on the server of ``admin_url``, dropped when the generator closes."""
    name, url = create_database(admin_url, "arl_test")
    try:
        yield url
    finally:
        drop_database(admin_url, name)


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """URL of a fresh PostgreSQL database, dropped after the test."""
    yield from _fresh_pg_database(postgres_server)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The same storage test against SQLite and PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        yield from _fresh_pg_database(request.getfixturevalue("postgres_server"))


@pytest.fixture
def ledger(db_url: str):  # noqa: ANN201
    from storage.ledger import Ledger

    led = Ledger(db_url)
    yield led
    led.close()


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
