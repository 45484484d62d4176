"""Metric ids an API process remembers (`KnownMetricIds`): on Postgres the usual small batch of a
run the process wrote to lately goes without reading its run and metric ids first, and still
stores every point once under the right metric when another process deleted the run and
re-created it under the same id (its metrics declared in another order, or not yet), deleted it
for good, or the run stalled. Each test's two caches stand for two API processes; on SQLite
(no such way) the same batches go the usual way and store the same."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from holter_server.schemas.points import read_batch
from holter_server.services.ingest import UnknownRunError, ingest_batch
from holter_server.store import runs as runs_store
from holter_server.store.database import session_scope
from holter_server.store.models import EventRow, MetricRow, PointRow, RunRow
from holter_server.store.points import KnownMetricIds
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from tests.conftest import new_run_id
from tests.integration.test_reads import assert_rollups_match_points

_LOOKUP = "FROM runs r LEFT JOIN metrics m"


def _progress(sessions: sessionmaker[Session], run_id: str) -> tuple[str, int | None, int]:
    """The run's status, last step and stored batches, as its activity recorded them."""
    with sessions() as session:
        run = session.get(RunRow, run_id)
        assert run is not None
        return run.status, run.last_step, run.stored_batches


def _create(sessions: sessionmaker[Session], run_id: str) -> None:
    with session_scope(sessions) as session:
        runs_store.create_or_resume_run(session=session, run_id=run_id, project="p", name=None, config={}, tags=[])


def _delete(sessions: sessionmaker[Session], run_id: str) -> None:
    with session_scope(sessions) as session:
        runs_store.delete_run(session=session, run_id=run_id)


def _send(
    sessions: sessionmaker[Session], known: KnownMetricIds, run_id: str, metrics: dict[str, tuple[range, float]]
) -> Any:
    """Each metric's steps with values `offset + step` (which tell the metrics' points apart)."""
    body = {
        "metrics": {
            name: {"steps": list(steps), "values": [offset + step for step in steps]}
            for name, (steps, offset) in metrics.items()
        }
    }
    with session_scope(sessions) as session:
        return ingest_batch(session=session, run_id=run_id, batch=read_batch(body), max_metrics=100, known=known)


def _stored(sessions: sessionmaker[Session], run_id: str) -> dict[str, list[tuple[int, float]]]:
    """Each metric's stored (step, value) by name, through the metrics' own ids."""
    with sessions() as session:
        rows = session.execute(
            select(MetricRow.name, PointRow.step, PointRow.value)
            .join(PointRow, (PointRow.run_id == MetricRow.run_id) & (PointRow.metric_id == MetricRow.metric_id))
            .where(MetricRow.run_id == run_id)
            .order_by(MetricRow.name, PointRow.step)
        ).all()
        orphans = session.scalar(
            select(PointRow.step)
            .where(PointRow.run_id == run_id)
            .where(
                ~select(MetricRow.metric_id)
                .where(MetricRow.run_id == run_id, MetricRow.metric_id == PointRow.metric_id)
                .exists()
            )
            .limit(1)
        )
    assert orphans is None, "points stored under a metric id the run has not"
    out: dict[str, list[tuple[int, float]]] = {}
    for name, step, value in rows:
        out.setdefault(name, []).append((step, value))
    return out


def _assert_summaries(sessions: sessionmaker[Session], run_id: str) -> None:
    stored = _stored(sessions, run_id)
    with sessions() as session:
        for metric in session.scalars(select(MetricRow).where(MetricRow.run_id == run_id)):
            points = stored.get(metric.name, [])
            assert metric.count == len(points)
            if points:
                assert (metric.first_step, metric.last_step, metric.last_value) == (
                    points[0][0],
                    points[-1][0],
                    points[-1][1],
                )
    for name in stored:
        assert_rollups_match_points(sessions, run_id, name)


def _expected(*sent: tuple[str, range, float]) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, dict[int, float]] = {}
    for name, steps, offset in sent:
        for step in steps:
            out.setdefault(name, {}).setdefault(step, offset + step)  # the first value of a step stays
    return {name: sorted(points.items()) for name, points in out.items()}


def test_a_run_recreated_under_its_id_with_its_metrics_in_another_order_gets_every_point_under_its_own_metric(
    sessions: sessionmaker[Session],
) -> None:
    first, second = KnownMetricIds(), KnownMetricIds()
    run_id = new_run_id()
    _create(sessions, run_id)
    _send(sessions, first, run_id, {"loss": (range(0, 10), 0.0), "acc": (range(0, 10), 1000.0)})
    _send(sessions, first, run_id, {"loss": (range(10, 20), 0.0), "acc": (range(10, 20), 1000.0)})
    # another process deletes the run, and its job starts again under the same id: acc first
    _delete(sessions, run_id)
    _create(sessions, run_id)
    _send(sessions, second, run_id, {"acc": (range(0, 5), 5000.0), "loss": (range(0, 5), 7000.0)})
    # the first process, remembering loss as metric 1 and acc as 2, gets the next batch
    result = _send(sessions, first, run_id, {"loss": (range(5, 15), 0.0), "acc": (range(5, 15), 1000.0)})
    assert (result.received, result.stored) == (20, 20)
    # and the batches after it go its quick way again, with the new ids
    result = _send(sessions, first, run_id, {"loss": (range(10, 25), 0.5), "acc": (range(15, 25), 1000.0)})
    assert (result.received, result.stored, result.duplicates) == (25, 20, 5)
    assert [conflict.metric for conflict in result.conflicts] == ["loss"]
    assert _stored(sessions, run_id) == _expected(
        ("acc", range(0, 5), 5000.0),
        ("loss", range(0, 5), 7000.0),
        ("loss", range(5, 15), 0.0),
        ("acc", range(5, 15), 1000.0),
        ("loss", range(10, 25), 0.5),
        ("acc", range(15, 25), 1000.0),
    )
    _assert_summaries(sessions, run_id)


