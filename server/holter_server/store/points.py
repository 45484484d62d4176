"""Points: the bulk write path and range reads. All SQL about points lives here.

A point is identified by (run, metric, step) and stored once: a re-sent batch stores nothing
twice, and when a step arrives again with a different value the first stored value is kept
(the later one is counted as a duplicate). How a batch gets in fast is the database's own
business (store/backends: COPY and arrays on Postgres, executemany on SQLite). The same
transaction brings the metric's rollups (store/rollups.py) up to date with what was actually stored.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain
from typing import Any

import numpy as np
from sqlalchemy import func, insert, select, tuple_
from sqlalchemy.orm import Session

from holter_server.store import rollups as rollups_store
from holter_server.store import runs as runs_store
from holter_server.store.backends import backend_for
from holter_server.store.backends.base import Column, Conflict
from holter_server.store.models import MetricRow, PointRow, RunRow
from holter_server.vocabulary.statuses import RunStatus

__all__ = ["Column", "Conflict", "KnownMetricIds", "RunMetricIds", "SeriesSlice", "StoredCount"]

# Steps per `IN (...)` lookup: well under SQLite's bound on bound parameters.
_LOOKUP_CHUNK = 5_000
# Metrics per INSERT or UPDATE: 4 parameters each, well under Postgres' 65,535 per statement
# and SQLite's 32,766.
_INSERT_CHUNK = 5_000


@dataclass(frozen=True)
class StoredCount:
    """What one batch did to the store: points received, newly stored, the metrics re-sent with
    another value (by name), and the new metrics refused because the run had no room left."""

    received: int
    stored: int
    conflicts: dict[str, Conflict] = field(default_factory=dict)
    over_limit: list[str] = field(default_factory=list)

    @property
    def duplicates(self) -> int:
        return self.received - self.stored


@dataclass(frozen=True)
class SeriesSlice:
    """Points of one metric in step order; NaN and ±Inf as themselves."""

    steps: list[int]
    values: list[float]
    wall_times: list[float | None]


@dataclass
class RunPointsSlice:
    """Points of several metrics of a run in (metric id, step) order; NaN and ±Inf as themselves."""

    metric_ids: list[int]
    steps: list[int]
    values: list[float]
    wall_times: list[float | None]


@dataclass(frozen=True)
class RunMetricIds:
    """A run as a batch found it: its status (None: no such run), its creation moment (which
    tells the run from one deleted before it under the same id) and metric ids by name."""

    status: str | None
    created_at: datetime | None
    ids: dict[str, int]


def run_and_metric_ids(*, session: Session, run_id: str, names: Iterable[str]) -> RunMetricIds:
    """The run's status and creation moment and the ids of those of `names` it already has: on
    Postgres one query, sent with the transaction's BEGIN."""
    wanted = list(dict.fromkeys(names))
    found = backend_for(session).run_status_and_metric_ids(session, run_id, wanted)
    if found is not None:
        return RunMetricIds(*found)
    row = session.execute(select(RunRow.status, RunRow.created_at).where(RunRow.id == run_id)).one_or_none()
    if row is None:
        return RunMetricIds(None, None, {})
    return RunMetricIds(row[0], row[1], _existing_metric_ids(session=session, run_id=run_id, names=wanted))


