"""Fixtures shared by the whole suite: the two stores and real servers on them.

PyTorch: the hook, integration and real-demo tests skip without torch/transformers/lightning,
unless HOLTER_TEST_REQUIRE_TORCH=1 (CI), which makes a missing one a failure at start.

Postgres: HOLTER_TEST_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/postgres) is
used to create a fresh database for the test run, dropped at the end. When no Postgres answers,
its tests are skipped, unless HOLTER_TEST_REQUIRE_POSTGRES=1 (CI), which makes that a failure.
With HOLTER_TEST_PARTITION_POINTS=N, every fresh Postgres database is migrated at once with its
big tables hash-partitioned by run into N partitions (`holter db upgrade --partition-points N`):
CI runs the whole suite so, and the core integration modules once more on plain tables.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.servers import ServerProcess

# Runs made by tests log exactly what each test logs: the system-vitals sampler (holter/system.py)
# is off unless a test turns it on, and `holter.init` prints no "View run at" line.
os.environ.setdefault("HOLTER_SYSTEM_VITALS", "0")
os.environ.setdefault("HOLTER_QUIET", "1")

POSTGRES_ADMIN_URL = os.environ.get("HOLTER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
PARTITION_POINTS = int(os.environ.get("HOLTER_TEST_PARTITION_POINTS", "0"))
STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("HOLTER_TEST_REQUIRE_TORCH") == "1":
        import importlib.util

        missing = [name for name in ("torch", "transformers", "lightning") if importlib.util.find_spec(name) is None]
        if missing:
            raise pytest.UsageError(f"HOLTER_TEST_REQUIRE_TORCH=1 but {', '.join(missing)} cannot be imported")


def _postgres_database(name: str) -> str:
    base, _, _ = POSTGRES_ADMIN_URL.rpartition("/")
    return f"{base}/{name}"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh, empty Postgres database for this test run."""
    yield from _fresh_postgres_database()


@pytest.fixture(params=STORES)
def empty_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty store of each kind for one test, for tests that must see no other test's runs."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
    else:
        yield from _fresh_postgres_database()


@pytest.fixture(params=STORES)
def unmigrated_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty store of each kind with no schema at all, for tests of the migrations themselves."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'unmigrated.db'}"
    else:
        yield from _fresh_postgres_database(migrated=False)


def _fresh_postgres_database(*, migrated: bool = True) -> Iterator[str]:
    import psycopg

    name = f"holter_test_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        if os.environ.get("HOLTER_TEST_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"Postgres is required (HOLTER_TEST_REQUIRE_POSTGRES=1) but unreachable: {exc}")
        pytest.skip(f"no Postgres at {POSTGRES_ADMIN_URL}: {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    if migrated:
        _partition(_postgres_database(name))
    yield _postgres_database(name)
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session", params=STORES)
def store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The database URL of each store in turn: an SQLite file, then the Postgres database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'holter.db'}"
    return request.getfixturevalue("postgres_url")


def own_store(store_url: str, folder: Path) -> str:
    """A store of its own for a server that runs with its own settings (stall, alert, public URL
    or detection settings): on SQLite a fresh file in `folder`, on Postgres a fresh database
    (dropped when the session ends). On a shared database the session's other servers would
    claim its background work and do it with their settings."""
    if store_url.startswith("sqlite"):
        return f"sqlite:///{folder / 'own.db'}"
    import psycopg

    name = f"holter_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    _OWN_DATABASES.append(name)
    _partition(_postgres_database(name))
    return _postgres_database(name)


def _partition(url: str) -> None:
    """Under HOLTER_TEST_PARTITION_POINTS, migrate a fresh database with its big tables partitioned."""
    if PARTITION_POINTS:
        from holter_server.store.database import upgrade

        upgrade(url, partition_points=PARTITION_POINTS)


_OWN_DATABASES: list[str] = []


@pytest.fixture(scope="session", autouse=True)
def _drop_own_databases() -> Iterator[None]:
    yield
    if _OWN_DATABASES:
        import psycopg

        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
            for name in _OWN_DATABASES:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def server(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A real `holter serve` on loopback over each store, shared by the tests of a session.

    Its batch limit is lowered to 200,000 points so the 413 test need not send millions.
    """
    log = tmp_path_factory.mktemp("server") / "server.log"
    process = ServerProcess(store_url, env={"HOLTER_MAX_POINTS_PER_BATCH": "200000"}, log_path=log).start()
    yield process
    process.stop()


# The bootstrap admin token of the auth-on servers (`secured`).
ADMIN_TOKEN = "bootstrap-admin-token-0123456789abcdef"


@pytest.fixture(scope="module")
def secured(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A real `holter serve` over each store with auth on and `ADMIN_TOKEN` as its admin, one per
    test module: modules create keys and projects of their own in it."""
    env = {"HOLTER_AUTH": "on", "HOLTER_ADMIN_TOKEN": ADMIN_TOKEN}
    server = ServerProcess(store_url, env=env, log_path=tmp_path_factory.mktemp("secured") / "server.log").start()
    yield server
    server.stop()


@pytest.fixture
def api(server: ServerProcess) -> Iterator[httpx.Client]:
    """An HTTP client for the server's API."""
    with server.api() as client:
        yield client


@pytest.fixture
def spool_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private spool folder, so tests never replay each other's batches."""
    path = tmp_path / "spool"
    monkeypatch.setenv("HOLTER_SPOOL_DIR", str(path))
    return path


def new_run_id() -> str:
    return f"t{uuid.uuid4().hex[:12]}"
