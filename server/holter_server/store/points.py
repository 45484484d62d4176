"""Points: the bulk write path and range reads. All SQL about points lives here.

A point is identified by (run, metric, step) and stored once: a re-sent batch stores nothing
twice, and when a step arrives again with a different value the first stored value is kept
(the later one is counted as a duplicate). Postgres takes a new batch by COPY straight into
the table, and a batch holding points already stored (a retry) through COPY into a
transaction-local staging table and one `INSERT ... ON CONFLICT DO NOTHING`; SQLite through
`INSERT OR IGNORE` executemany on the raw connection. The same transaction brings the
metric's rollups (store/rollups.py) up to date with what was actually stored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np
import psycopg
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from holter_server.store import rollups as rollups_store
from holter_server.store.database import insert_ignoring_conflicts
from holter_server.store.models import MetricRow, PointRow

# One metric's share of a batch: parallel lists of steps, values and wall times (or None).
Column = tuple[Sequence[int], Sequence[float], Sequence[float | None]]
# Steps per `IN (...)` lookup: well under SQLite's bound on bound parameters.
_LOOKUP_CHUNK = 5_000


@dataclass(frozen=True)
class StoredCount:
    """What one batch did to the store."""

    received: int
    stored: int

    @property
    def duplicates(self) -> int:
        return self.received - self.stored


@dataclass(frozen=True)
class SeriesSlice:
    """Points of one metric in step order; NaN and ±Inf as themselves."""

    steps: list[int]
    values: list[float]
    wall_times: list[float | None]


def metric_ids(*, session: Session, run_id: str, names: Iterable[str]) -> dict[str, int]:
    """Return the per-run id of each metric name, creating the ones not seen before."""
    wanted = set(names)
    ids = _existing_metric_ids(session=session, run_id=run_id, names=wanted)
    # Another writer may take the same new id first; the insert then skips and we go round again.
    for _attempt in range(10):
        missing = sorted(wanted - ids.keys())
        if not missing:
            return ids
        next_id = session.scalar(select(func.coalesce(func.max(MetricRow.metric_id), 0)).where(MetricRow.run_id == run_id))
        rows = [{"run_id": run_id, "metric_id": next_id + i + 1, "name": name, "count": 0} for i, name in enumerate(missing)]
        session.execute(insert_ignoring_conflicts(session, MetricRow).values(rows))
        ids = _existing_metric_ids(session=session, run_id=run_id, names=wanted)
    raise RuntimeError(f"could not allocate metric ids for run {run_id}")


def _existing_metric_ids(*, session: Session, run_id: str, names: set[str]) -> dict[str, int]:
    rows = session.execute(select(MetricRow.name, MetricRow.metric_id).where(MetricRow.run_id == run_id, MetricRow.name.in_(names)))
    return {name: metric_id for name, metric_id in rows}


def add_points(*, session: Session, run_id: str, columns: dict[str, Column]) -> StoredCount:
    """Store a batch (metric name → column) once, and keep each metric's summary current."""
    ids = metric_ids(session=session, run_id=run_id, names=columns.keys())
    by_id = {ids[name]: column for name, column in columns.items() if len(column[0])}
    if session.get_bind().dialect.name == "postgresql":
        stored = _insert_postgres(session, run_id, by_id)
    else:
        stored = _insert_sqlite(session, run_id, by_id)
    _update_rollups(session, run_id, by_id, stored)
    _update_metric_summaries(session, run_id, by_id, stored)
    received = sum(len(column[0]) for column in by_id.values())
    return StoredCount(received=received, stored=sum(stored.values()))