def test_a_run_recreated_without_the_remembered_metrics_gets_them_anew(sessions: sessionmaker[Session]) -> None:
    known = KnownMetricIds()
    run_id = new_run_id()
    _create(sessions, run_id)
    for lo in (0, 10):
        _send(sessions, known, run_id, {"loss": (range(lo, lo + 10), 0.0), "acc": (range(lo, lo + 10), 1000.0)})
    _delete(sessions, run_id)
    _create(sessions, run_id)
    result = _send(sessions, known, run_id, {"loss": (range(20, 30), 0.0), "acc": (range(20, 30), 1000.0)})
    assert (result.received, result.stored) == (20, 20)
    assert _stored(sessions, run_id) == _expected(("loss", range(20, 30), 0.0), ("acc", range(20, 30), 1000.0))
    _assert_summaries(sessions, run_id)
    assert _progress(sessions, run_id) == ("running", 29, 1)


def test_a_deleted_run_is_unknown_to_a_process_that_remembers_its_ids(sessions: sessionmaker[Session]) -> None:
    known = KnownMetricIds()
    run_id = new_run_id()
    _create(sessions, run_id)
    for lo in (0, 10):
        _send(sessions, known, run_id, {"loss": (range(lo, lo + 10), 0.0)})
    _delete(sessions, run_id)
    with pytest.raises(UnknownRunError):
        _send(sessions, known, run_id, {"loss": (range(20, 30), 0.0)})
    with sessions() as session:
        assert session.scalar(select(PointRow.step).where(PointRow.run_id == run_id).limit(1)) is None


def test_a_stalled_run_resumes_on_a_remembered_batch(sessions: sessionmaker[Session]) -> None:
    known = KnownMetricIds()
    run_id = new_run_id()
    _create(sessions, run_id)
    for lo in (0, 10):
        _send(sessions, known, run_id, {"loss": (range(lo, lo + 10), 0.0)})
    with session_scope(sessions) as session:
        run = session.get(RunRow, run_id)
        assert run is not None
        runs_store.set_status(session=session, run=run, status="stalled")
    _send(sessions, known, run_id, {"loss": (range(20, 30), 0.0)})
    assert _progress(sessions, run_id) == ("running", 29, 3)
    with sessions() as session:
        kinds = session.scalars(select(EventRow.kind).where(EventRow.run_id == run_id)).all()
        assert "run_resumed" in kinds
    assert _stored(sessions, run_id) == _expected(("loss", range(0, 30), 0.0))
    _assert_summaries(sessions, run_id)


def test_a_known_runs_usual_batch_on_postgres_reads_no_ids_first(
    sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    if sessions.kw["bind"].dialect.name != "postgresql":
        pytest.skip("the lookup saved is a Postgres round trip")
    known = KnownMetricIds()
    run_id = new_run_id()
    _create(sessions, run_id)
    sent: list[str] = []
    execute = psycopg.Cursor.execute
    mine = threading.get_ident()  # a service another test left running may send its own meanwhile

    def counted(self: psycopg.Cursor, query: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == mine:
            sent.append(str(query))
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    lookups = []
    for lo in range(0, 50, 10):
        _send(sessions, known, run_id, {"loss": (range(lo, lo + 10), 0.0), "acc": (range(lo, lo + 10), 1000.0)})
        lookups.append(sum(_LOOKUP in query for query in sent))
        sent.clear()
    # the first batch declares the metrics, the second reads their ids, the rest remember them
    assert lookups == [1, 1, 0, 0, 0]
    assert _stored(sessions, run_id) == _expected(("loss", range(0, 50), 0.0), ("acc", range(0, 50), 1000.0))
    _assert_summaries(sessions, run_id)
    assert _progress(sessions, run_id) == ("running", 49, 5)


def test_remembered_ids_stay_within_their_bound() -> None:
    known = KnownMetricIds(max_names=5)
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    known.remember("a", moment, {"x": 1, "y": 2})
    known.remember("b", moment, {"x": 1, "y": 2})
    assert known.get("a") is not None  # now the most recent
    known.remember("c", moment, {"x": 1, "y": 2})
    assert (known.get("a"), known.get("b"), known.get("c")) == (
        (moment, {"x": 1, "y": 2}),
        None,
        (moment, {"x": 1, "y": 2}),
    )
    known.remember("a", moment, {"z": 3, "w": 4})  # the same run: its ids added to those remembered
    assert known.get("a") == (moment, {"x": 1, "y": 2, "z": 3, "w": 4})
    assert known.get("c") is None
