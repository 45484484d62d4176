"""SQLite: executemany on the raw sqlite3 connection, one writer at a time (no locks to take).

SQLite stores NaN as NULL, so a NULL read back is NaN, and NULL and NaN are the same value when
a re-sent point is compared with the stored one.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from itertools import repeat
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import UpdateBase

from holter_server.store.backends.base import (
    CONFLICT_STEPS_SHOWN,
    Column,
    Conflict,
    KnownInsert,
    PointColumns,
    RollupUpsert,
    SummaryRow,
)

# Steps per `IN (...)` lookup and metrics per UPDATE (4 parameters each): well under SQLite's
# bound of 32,766 bound parameters.
_LOOKUP_CHUNK = 5_000
_UPDATE_CHUNK = 5_000


def _raw(session: Session) -> sqlite3.Connection:
    connection: sqlite3.Connection | None = session.connection().connection.driver_connection
    assert connection is not None  # None only once the pool has let the connection go
    return connection


class SqliteBackend:
    """The SQLite way of the store's bulk statements."""

    name = "sqlite"

    def run_status_and_metric_ids(
        self, session: Session, run_id: str, names: list[str]
    ) -> tuple[str | None, datetime | None, dict[str, int]] | None:
        return None

    def lock_metric_allocation(self, session: Session, run_id: str) -> None:
        # its one write lock, taken now, so the ids read next are final
        session.execute(text("UPDATE runs SET updated_at = updated_at WHERE id = :run_id"), {"run_id": run_id})

    def insert_points(
        self, session: Session, run_id: str, by_id: dict[int, Column]
    ) -> tuple[dict[int, int], dict[int, Conflict]]:
        raw = _raw(session)
        stored, conflicts = {}, {}
        for metric_id, (steps, values, times) in by_id.items():
            before = raw.total_changes
            raw.executemany(
                "INSERT OR IGNORE INTO points (run_id, metric_id, step, value, wall_time) VALUES (?, ?, ?, ?, ?)",
                zip(repeat(run_id), repeat(metric_id), steps, values, times),
            )
            stored[metric_id] = raw.total_changes - before
            if stored[metric_id] < len(steps):
                conflict = _conflict(raw, run_id, metric_id, steps, values)
                if conflict is not None:
                    conflicts[metric_id] = conflict
        return stored, conflicts

    def insert_points_then(
        self, session: Session, run_id: str, by_id: dict[int, Column], then: Callable[[], None]
    ) -> tuple[dict[int, int], dict[int, Conflict]] | None:
        return None  # no round trips to save: the database is in this process

    def insert_known_points_then(
        self,
        session: Session,
        run_id: str,
        by_id: dict[int, Column],
        then: Callable[[], None],
        activity: UpdateBase,
        params: dict[str, Any],
    ) -> KnownInsert | None:
        return None  # the lookup it would save is no round trip here

    def update_metric_summaries(
        self, session: Session, run_id: str, rows: list[SummaryRow], last_values: Sequence[float] | None = None
    ) -> None:
        # the latest value read from the points: SQLite stores NaN as NULL, which the batch's value would not say
        for lo in range(0, len(rows), _UPDATE_CHUNK):
            _update_summary_rows(session, run_id, rows[lo : lo + _UPDATE_CHUNK])

    def read_points_from(
        self, session: Session, starts: Sequence[tuple[str, int, int]], limit_each: int
    ) -> dict[tuple[str, int], PointColumns] | None:
        return None

    def touch_detection_rows(self, session: Session, keys: Sequence[tuple[str, int]], moment: datetime) -> bool:
        return False

    def save_detected_steps(self, session: Session, rows: Sequence[tuple[str, int, int]], moment: datetime) -> bool:
        return False

    def writes_together(self, session: Session) -> AbstractContextManager[None]:
        return nullcontext()

    def lock_rollup_slots(self, session: Session, run_id: str, slots: list[int]) -> None:
        return  # one writer at a time anyway

    def upsert_rollups(
        self, session: Session, run_id: str, columns: list[np.ndarray], lists: list[list[Any]], statement: RollupUpsert
    ) -> None:
        marks = ", ".join("?" * (len(lists) + 1))
        order = np.lexsort((columns[2], columns[1], columns[0]))
        rows = [(run_id, *row) for row in zip(*lists)]
        sql = (
            f"INSERT INTO rollups ({statement.names}) VALUES ({marks}) ON CONFLICT ({statement.key}) DO UPDATE SET "
            # SQLite's REAL addition overflows to infinity by itself, as numpy's does
            + statement.on_conflict.format(finite_sum="rollups.finite_sum + excluded.finite_sum")
        )
        try:
            _raw(session).executemany(sql, [rows[index] for index in order.tolist()])
        except sqlite3.IntegrityError as exc:
            # a metric deleted with its run since the batch read its ids: said as SQLAlchemy says
            # it, so the store's callers need not know this write went by the raw connection
            raise IntegrityError(sql, None, exc) from exc

    def fetch_columns(self, session: Session, sql: str, params: Sequence[Any], kinds: str) -> list[np.ndarray]:
        rows = _raw(session).execute(sql.format(nan="NULL").replace("%s", "?"), params).fetchall()
        columns = list(zip(*rows)) if rows else [()] * len(kinds)
        return [
            np.asarray(column, dtype=np.int64 if kind == "i" else np.float64) for column, kind in zip(columns, kinds)
        ]

    def insert_ignoring_conflicts(self, model: type) -> sqlite.Insert:
        return sqlite.insert(model).on_conflict_do_nothing()