def _insert_postgres(session: Session, run_id: str, by_id: dict[int, Column]) -> dict[int, int]:
    """COPY straight into the points table, which is about twice as fast as going through a
    staging table; when any point is already stored (a retried batch) the COPY fails on the key,
    its savepoint is rolled back, and the batch goes the exactly-once way instead."""
    raw = session.connection().connection.driver_connection
    try:
        with raw.transaction(), raw.cursor() as cursor:  # a savepoint inside the request's transaction
            with cursor.copy("COPY points (run_id, metric_id, step, value, wall_time) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["varchar", "int4", "int8", "float8", "float8"])
                for metric_id, (steps, values, times) in by_id.items():
                    for row in zip(repeat(run_id), repeat(metric_id), steps, values, times):
                        copy.write_row(row)
        return {metric_id: len(column[0]) for metric_id, column in by_id.items()}
    except psycopg.errors.UniqueViolation:
        return _insert_postgres_once(raw, run_id, by_id)


def _insert_postgres_once(raw: psycopg.Connection, run_id: str, by_id: dict[int, Column]) -> dict[int, int]:
    """Store the points not stored yet: COPY into a transaction-local staging table, then one
    INSERT ... ON CONFLICT DO NOTHING; returns how many were new per metric."""
    with raw.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS points_incoming "
            "(metric_id integer, step bigint, value double precision, wall_time double precision) "
            "ON COMMIT DELETE ROWS"
        )
        with cursor.copy("COPY points_incoming (metric_id, step, value, wall_time) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "int8", "float8", "float8"])
            for metric_id, (steps, values, times) in by_id.items():
                for row in zip(repeat(metric_id), steps, values, times):
                    copy.write_row(row)
        cursor.execute(
            "WITH inserted AS ("
            " INSERT INTO points (run_id, metric_id, step, value, wall_time)"
            " SELECT %s, metric_id, step, value, wall_time FROM points_incoming"
            " ON CONFLICT DO NOTHING RETURNING metric_id)"
            " SELECT metric_id, count(*) FROM inserted GROUP BY metric_id",
            (run_id,),
        )
        stored = dict(cursor.fetchall())
        cursor.execute("TRUNCATE points_incoming")
    return stored


def _insert_sqlite(session: Session, run_id: str, by_id: dict[int, Column]) -> dict[int, int]:
    raw = session.connection().connection.driver_connection
    stored = {}
    for metric_id, (steps, values, times) in by_id.items():
        before = raw.total_changes
        raw.executemany(
            "INSERT OR IGNORE INTO points (run_id, metric_id, step, value, wall_time) VALUES (?, ?, ?, ?, ?)",
            zip(repeat(run_id), repeat(metric_id), steps, values, times),
        )
        stored[metric_id] = raw.total_changes - before
    return stored


def _update_rollups(session: Session, run_id: str, by_id: dict[int, Column], stored: dict[int, int]) -> None:
    # When every distinct step of a metric's column was stored, the stored points are exactly
    # the column with repeats dropped, first kept (both stores insert in batch order), so its
    # summary adds to the rollups. When none was, nothing changed. Otherwise which values won is
    # unknown here, and the touched buckets are rebuilt from the store.
    new_points, touched = {}, {}
    for metric_id, (steps, values, _times) in by_id.items():
        count = stored.get(metric_id, 0)
        if not count:
            continue
        step_array = np.asarray(steps, dtype=np.int64)
        order = np.argsort(step_array, kind="stable")
        step_array = step_array[order]
        first = np.r_[True, step_array[1:] != step_array[:-1]]
        if count == int(first.sum()):
            new_points[metric_id] = (step_array[first], np.asarray(values, dtype=np.float64)[order][first])
        else:
            touched[metric_id] = step_array[first]
    if not new_points and not touched:
        return
    rollups_store.lock_metrics(session=session, run_id=run_id, metric_ids=[*new_points, *touched])
    rollups_store.add_to_rollups(session=session, run_id=run_id, new_points=new_points)
    rollups_store.rebuild_rollups(session=session, run_id=run_id, touched=touched)


def _update_metric_summaries(session: Session, run_id: str, by_id: dict[int, Column], stored: dict[int, int]) -> None:
    """Bring every touched metric's count, first and last step and latest value up to date, in
    one statement (a statement per metric was most of a small batch's cost)."""
    # Every step of the batch is in the store now (new or kept from before), so the batch's
    # first and last steps bound the series correctly even when some points were duplicates.
    rows = [(metric_id, stored.get(metric_id, 0), min(column[0]), max(column[0])) for metric_id, column in by_id.items()]
    if not rows:
        return
    params: dict[str, int | str] = {"run_id": run_id}
    values = []
    for i, (metric_id, count, first, last) in enumerate(rows):
        values.append(f"(CAST(:m{i} AS INTEGER), CAST(:n{i} AS BIGINT), CAST(:f{i} AS BIGINT), CAST(:l{i} AS BIGINT))")
        params.update({f"m{i}": metric_id, f"n{i}": count, f"f{i}": first, f"l{i}": last})
    new_last = "CASE WHEN metrics.last_step IS NULL OR metrics.last_step < v.last_step THEN v.last_step ELSE metrics.last_step END"
    # VALUES columns are called column1, column2, ... on both SQLite and Postgres.
    session.execute(text(
        "UPDATE metrics SET"
        " count = metrics.count + v.stored,"
        " first_step = CASE WHEN metrics.first_step IS NULL OR metrics.first_step > v.first_step THEN v.first_step ELSE metrics.first_step END,"
        f" last_step = {new_last},"
        f" last_value = (SELECT p.value FROM points p WHERE p.run_id = metrics.run_id AND p.metric_id = metrics.metric_id AND p.step = {new_last})"
        " FROM (SELECT column1 AS metric_id, column2 AS stored, column3 AS first_step, column4 AS last_step"
        f" FROM (VALUES {', '.join(values)}) AS vals) AS v"
        " WHERE metrics.run_id = :run_id AND metrics.metric_id = v.metric_id"
    ), params)


def read_points(*, session: Session, run_id: str, metric_id: int, start: int | None, end: int | None, limit: int) -> SeriesSlice:
    """Points of one metric with start <= step <= end, in step order, at most `limit` of them."""
    query = select(PointRow.step, PointRow.value, PointRow.wall_time).where(PointRow.run_id == run_id, PointRow.metric_id == metric_id)
    if start is not None:
        query = query.where(PointRow.step >= start)
    if end is not None:
        query = query.where(PointRow.step <= end)
    rows = session.execute(query.order_by(PointRow.step).limit(limit)).all()
    return SeriesSlice(
        steps=[row[0] for row in rows],
        values=[math.nan if row[1] is None else row[1] for row in rows],
        wall_times=[row[2] for row in rows],
    )


def wall_times_at(*, session: Session, run_id: str, metric_id: int, steps: Sequence[int]) -> list[float | None]:
    """The wall time of the point at each of `steps` (None where it has none), in the order given."""
    found: dict[int, float | None] = {}
    for lo in range(0, len(steps), _LOOKUP_CHUNK):
        chunk = list(steps[lo:lo + _LOOKUP_CHUNK])
        query = select(PointRow.step, PointRow.wall_time).where(
            PointRow.run_id == run_id, PointRow.metric_id == metric_id, PointRow.step.in_(chunk))
        found.update((row[0], row[1]) for row in session.execute(query))
    return [found.get(step) for step in steps]


def count_points(*, session: Session, run_id: str) -> int:
    """How many points a run holds (all metrics)."""
    return session.scalar(select(func.count()).select_from(PointRow).where(PointRow.run_id == run_id)) or 0


def list_metrics_with_prefix(*, session: Session, run_id: str, prefix: str, limit: int) -> list[MetricRow]:
    """The run's metrics whose name starts with `prefix` (taken literally), by name, at most `limit`."""
    # substr, not LIKE: SQLite's LIKE ignores case, and a prefix may hold % or _.
    query = select(MetricRow).where(MetricRow.run_id == run_id, func.substr(MetricRow.name, 1, len(prefix)) == prefix)
    return list(session.scalars(query.order_by(MetricRow.name).limit(limit)))


def get_metrics(*, session: Session, run_id: str, names: Iterable[str]) -> dict[str, MetricRow]:
    """The run's metrics with these names (name → row); names it lacks are left out."""
    rows = session.scalars(select(MetricRow).where(MetricRow.run_id == run_id, MetricRow.name.in_(set(names))))
    return {row.name: row for row in rows}

