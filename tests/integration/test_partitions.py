"""Plain Postgres, hash-partitioned by run (store/partitions.py, `holter db upgrade --partition-points N`)."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from holter_server.store import detection_queue
from holter_server.store import points as points_store
from holter_server.store import runs as runs_store
from holter_server.store.database import make_engine, make_session_factory, session_scope, upgrade
from holter_server.store.partitions import PARTITIONED_TABLES, partition_count
from sqlalchemy import Engine, text

RUNS = [f"run-{i}" for i in range(12)]


@pytest.fixture
def filled(empty_store_url: str) -> Iterator[tuple[str, Engine]]:
    """A Postgres store (plain tables, unless HOLTER_TEST_PARTITION_POINTS made it otherwise) with
    twelve runs' points, rollups and detector states."""
    if not empty_store_url.startswith("postgresql"):
        pytest.skip("SQLite has no partitions")
    upgrade(empty_store_url)
    engine = make_engine(empty_store_url)
    factory = make_session_factory(engine)
    for n, run_id in enumerate(RUNS):
        with session_scope(factory) as session:
            runs_store.create_or_resume_run(session=session, run_id=run_id, project="p", name=None, config={}, tags=[])
            steps = list(range(0, 3_000, 1 + n))
            points_store.add_points(
                session=session,
                run_id=run_id,
                max_metrics=100,
                columns={
                    "loss": (steps, [1.0 / (1 + s) for s in steps], [1.0e9 + s for s in steps]),
                    "grad_norm": (steps, [math.nan if s == 7 else float(s % 13) for s in steps], [None] * len(steps)),
                },
            )
            runs_store.record_activity(
                session=session, run_id=run_id, last_step=steps[-1]
            )  # as ingest does: due for detection
    with session_scope(factory) as session:
        detection_queue.claim_detection_work(session=session, limit=0)  # one detector state per metric
    yield empty_store_url, engine
    engine.dispose()


def _contents(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    with engine.connect() as connection:
        return {
            table: [
                tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in row)
                for row in connection.execute(text(f"SELECT * FROM {table} ORDER BY 1, 2, 3, 4"))
            ]
            for table in PARTITIONED_TABLES
        }


def _partitions(engine: Engine) -> dict[str, int]:
    with engine.connect() as connection:
        return {table: partition_count(connection=connection, table=table) for table in PARTITIONED_TABLES}


def test_db_upgrade_partitions_an_existing_store_without_losing_a_point(filled: tuple[str, Engine]) -> None:
    url, engine = filled
    before = _contents(engine)
    result = subprocess.run(
        [sys.executable, "-m", "holter.cli", "db", "upgrade", "--db", url, "--partition-points", "5"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert _partitions(engine) == dict.fromkeys(PARTITIONED_TABLES, 5)
    after = _contents(engine)
    assert len(after["points"]) == sum(2 * len(range(0, 3_000, 1 + n)) for n in range(len(RUNS)))
    assert after == before


def test_a_partitioned_store_is_split_again_into_another_count(filled: tuple[str, Engine]) -> None:
    url, engine = filled
    upgrade(url, partition_points=4)
    before = _contents(engine)
    upgrade(url, partition_points=2)
    assert _partitions(engine) == dict.fromkeys(PARTITIONED_TABLES, 2)
    assert _contents(engine) == before


def test_an_upgrade_without_a_count_leaves_the_partitions_as_they_are(filled: tuple[str, Engine]) -> None:
    url, engine = filled
    upgrade(url, partition_points=3)
    upgrade(url)
    assert _partitions(engine) == dict.fromkeys(PARTITIONED_TABLES, 3)


def test_every_partition_holds_some_runs_and_each_run_lies_in_one(filled: tuple[str, Engine]) -> None:
    url, engine = filled
    upgrade(url, partition_points=3)
    with engine.connect() as connection:
        where = connection.execute(text("SELECT tableoid::regclass::text, run_id FROM points GROUP BY 1, 2")).all()
    assert {partition for partition, _ in where} == {"points_h3_0", "points_h3_1", "points_h3_2"}
    assert sorted(run_id for _, run_id in where) == sorted(RUNS)


def test_a_partitioned_store_takes_points_and_answers_reads(filled: tuple[str, Engine]) -> None:
    url, engine = filled
    upgrade(url, partition_points=4)
    factory = make_session_factory(engine)
    with session_scope(factory) as session:
        points_store.add_points(
            session=session,
            run_id="run-0",
            max_metrics=100,
            columns={"loss": ([3_000, 3_001], [0.25, 0.5], [None, None])},
        )
        runs_store.create_or_resume_run(session=session, run_id="late", project="p", name=None, config={}, tags=[])
        points_store.add_points(
            session=session, run_id="late", max_metrics=100, columns={"loss": ([0, 1], [2.0, 1.0], [None, None])}
        )
    with session_scope(factory) as session:
        loss = runs_store.get_metric(session=session, run_id="run-0", name="loss")
        assert loss is not None and loss.last_step == 3_001 and loss.last_value == 0.5
        tail = points_store.read_points(
            session=session, run_id="run-0", metric_id=loss.metric_id, start=2_999, end=None, limit=10
        )
        late = runs_store.get_metric(session=session, run_id="late", name="loss")
        assert late is not None and late.count == 2
    assert list(tail.steps) == [2_999, 3_000, 3_001]
    with session_scope(factory) as session:
        runs_store.delete_run(session=session, run_id="late")
    with engine.connect() as connection:
        assert connection.scalar(text("SELECT count(*) FROM rollups WHERE run_id = 'late'")) == 0