def _conflict(
    raw: sqlite3.Connection, run_id: str, metric_id: int, steps: Sequence[int], values: Sequence[float]
) -> Conflict | None:
    """The points of a column whose stored value at their step is another one."""
    kept: dict[int, float | None] = {}
    distinct = list(dict.fromkeys(steps))
    for lo in range(0, len(distinct), _LOOKUP_CHUNK):
        chunk = distinct[lo : lo + _LOOKUP_CHUNK]
        query = (
            "SELECT step, value FROM points WHERE run_id = ? AND metric_id = ? AND step IN "
            f"({','.join('?' * len(chunk))})"
        )
        kept.update(raw.execute(query, (run_id, metric_id, *chunk)).fetchall())
    differing = sorted(step for step, value in zip(steps, values) if not _same_value(kept.get(step), value))
    return Conflict(count=len(differing), steps=differing[:CONFLICT_STEPS_SHOWN]) if differing else None


def _same_value(stored: float | None, sent: float) -> bool:
    if stored is None:
        return math.isnan(sent)
    return stored == sent


def _update_summary_rows(session: Session, run_id: str, rows: list[SummaryRow]) -> None:
    params: dict[str, int | str] = {"run_id": run_id}
    values = []
    for i, (metric_id, count, first, last) in enumerate(rows):
        values.append(f"(CAST(:m{i} AS INTEGER), CAST(:n{i} AS BIGINT), CAST(:f{i} AS BIGINT), CAST(:l{i} AS BIGINT))")
        params.update({f"m{i}": metric_id, f"n{i}": count, f"f{i}": first, f"l{i}": last})
    new_last = (
        "CASE WHEN metrics.last_step IS NULL OR metrics.last_step < v.last_step THEN v.last_step ELSE "
        "metrics.last_step END"
    )
    # VALUES columns are called column1, column2, ...
    session.execute(
        text(
            "UPDATE metrics SET"
            " count = metrics.count + v.stored,"
            " first_step = CASE WHEN metrics.first_step IS NULL OR metrics.first_step > v.first_step THEN "
            "v.first_step ELSE metrics.first_step END,"
            f" last_step = {new_last},"
            " last_value = (SELECT p.value FROM points p WHERE p.run_id = metrics.run_id AND p.metric_id = "
            f"metrics.metric_id AND p.step = {new_last})"
            " FROM (SELECT column1 AS metric_id, column2 AS stored, column3 AS first_step, column4 AS last_step"
            f" FROM (VALUES {', '.join(values)}) AS vals) AS v"
            " WHERE metrics.run_id = :run_id AND metrics.metric_id = v.metric_id"
        ),
        params,
    )


SQLITE = SqliteBackend()