class KnownMetricIds:
    """The metric ids of recently written runs, by name, as this process last read them, so that
    the usual small batch need not read them again before its writes (a round trip and a
    statement of every batch). Only a hint: a batch written with them checks, in its own round
    trip, that the run is still the one they were read from (`add_points_as_known`), and other
    processes' deletes and re-creations are seen that way, not told. A metric's id never
    changes while its run lives (ids are only added; a run's metrics go only with the run).
    Bounded by names held; the least recently written runs go first. Thread-safe (the API
    serves requests on a thread pool)."""

    def __init__(self, max_names: int = 200_000) -> None:
        self._max_names = max_names
        self._names = 0
        self._runs: OrderedDict[str, tuple[datetime, dict[str, int]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, run_id: str) -> tuple[datetime, dict[str, int]] | None:
        """The run's creation moment and metric ids as last remembered, if any."""
        with self._lock:
            known = self._runs.get(run_id)
            if known is not None:
                self._runs.move_to_end(run_id)
            return known

    def remember(self, run_id: str, created_at: datetime, ids: dict[str, int]) -> None:
        """Add ids read from the run (created at `created_at`) in a transaction."""
        if len(ids) > self._max_names:
            return
        with self._lock:
            known = self._runs.pop(run_id, None)
            if known is not None:
                self._names -= len(known[1])
                if known[0] == created_at:
                    ids = {**known[1], **ids}
            self._runs[run_id] = (created_at, ids)
            self._names += len(ids)
            while self._names > self._max_names:
                _run, (_created, gone) = self._runs.popitem(last=False)
                self._names -= len(gone)

    def forget(self, run_id: str) -> None:
        """Drop what is remembered of the run (its ids proved stale)."""
        with self._lock:
            known = self._runs.pop(run_id, None)
            if known is not None:
                self._names -= len(known[1])


def metric_ids(
    *, session: Session, run_id: str, names: Iterable[str], max_metrics: int, known: dict[str, int] | None = None
) -> tuple[dict[str, int], list[str]]:
    """The per-run id of each metric name, creating the ones not seen before while the run has
    fewer than `max_metrics` (new names in the order given); returns (ids, names refused for lack of room).

    New ids are taken under a per-run lock, so writers adding metrics to one run at the same
    time (ranks, threads, retries) each get their own; batches whose metrics all exist take no lock.
    """
    wanted = list(dict.fromkeys(names))
    if known is not None and all(name in known for name in wanted):
        return {name: known[name] for name in wanted}, []
    ids = _existing_metric_ids(session=session, run_id=run_id, names=wanted)
    if len(ids) == len(wanted):
        return ids, []
    # Postgres: an advisory lock; SQLite: its one write lock, taken now, so the ids read next are final
    backend_for(session).lock_metric_allocation(session, run_id)
    ids = _existing_metric_ids(
        session=session, run_id=run_id, names=wanted
    )  # again: a writer before us may have added some
    missing = [name for name in wanted if name not in ids]
    count, top = session.execute(
        select(func.count(), func.coalesce(func.max(MetricRow.metric_id), 0)).where(MetricRow.run_id == run_id)
    ).one()
    room = max(0, max_metrics - count)
    new, refused = missing[:room], missing[room:]
    rows: list[dict[str, Any]] = [
        {"run_id": run_id, "metric_id": top + i + 1, "name": name, "count": 0} for i, name in enumerate(new)
    ]
    for lo in range(0, len(rows), _INSERT_CHUNK):
        session.execute(insert(MetricRow), rows[lo : lo + _INSERT_CHUNK])
    ids.update((row["name"], row["metric_id"]) for row in rows)
    return ids, refused


def _existing_metric_ids(*, session: Session, run_id: str, names: Sequence[str]) -> dict[str, int]:
    ids: dict[str, int] = {}
    for lo in range(0, len(names), _LOOKUP_CHUNK):
        chunk = names[lo : lo + _LOOKUP_CHUNK]
        rows = session.execute(
            select(MetricRow.name, MetricRow.metric_id).where(MetricRow.run_id == run_id, MetricRow.name.in_(chunk))
        )
        ids.update((name, metric_id) for name, metric_id in rows)
    return ids


def add_points(
    *,
    session: Session,
    run_id: str,
    columns: dict[str, Column],
    max_metrics: int,
    known_ids: dict[str, int] | None = None,
    then: Callable[[], None] | None = None,
) -> StoredCount:
    """Store a batch (metric name → column) once, and keep each metric's summary current.

    Metrics new to the run beyond `max_metrics` are not stored (`StoredCount.over_limit`).
    `known_ids`: metric ids the caller just read in this transaction (`run_and_metric_ids`).
    `then`: more writes of the same transaction, whose answers nobody reads (an UPDATE): run
    after the summaries, in their round trip when the batch goes the usual way on Postgres.

    A small batch on Postgres goes in one round trip with its rollups, summaries and `then`,
    all written as if every point were new (the usual batch; `insert_points_then`), and the
    metrics of which some points were already stored are corrected after (`_correct_assumed`).
    The caller records the run's activity (`runs.record_activity`, as ingest does): that makes the
    run due for live detection.
    """
    ids, over_limit = metric_ids(
        session=session, run_id=run_id, names=columns.keys(), max_metrics=max_metrics, known=known_ids
    )
    by_id = {ids[name]: column for name, column in columns.items() if name in ids and len(column[0])}
    distinct: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    backend = backend_for(session)

    def as_if_all_new() -> None:
        _write_as_if_all_new(session, run_id, by_id, distinct)
        if then is not None:
            then()

    done = backend.insert_points_then(session, run_id, by_id, as_if_all_new) if by_id else None
    if done is None:
        stored, conflicts = backend.insert_points(session, run_id, by_id)
        _update_rollups_and_summaries(session, run_id, by_id, stored, then)
    else:
        stored, conflicts = done
        _correct_assumed(session, run_id, distinct, stored)
    received = sum(len(column[0]) for column in by_id.values())
    names = {metric_id: name for name, metric_id in ids.items()}
    return StoredCount(
        received=received,
        stored=sum(stored.values()),
        conflicts={names[metric_id]: conflict for metric_id, conflict in conflicts.items()},
        over_limit=over_limit,
    )


def add_points_as_known(
    *, session: Session, run_id: str, columns: dict[str, Column], created_at: datetime, ids: dict[str, int]
) -> StoredCount | None:
    """`add_points` for the usual small batch of a live run whose metrics are all known to this
    process (`KnownMetricIds`: `ids` by name, read from the run created at `created_at`), with
    the run's activity recorded, in one round trip and without reading the ids first.

    None when the batch could not go this way: nothing was written (this database has no such
    way, or the batch is large), or the ids proved not to be the run's (deleted, re-created
    under its id) or the run was stalled or gone, and then what was written is wrong: the caller
    rolls the transaction back and goes the usual way. The session's transaction must begin here."""
    by_id = {ids[name]: column for name, column in columns.items() if len(column[0])}
    if not by_id:
        return None
    last_step = max(max(column[0]) for column in by_id.values())
    distinct: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    done = backend_for(session).insert_known_points_then(
        session,
        run_id,
        by_id,
        lambda: _write_as_if_all_new(session, run_id, by_id, distinct),
        runs_store.ACTIVITY_RETURNING_RUN,
        runs_store.activity_params(run_id=run_id, last_step=last_step),
    )
    if done is None or done.run is None:
        return None
    status, created = done.run
    if created != created_at or status == RunStatus.STALLED:  # a stalled run is resumed (an event) the usual way
        return None
    _correct_assumed(session, run_id, distinct, done.stored)
    names = {metric_id: name for name, metric_id in ids.items() if metric_id in by_id}
    return StoredCount(
        received=sum(len(column[0]) for column in by_id.values()),
        stored=sum(done.stored.values()),
        conflicts={names[metric_id]: conflict for metric_id, conflict in done.conflicts.items()},
    )


def _write_as_if_all_new(
    session: Session, run_id: str, by_id: dict[int, Column], distinct: dict[int, tuple[np.ndarray, np.ndarray]]
) -> None:
    # what the batch does to the rollups and summaries when every distinct step of it is new
    # (the usual batch), sent with the INSERT; corrected after (`_correct_assumed`) for the
    # metrics where it was not. Fills `distinct` (the batch's distinct points by metric id).
    owners, steps, values = _distinct_columns(by_id)
    distinct.update(_by_metric(owners, steps, values))
    rollups_store.lock_metrics(session=session, run_id=run_id, metric_ids=list(distinct))
    rollups_store.add_columns_to_rollups(session=session, run_id=run_id, owners=owners, steps=steps, values=values)
    _update_metric_summaries(
        session,
        run_id,
        by_id,
        {metric_id: len(steps) for metric_id, (steps, _values) in distinct.items()},
        [float(distinct[metric_id][1][-1]) for metric_id in by_id],
    )


def _distinct_columns(by_id: dict[int, Column]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The batch's points (every column non-empty) as both stores keep them when all are new:
    metric ids, steps and values in (metric id, step) order, the first of a step sent twice kept
    (both insert in batch order, and the sort is stable). All metrics at once: a small batch's
    twenty columns sorted one by one cost more in numpy's calls than in sorting."""
    lengths = [len(column[0]) for column in by_id.values()]
    total = sum(lengths)
    owners = np.repeat(np.fromiter(by_id, dtype=np.int64, count=len(by_id)), lengths)
    steps = np.fromiter(chain.from_iterable(column[0] for column in by_id.values()), dtype=np.int64, count=total)
    values = np.fromiter(chain.from_iterable(column[1] for column in by_id.values()), dtype=np.float64, count=total)
    order = np.lexsort((steps, owners))
    owners, steps, values = owners[order], steps[order], values[order]
    first = np.r_[True, (steps[1:] != steps[:-1]) | (owners[1:] != owners[:-1])]
    if first.all():
        return owners, steps, values
    return owners[first], steps[first], values[first]


def _by_metric(owners: np.ndarray, steps: np.ndarray, values: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """`_distinct_columns`' points by metric id: each metric's steps and values (views)."""
    starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
    ends = np.r_[starts[1:], len(owners)]
    return {
        metric_id: (steps[start:end], values[start:end])
        for metric_id, start, end in zip(owners[starts].tolist(), starts.tolist(), ends.tolist())
    }


def _correct_assumed(
    session: Session, run_id: str, distinct: dict[int, tuple[np.ndarray, np.ndarray]], stored: dict[int, int]
) -> None:
    """After a batch's rollups and summaries were written as if all its points were new: for
    each metric of which fewer were (a retry that raced the original, an overlapping replay),
    the buckets its steps touched are rebuilt from the store at every level (which replaces what
    was added), and its count takes back the points not stored. The rollup locks taken for the
    additions are still held, so the rebuild is ordered against other writers as ever."""
    wrong = {
        metric_id: steps for metric_id, (steps, _values) in distinct.items() if stored.get(metric_id, 0) != len(steps)
    }
    if not wrong:
        return
    rollups_store.rebuild_rollups(session=session, run_id=run_id, touched=wrong)
    rows = [
        (metric_id, stored.get(metric_id, 0) - len(steps), int(steps[0]), int(steps[-1]))
        for metric_id, steps in wrong.items()
    ]
    backend_for(session).update_metric_summaries(session, run_id, rows)


def _update_rollups_and_summaries(
    session: Session, run_id: str, by_id: dict[int, Column], stored: dict[int, int], then: Callable[[], None] | None
) -> None:
    # When every distinct step of a metric's column was stored, the stored points are exactly
    # the column with repeats dropped, first kept (both stores insert in batch order), so its
    # summary adds to the rollups. When none was, nothing changed. Otherwise which values won is
    # unknown here, and the touched buckets are rebuilt from the store.
    new_points, touched = {}, {}
    distinct = _by_metric(*_distinct_columns(by_id)) if by_id else {}
    for metric_id, (steps, values) in distinct.items():
        count = stored.get(metric_id, 0)
        if not count:
            continue
        if count == len(steps):
            new_points[metric_id] = (steps, values)
        else:
            touched[metric_id] = steps
    if touched:
        rollups_store.lock_metrics(session=session, run_id=run_id, metric_ids=[*new_points, *touched])
        rollups_store.add_to_rollups(session=session, run_id=run_id, new_points=new_points)
        rollups_store.rebuild_rollups(session=session, run_id=run_id, touched=touched)
        _update_metric_summaries(session, run_id, by_id, stored)
        if then is not None:
            then()
        return
    # The usual batch: nothing to read back, so the lock, the rollups and the summaries go out
    # together in one round trip where the database allows it (a pipeline on Postgres).
    with backend_for(session).writes_together(session):
        if new_points:
            rollups_store.lock_metrics(session=session, run_id=run_id, metric_ids=list(new_points))
            rollups_store.add_to_rollups(session=session, run_id=run_id, new_points=new_points)
        _update_metric_summaries(session, run_id, by_id, stored)
        if then is not None:
            then()


def _update_metric_summaries(
    session: Session,
    run_id: str,
    by_id: dict[int, Column],
    stored: dict[int, int],
    last_values: Sequence[float] | None = None,
) -> None:
    """Bring every touched metric's count, first and last step and latest value up to date, in
    one statement for all of them where the database allows it (a statement per metric was most
    of a small batch's cost)."""
    # Every step of the batch is in the store now (new or kept from before), so the batch's
    # first and last steps bound the series correctly even when some points were duplicates.
    rows = [
        (metric_id, stored.get(metric_id, 0), min(column[0]), max(column[0])) for metric_id, column in by_id.items()
    ]
    if rows:
        backend_for(session).update_metric_summaries(session, run_id, rows, last_values)


def read_points(
    *, session: Session, run_id: str, metric_id: int, start: int | None, end: int | None, limit: int
) -> SeriesSlice:
    """Points of one metric with start <= step <= end, in step order, at most `limit` of them."""
    query = select(PointRow.step, PointRow.value, PointRow.wall_time).where(
        PointRow.run_id == run_id, PointRow.metric_id == metric_id
    )
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


def read_run_points(
    *,
    session: Session,
    run_id: str,
    metric_ids: Sequence[int],
    after: tuple[int, int] | None,
    start: int | None,
    end: int | None,
    limit: int,
) -> RunPointsSlice:
    """Points of several metrics of a run with start <= step <= end, in (metric id, step) order
    after `after` (a keyset: the last (metric id, step) read), at most `limit` of them: small
    series read together, not one statement each. The metric ids' range bounds the index scan
    (an IN list alone is a filter over every point of the run when the planner's statistics are
    stale, as they are for a run just written)."""
    wanted = sorted(metric_ids)
    query = select(PointRow.metric_id, PointRow.step, PointRow.value, PointRow.wall_time).where(
        PointRow.run_id == run_id,
        PointRow.metric_id >= (after[0] if after is not None else wanted[0]),
        PointRow.metric_id <= wanted[-1],
    )
    if len(wanted) != wanted[-1] - wanted[0] + 1:  # not every metric of the range: name them too
        query = query.where(PointRow.metric_id.in_(wanted))
    if after is not None:
        query = query.where(tuple_(PointRow.metric_id, PointRow.step) > tuple_(*after))
    if start is not None:
        query = query.where(PointRow.step >= start)
    if end is not None:
        query = query.where(PointRow.step <= end)
    # a Core statement on the session's connection: no ORM row handling for 50,000 plain tuples
    rows = session.connection().execute(query.order_by(PointRow.metric_id, PointRow.step).limit(limit)).all()
    if not rows:
        return RunPointsSlice([], [], [], [])
    found_ids, steps, values, wall_times = (list(column) for column in zip(*rows))
    return RunPointsSlice(
        metric_ids=found_ids,
        steps=steps,
        values=[math.nan if value is None else value for value in values] if None in values else values,
        wall_times=wall_times,
    )


def read_points_from(
    *, session: Session, starts: Sequence[tuple[str, int, int]], limit_each: int
) -> dict[tuple[str, int], SeriesSlice]:
    """Points of many metrics at once ((run, metric id, first step) each): per metric, its points
    from that step on, in step order, at most `limit_each` of them, as live detection reads them:
    steps and values (its `wall_times` are left empty). One query per run on Postgres."""
    out = {(run_id, metric_id): SeriesSlice([], [], []) for run_id, metric_id, _ in starts}
    if not starts:
        return out
    found = backend_for(session).read_points_from(session, starts, limit_each)
    if found is not None:
        return {key: SeriesSlice(*columns) for key, columns in found.items()}
    for run_id, metric_id, start in starts:
        found_one = read_points(
            session=session, run_id=run_id, metric_id=metric_id, start=start, end=None, limit=limit_each
        )
        out[(run_id, metric_id)] = SeriesSlice(found_one.steps, found_one.values, [])
    return out


def wall_times_at(*, session: Session, run_id: str, metric_id: int, steps: Sequence[int]) -> list[float | None]:
    """The wall time of the point at each of `steps` (None where it has none), in the order given."""
    found: dict[int, float | None] = {}
    for lo in range(0, len(steps), _LOOKUP_CHUNK):
        chunk = list(steps[lo : lo + _LOOKUP_CHUNK])
        query = select(PointRow.step, PointRow.wall_time).where(
            PointRow.run_id == run_id, PointRow.metric_id == metric_id, PointRow.step.in_(chunk)
        )
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
