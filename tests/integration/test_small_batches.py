"""Small batches, the usual ingest (a job's second of points): on Postgres their points, rollups,
summaries and the run's activity go in one pipelined round trip, written as if every point were
new and corrected after for the metrics of which some were already stored. On both stores:
late, re-sent and overlapping small batches leave rollups and summaries exactly what the stored
points say."""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
import psycopg
import pytest
from holter_server.schemas.points import read_batch
from holter_server.services.ingest import ingest_batch
from holter_server.store import runs as runs_store
from holter_server.store.database import session_scope
from holter_server.store.models import MetricRow, PointRow
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from tests.conftest import new_run_id
from tests.integration.test_reads import assert_rollups_match_points

# steps spread over every stored level up to 2**18 (levels 6, 10, 14 and 18 hold buckets >= 1)
STEPS = np.arange(0, 300_000, 97)


def _run(sessions: sessionmaker[Session]) -> str:
    run_id = new_run_id()
    with session_scope(sessions) as session:
        runs_store.create_or_resume_run(session=session, run_id=run_id, project="p", name=None, config={}, tags=[])
    return run_id


def _wire(values: np.ndarray) -> list[Any]:
    return [
        v if math.isfinite(v) else ("NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity"))
        for v in values.tolist()
    ]


def _send(sessions: sessionmaker[Session], run_id: str, metrics: dict[str, tuple[np.ndarray, np.ndarray]]) -> Any:
    body = {
        "metrics": {
            name: {"steps": steps.tolist(), "values": _wire(values)} for name, (steps, values) in metrics.items()
        },
    }
    with session_scope(sessions) as session:
        return ingest_batch(session=session, run_id=run_id, batch=read_batch(body), max_metrics=100)


def _assert_summary_is_the_points(sessions: sessionmaker[Session], run_id: str, name: str) -> None:
    with sessions() as session:
        metric = session.scalars(select(MetricRow).where(MetricRow.run_id == run_id, MetricRow.name == name)).one()
        count, first, last = session.execute(
            select(func.count(), func.min(PointRow.step), func.max(PointRow.step)).where(
                PointRow.run_id == run_id, PointRow.metric_id == metric.metric_id
            )
        ).one()
        last_value = session.scalar(
            select(PointRow.value).where(
                PointRow.run_id == run_id, PointRow.metric_id == metric.metric_id, PointRow.step == last
            )
        )
        assert (metric.count, metric.first_step, metric.last_step) == (count, first, last)
        assert metric.last_value == last_value or (metric.last_value is None and last_value is None)


def test_late_resent_and_overlapping_small_batches_keep_rollups_and_summaries_exact(
    sessions: sessionmaker[Session],
) -> None:
    rng = np.random.default_rng(7)
    values = np.sin(STEPS / 500.0) + rng.normal(0, 0.01, len(STEPS))
    values[rng.choice(len(STEPS), 12, replace=False)] = 40.0 + rng.random(12)  # spikes
    values[rng.choice(len(STEPS), 4, replace=False)] = math.nan
    values[rng.choice(len(STEPS), 2, replace=False)] = math.inf
    run_id = _run(sessions)
    batches = np.array_split(np.arange(len(STEPS)), 15)  # ~200 points each
    other = values * 2.0
    for index in rng.permutation(len(batches)).tolist():  # late points
        chosen = batches[index]
        answer = _send(
            sessions, run_id, {"loss": (STEPS[chosen], values[chosen]), "acc": (STEPS[chosen], other[chosen])}
        )
        assert (answer.received, answer.stored, answer.duplicates) == (2 * len(chosen), 2 * len(chosen), 0)
    resent = batches[4]
    answer = _send(sessions, run_id, {"loss": (STEPS[resent], values[resent])})  # nothing new
    assert (answer.stored, answer.duplicates, answer.conflicts) == (0, len(resent), [])
    # partly new, at other values where stored; beside a metric all new
    overlap = np.arange(batches[14][0] - 50, batches[14][-1] + 1)
    fresh = STEPS[-1] + 97 * np.arange(1, 51)
    steps = np.r_[STEPS[overlap], fresh]
    answer = _send(
        sessions,
        run_id,
        {"loss": (steps, np.r_[values[overlap] + 100.0, np.full(50, -3.0)]), "new_metric": (fresh, np.ones(50))},
    )
    assert (answer.received, answer.stored) == (len(steps) + 50, 100)
    assert [(c.metric, c.count) for c in answer.conflicts] == [("loss", len(overlap))]
    # the same step twice in one batch, the first value kept, one step of it stored already
    twice = np.r_[STEPS[-1], fresh[-1] + 1, fresh[-1] + 1]
    answer = _send(sessions, run_id, {"acc": (twice, np.array([5.0, 9.0, -9.0]))})
    assert (answer.received, answer.stored) == (3, 1)
    for name in ("loss", "acc", "new_metric"):
        assert_rollups_match_points(sessions, run_id, name)
        _assert_summary_is_the_points(sessions, run_id, name)


def test_a_usual_small_batch_on_postgres_sends_every_statement_but_the_commit_in_two_pipelines(
    sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    if sessions.kw["bind"].dialect.name != "postgresql":
        pytest.skip("round trips: SQLite is in the process")
    run_id = _run(sessions)
    metrics = {f"m{i}": (np.arange(10), np.arange(10) * 0.5 + i) for i in range(20)}
    _send(sessions, run_id, metrics)  # the metrics are new: ids allocated, a round trip more
    outside: list[str] = []
    pipelines: list[int] = []
    execute, pipeline = psycopg.Cursor.execute, psycopg.Connection.pipeline
    # only this thread's: a service another test of this process left running (its detection or
    # alert loops, on a database of its own) may send statements meanwhile
    mine = threading.get_ident()

    def counted_execute(self: psycopg.Cursor, query: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == mine and self.connection.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF:
            outside.append(str(query)[:60])
        return execute(self, query, *args, **kwargs)

    def counted_pipeline(self: psycopg.Connection) -> Any:
        if threading.get_ident() == mine and self.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF:
            pipelines.append(1)
        return pipeline(self)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted_execute)
    monkeypatch.setattr(psycopg.Connection, "pipeline", counted_pipeline)
    later = {name: (steps + 10, values) for name, (steps, values) in metrics.items()}
    answer = _send(sessions, run_id, later)
    monkeypatch.undo()
    assert answer.stored == 200
    # the run and metric ids with BEGIN; the points, rollups, summaries and activity together
    assert (outside, len(pipelines)) == ([], 2)
    for name in metrics:
        assert_rollups_match_points(sessions, run_id, name)


def test_a_resent_batch_of_the_largest_doubles_is_a_duplicate_not_an_overflow(
    sessions: sessionmaker[Session],
) -> None:
    """Written as if new, a re-sent 1.7e308 doubles its buckets' finite sums past the largest
    double before the correction takes them back: Postgres refused that addition (value out of
    range: overflow), and the batch was a 500 (found by test_ingest_properties)."""
    run_id = _run(sessions)
    huge = np.array([1.7e308, -1.7e308, 1.7e308, 5.0])
    steps = np.arange(4)
    first = _send(sessions, run_id, {"loss": (steps, huge)})
    again = _send(sessions, run_id, {"loss": (steps, huge)})
    assert (first.stored, again.stored, again.duplicates) == (4, 0, 4)
    later = _send(sessions, run_id, {"loss": (steps + 4, huge)})  # new points into the same buckets
    assert later.stored == 4
    assert_rollups_match_points(sessions, run_id, "loss")
    _assert_summary_is_the_points(sessions, run_id, "loss")
