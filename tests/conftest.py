"""Fixtures shared by the whole suite: the two stores and real servers on them.

PyTorch: the hook, integration and real-demo tests skip without torch/transformers/lightning,
unless HOLTER_TEST_REQUIRE_TORCH=1 (CI), which makes a missing one a failure at start.

Postgres: HOLTER_TEST_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/postgres) is
used to create a fresh database for the test run, dropped at the end. When no Postgres answers,
its tests are skipped, unless HOLTER_TEST_REQUIRE_POSTGRES=1 (CI), which makes that a failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.servers import ServerProcess

POSTGRES_ADMIN_URL = os.environ.get("HOLTER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
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
    """A store for a server that must run its own background work (its stall, alert or detection
    settings): on SQLite a fresh file in `folder`, since one process per SQLite file runs that
    work; Postgres is shared, its workers claim work row by row."""
    return f"sqlite:///{folder / 'own.db'}" if store_url.startswith("sqlite") else store_url


@pytest.fixture(scope="session")
def server(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A real `holter serve` on loopback over each store, shared by the tests of a session.

    Its batch limit is lowered to 200,000 points so the 413 test need not send millions.
    """
    log = tmp_path_factory.mktemp("server") / "server.log"
    process = ServerProcess(store_url, env={"HOLTER_MAX_POINTS_PER_BATCH": "200000"}, log_path=log).start()
    yield process
    process.stop()


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
