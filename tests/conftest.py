"""Fixtures shared by the whole suite: the two stores and real servers on them.

PyTorch: the hook, integration and real-demo tests skip without torch/transformers/lightning,
unless HOLTER_TEST_REQUIRE_TORCH=1 (CI), which makes a missing one a failure at start.

Postgres: HOLTER_TEST_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/postgres) is
used to create a fresh database for the test run, dropped at the end. When no Postgres answers,
its tests are skipped, unless HOLTER_TEST_REQUIRE_POSTGRES=1 (CI), which makes that a failure.
With HOLTER_TEST_PARTITION_POINTS=N, every fresh Postgres database is migrated at once with its
big tables hash-partitioned by run into N partitions (`holter db upgrade --partition-points N`):
CI runs the whole suite so, and the core integration modules once more on plain tables.

Fresh stores are copies of a template migrated once per session (per pytest-xdist worker): an
SQLite file copied per test, a Postgres database made with `CREATE DATABASE ... TEMPLATE`. Only
`unmigrated_store_url` (the migrations' own tests) starts with no schema at all.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.servers import InProcessServer

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


# What marks a test module as starting processes (`holter serve`, a worker, the CLI, another
# Python) or a browser: its tests are `process` tests, left out of `python3 dev.py test --fast`.
_SPAWNS = re.compile(r"ServerProcess\(|subprocess|Popen|sys\.executable|multiprocessing|os\.fork")
_TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `process` every test of a module under integration/ or ui/ that starts a process or
    a browser (found in its source, so a new test is marked without anyone remembering to)."""
    spawns: dict[Path, bool] = {}
    for item in items:
        path = Path(item.path)
        if _TESTS / "unit" in path.parents:
            continue
        if path not in spawns:
            spawns[path] = _TESTS / "ui" in path.parents or bool(_SPAWNS.search(path.read_text()))
        if spawns[path]:
            item.add_marker(pytest.mark.process)
    items[:] = _longest_first(items, spawns)


# The modules longest first, so that pytest-xdist (which hands out whole files, `--dist loadfile
# --no-loadscope-reorder`) starts a fuzzing run or a training early instead of leaving it to the
# end while the other workers idle. DURATIONS holds each module's seconds from a recorded run
# (`python3 dev.py test --record-durations`); a module it lacks is guessed from its tests.
DURATIONS = _TESTS / "durations.json"
_GUESS_PER_TEST = {True: 5.0, False: 0.1}  # seconds per test of a module that spawns processes, or not


def _longest_first(items: list[pytest.Item], spawns: dict[Path, bool]) -> list[pytest.Item]:
    recorded = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)

    def seconds(module: str) -> float:
        tests = modules[module]
        return recorded.get(module, _GUESS_PER_TEST[spawns.get(Path(tests[0].path), False)] * len(tests))

    return [item for module in sorted(modules, key=seconds, reverse=True) for item in modules[module]]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations",
        action="store_true",
        help=f"write each module's seconds (setup, call and teardown of its tests) to {DURATIONS.name}",
    )


