"""Engines, sessions and migrations for SQLite and Postgres."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import ColumnElement, Engine, create_engine, event, func, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import InstrumentedAttribute, Session, sessionmaker

from holter_server.store.backends import backend_for
from holter_server.store.partitions import partition_by_run

POOL_SIZE = 10  # Postgres connections one process keeps at most (HOLTER_DB_POOL_SIZE)


def make_engine(url: str, pool_size: int = POOL_SIZE) -> Engine:
    """Create the engine for `url`; for SQLite, create its folder and tune it for concurrent use.

    On Postgres the process keeps up to `pool_size` connections open and never more: a request
    beyond them waits for one (`pool_timeout`). An overflow above the pool would be closed each
    time it is handed back, and under a lab's load that meant a new Postgres backend (a fork,
    authentication, catalog caches warmed again) for a good share of the requests: 150-350
    backends per 30 s at 50 jobs. A request holds its connection for its transaction only (a few
    milliseconds), so 10 serve a busy API process, and ten per process keeps a few processes
    within a default `max_connections` (100). Connections are opened as first needed.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        engine = create_engine(url, pool_size=pool_size, max_overflow=0)
        _ping_after_idle(engine)
        return engine
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        cursor = dbapi_connection.cursor()
        # WAL lets readers run while a batch is written; NORMAL still survives a process crash.
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine


# A pooled connection idle this long is pinged before use (it may have been closed meanwhile: a
# Postgres restart, a proxy's idle timeout) and replaced if it does not answer. One in steady use
# is not: a ping before every transaction was a round trip per request, and a connection broken
# while in use fails its transaction (a client's batch is sent again) and has the pool replace
# every connection older than the failure.
PING_AFTER_IDLE_S = 5.0


def _ping_after_idle(engine: Engine) -> None:
    @event.listens_for(engine, "checkin")
    def _idle_from(_dbapi_connection, record) -> None:  # type: ignore[no-untyped-def]
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(dbapi_connection, record, _proxy) -> None:  # type: ignore[no-untyped-def]
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_S:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:  # any failure: the pool opens a new connection instead
            raise DisconnectionError(str(exc)) from exc


def insert_ignoring_conflicts(session: Session, model: type) -> postgresql.Insert | sqlite.Insert:
    """`INSERT ... ON CONFLICT DO NOTHING` into `model`, in the session's SQL dialect."""
    return backend_for(session).insert_ignoring_conflicts(model)


def database_kind(session: Session) -> str:
    """Which database the session talks to ("postgresql", "sqlite"), for people reading /health."""
    return session.get_bind().dialect.name


def writers_run_side_by_side(session_factory: sessionmaker[Session]) -> bool:
    """Whether transactions writing different rows proceed together (Postgres), or one writer
    holds the whole database (SQLite)."""
    return bool(session_factory.kw["bind"].dialect.name == "postgresql")


def ping(session: Session) -> None:
    """One round trip to the database; raises SQLAlchemyError when it does not answer."""
    session.execute(text("SELECT 1"))


def next_id(session: Session, column: InstrumentedAttribute[int]) -> ColumnElement[int] | None:
    """The id for a new row of a table keyed by (run_id, id), where `id` alone is still unique.

    On Postgres the column's sequence gives it (None: let it). SQLite numbers only a lone
    INTEGER PRIMARY KEY itself, so the id is the largest one plus one, computed inside the
    INSERT, which holds SQLite's one write lock: two writers never get the same one.
    """
    if session.get_bind().dialect.name == "postgresql":
        return None
    return select(func.coalesce(func.max(column), 0) + 1).scalar_subquery()


def background_lock_path(url: str) -> Path | None:
    """The file whose lock marks the one process that runs background work on a SQLite database
    (None for Postgres, where work is claimed row by row, and for an in-memory database)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database).with_name(Path(parsed.database).name + ".worker.lock")


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded objects usable after commit (routers return them)."""
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any error."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def migrations_dir() -> Path:
    """The Alembic scripts: shipped inside the wheel, or the repository's `migrations/` folder."""
    packaged = resources.files("holter_server") / "migrations"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "migrations"


def alembic_config(url: str) -> Config:
    """An Alembic configuration pointed at `url`, without needing an alembic.ini on disk."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head", *, partition_points: int = 0) -> None:
    """Bring the schema at `url` up to `revision` (creating an SQLite file if needed).

    `partition_points` > 0 (Postgres): then hash-partition the tables that grow with the points
    by run into that many partitions, rebuilding them if they are not (`store.partitions`); 0
    leaves them as they are.

    On SQLite, foreign keys are off while the migrations run, as SQLite's own procedure for
    rebuilding a table asks (batch mode drops the old table, which would otherwise cascade into
    the tables that refer to it), and checked once at the end: a migration that leaves a row
    pointing nowhere fails and is rolled back.
    """
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            sqlite_store = connection.dialect.name == "sqlite"
            if sqlite_store:
                connection.exec_driver_sql("PRAGMA foreign_keys=OFF")  # outside any transaction, or it does nothing
                connection.commit()
            with connection.begin():
                config = alembic_config(url)
                config.attributes["connection"] = connection
                command.upgrade(config, revision)
                partition_by_run(connection=connection, partitions=partition_points)
                if sqlite_store:
                    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
                    if broken:
                        raise RuntimeError(f"the migration left rows whose foreign keys point nowhere: {broken[:5]}")
            if sqlite_store:
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                connection.commit()
    finally:
        engine.dispose()
