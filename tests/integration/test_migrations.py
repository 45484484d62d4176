"""The same Alembic migrations build the schema on SQLite and Postgres, matching the models."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from holter_server.settings import Settings
from holter_server.store.database import make_engine, upgrade
from holter_server.store.models import Base
from holter_server.store.partitions import not_a_partition
from sqlalchemy import inspect


@pytest.fixture
def empty_store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fresh.db'}"


def test_db_upgrade_command_creates_the_schema_on_a_new_sqlite_file(empty_store_url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "holter.cli", "db", "upgrade", "--db", empty_store_url],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    engine = make_engine(empty_store_url)
    assert {"runs", "metrics", "points", "alembic_version"} <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_migrated_schema_matches_the_models(store_url: str) -> None:
    url = Settings(database_url=store_url).resolved_database_url()
    upgrade(url)  # a second upgrade of a migrated store is a no-op
    engine = make_engine(url)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_name": not_a_partition(connection)})
        differences = compare_metadata(context, Base.metadata)
    engine.dispose()
    assert differences == []


def test_points_are_keyed_by_run_first(store_url: str) -> None:
    engine = make_engine(Settings(database_url=store_url).resolved_database_url())
    upgrade(str(engine.url.render_as_string(hide_password=False)))
    keys = inspect(engine).get_pk_constraint("points")["constrained_columns"]
    engine.dispose()
    assert keys == ["run_id", "metric_id", "step"]


def test_the_config_keys_of_runs_stored_before_their_table_are_offered(empty_store_url: str) -> None:
    upgrade(empty_store_url, "c7f2a4b9d0e3")  # the revision before config_keys
    engine = make_engine(empty_store_url)
    with engine.begin() as connection:
        connection.exec_driver_sql(
            "INSERT INTO runs (id, project, config, tags, status, created_at, updated_at, heartbeat_at) VALUES "
            """('r1', 'p', '{"optimizer": {"lr": 0.1}, "seed": 1}', '[]', 'finished', '2026-01-01', '2026-01-01', """
            "'2026-01-01')"
        )
    upgrade(empty_store_url)
    with engine.connect() as connection:
        keys = connection.exec_driver_sql("SELECT project, key FROM config_keys ORDER BY key").all()
    engine.dispose()
    assert [tuple(row) for row in keys] == [("p", "optimizer.lr"), ("p", "seed")]