_recorded: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # on the controller this sees every worker's reports
    module = report.nodeid.split("::")[0]
    _recorded[module] = _recorded.get(module, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not session.config.getoption("--record-durations") or hasattr(session.config, "workerinput"):
        return
    # a run of some modules updates theirs and keeps the others'
    durations = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    durations.update({module: round(seconds, 1) for module, seconds in _recorded.items()})
    DURATIONS.write_text(json.dumps(dict(sorted(durations.items())), indent=1) + "\n")


def _postgres_database(name: str) -> str:
    base, _, _ = POSTGRES_ADMIN_URL.rpartition("/")
    return f"{base}/{name}"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh, empty Postgres database for this test run."""
    yield from _fresh_postgres_database()


@pytest.fixture(params=STORES)
def empty_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty, migrated store of each kind for one test, for tests that must see no other test's runs."""
    if request.param == "sqlite":
        yield migrated_sqlite(tmp_path / "empty.db")
    else:
        yield from _fresh_postgres_database()


@pytest.fixture
def sessions(empty_store_url: str) -> Iterator[Any]:
    """A session factory (`sessionmaker`) on `empty_store_url`, for tests that call the store and
    services in this process; its engine is disposed after the test."""
    from holter_server.store.database import make_engine, make_session_factory

    engine = make_engine(empty_store_url)
    yield make_session_factory(engine)
    engine.dispose()


@pytest.fixture(params=STORES)
def unmigrated_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty store of each kind with no schema at all, for tests of the migrations themselves."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'unmigrated.db'}"
    else:
        yield from _fresh_postgres_database(migrated=False)


def _admin_connection():  # type: ignore[no-untyped-def]
    """An autocommit connection to the Postgres admin database, or the test's skip (or failure
    under HOLTER_TEST_REQUIRE_POSTGRES=1) when none answers."""
    import psycopg

    try:
        return psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        if os.environ.get("HOLTER_TEST_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"Postgres is required (HOLTER_TEST_REQUIRE_POSTGRES=1) but unreachable: {exc}")
        pytest.skip(f"no Postgres at {POSTGRES_ADMIN_URL}: {exc}")


def _fresh_postgres_database(*, migrated: bool = True) -> Iterator[str]:
    name = _create_postgres_database(migrated=migrated)
    yield _postgres_database(name)
    with _admin_connection() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _create_postgres_database(*, migrated: bool) -> str:
    """A new database, a copy of the session's migrated template unless `migrated` is false."""
    name = f"holter_test_{uuid.uuid4().hex[:10]}"
    template = f' TEMPLATE "{_postgres_template()}"' if migrated else ""
    with _admin_connection() as admin:
        admin.execute(f'CREATE DATABASE "{name}"{template}')
    return name


# The session's migrated templates, made on first use: this process's own (pytest-xdist workers
# each make theirs, so no two processes ever copy from or connect to the same template at once).
_TEMPLATES: dict[str, str] = {}


def _postgres_template() -> str:
    """A Postgres database migrated to head (partitioned as HOLTER_TEST_PARTITION_POINTS says),
    which nobody connects to again: `CREATE DATABASE ... TEMPLATE` needs it idle."""
    if "postgres" not in _TEMPLATES:
        from holter_server.store.database import upgrade

        name = f"holter_template_{uuid.uuid4().hex[:10]}"
        with _admin_connection() as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        _TEMPLATES["postgres"] = name
        upgrade(_postgres_database(name), partition_points=PARTITION_POINTS)
    return _TEMPLATES["postgres"]


def migrated_sqlite(path: Path) -> str:
    """The URL of a new SQLite file at `path`, a copy of the session's migrated template."""
    if "sqlite" not in _TEMPLATES:
        from holter_server.store.database import upgrade

        template = Path(tempfile.mkdtemp(prefix="holter-template-")) / "template.db"
        upgrade(f"sqlite:///{template}")
        _TEMPLATES["sqlite"] = str(template)
    shutil.copyfile(_TEMPLATES["sqlite"], path)
    return f"sqlite:///{path}"


@pytest.fixture(scope="session", params=STORES)
def store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The database URL of each store in turn: an SQLite file, then the Postgres database."""
    if request.param == "sqlite":
        return migrated_sqlite(tmp_path_factory.mktemp("sqlite") / "holter.db")
    return request.getfixturevalue("postgres_url")


def own_store(store_url: str, folder: Path) -> str:
    """A store of its own for a server that runs with its own settings (stall, alert, public URL
    or detection settings): on SQLite a fresh file in `folder`, on Postgres a fresh database
    (dropped when the session ends). On a shared database the session's other servers would
    claim its background work and do it with their settings."""
    if store_url.startswith("sqlite"):
        return migrated_sqlite(folder / "own.db")
    name = _create_postgres_database(migrated=True)
    _OWN_DATABASES.append(name)
    return _postgres_database(name)


_OWN_DATABASES: list[str] = []


@pytest.fixture(scope="session", autouse=True)
def _drop_own_databases() -> Iterator[None]:
    yield
    names = [*_OWN_DATABASES, *([_TEMPLATES["postgres"]] if "postgres" in _TEMPLATES else [])]
    if names:
        import psycopg

        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
            for name in names:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    if "sqlite" in _TEMPLATES:
        shutil.rmtree(Path(_TEMPLATES["sqlite"]).parent, ignore_errors=True)


@pytest.fixture(scope="session")
def server(store_url: str) -> Iterator[InProcessServer]:
    """The service over each store, shared by the tests of a session: in this process (uvicorn in
    a thread, the dashboard mounted), since these tests never kill or restart it.

    Its batch limit is lowered to 200,000 points so the 413 test need not send millions.
    """
    process = InProcessServer(store_url, settings={"max_points_per_batch": 200_000}, dashboard=True).start()
    yield process
    process.stop()


# The bootstrap admin token of the auth-on servers (`secured`).
ADMIN_TOKEN = "bootstrap-admin-token-0123456789abcdef"


@pytest.fixture(scope="module")
def secured(store_url: str) -> Iterator[InProcessServer]:
    """The service over each store with auth on and `ADMIN_TOKEN` as its admin, in this process,
    one per test module: modules create keys and projects of their own in it."""
    server = InProcessServer(store_url, settings={"auth": "on", "admin_token": ADMIN_TOKEN}).start()
    yield server
    server.stop()


@pytest.fixture
def api(server: InProcessServer) -> Iterator[httpx.Client]:
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
