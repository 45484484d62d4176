"""Postgres: COPY and arrays through psycopg's own connection, advisory locks, pipelines.

A small batch (the usual one a second from a training job) goes in by one
`INSERT ... SELECT FROM unnest(arrays) ON CONFLICT DO NOTHING`; a large new batch by COPY
straight into the table; a large batch holding points already stored (a retry) through COPY into
a transaction-local staging table and one `INSERT ... ON CONFLICT DO NOTHING`. Reads of numeric
columns come back as binary COPY, decoded by numpy without a Python object per value.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from itertools import repeat
from typing import Any

import numpy as np
import psycopg
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
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

# Batches up to this many points go as one INSERT of arrays (one round trip, no savepoint);
# larger ones by COPY, which is faster per point.
SMALL_BATCH_POINTS = 5_000

_NEW_LAST = (
    "CASE WHEN metrics.last_step IS NULL OR metrics.last_step < v.last_step THEN v.last_step ELSE metrics.last_step END"
)


def _raw(session: Session) -> psycopg.Connection:
    connection: psycopg.Connection | None = session.connection().connection.driver_connection
    assert connection is not None  # None only once the pool has let the connection go
    return connection


def _cursor(session: Session) -> psycopg.Cursor:
    return _raw(session).cursor()


def _small(by_id: dict[int, Column]) -> bool:
    """Whether a batch goes by one INSERT in a pipeline (else by COPY, which a pipeline cannot hold)."""
    return sum(len(column[0]) for column in by_id.values()) <= SMALL_BATCH_POINTS


@functools.cache
def _psycopg_text(statement: UpdateBase, dialect: Dialect) -> tuple[str, dict[str, Any]]:
    """A SQLAlchemy statement as the text psycopg takes (`%(name)s` parameters) and the values of
    its literal parameters, for a statement sent on a raw cursor in a pipeline."""
    compiled = statement.compile(dialect=dialect)
    return str(compiled), dict(compiled.params)


# Two finite sums of a rollup bucket added. Postgres refuses a float8 addition whose result is
# past the largest double ("value out of range: overflow": a bucket of points near 1.8e308, or
# a small batch re-sent, written as new and corrected after); such a sum is infinite instead, as
# numpy's sum of one batch is. The halves never overflow; NaN (inf + -inf) stays NaN.
_FINITE_SUM_MERGE = (
    "CASE WHEN abs(rollups.finite_sum / 2 + excluded.finite_sum / 2) >= 8.988465674311579e307"
    " THEN sign(rollups.finite_sum / 2 + excluded.finite_sum / 2) * 'Infinity'::float8"
    " ELSE rollups.finite_sum + excluded.finite_sum END"
)


class PostgresBackend:
    """The Postgres way of the store's bulk statements."""

    name = "postgresql"

    def run_status_and_metric_ids(
        self, session: Session, run_id: str, names: list[str]
    ) -> tuple[str | None, datetime | None, dict[str, int]] | None:
        # sent with the transaction's BEGIN: one round trip
        raw = _raw(session)
        with raw.pipeline(), raw.cursor() as cursor:
            cursor.execute(
                "SELECT r.status, r.created_at, m.name, m.metric_id FROM runs r"
                " LEFT JOIN metrics m ON m.run_id = r.id AND m.name = ANY(%s)"
                " WHERE r.id = %s",
                (names, run_id),
            )
            rows = cursor.fetchall()
        if not rows:
            return None, None, {}
        return rows[0][0], rows[0][1], {name: metric_id for _status, _created, name, metric_id in rows if name}

    def lock_metric_allocation(self, session: Session, run_id: str) -> None:
        # an advisory lock keyed (run, 0), taken before any rollup lock (run, slot >= 1), so the
        # order is the same for every writer
        with _cursor(session) as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s), 0)", (run_id,))

    def insert_points(
        self, session: Session, run_id: str, by_id: dict[int, Column]
    ) -> tuple[dict[int, int], dict[int, Conflict]]:
        if _small(by_id):
            return _insert_small(session, run_id, by_id)
        return _insert_copy(session, run_id, by_id)

    def insert_points_then(
        self, session: Session, run_id: str, by_id: dict[int, Column], then: Callable[[], None]
    ) -> tuple[dict[int, int], dict[int, Conflict]] | None:
        # a small batch: its INSERT and `then` in one pipeline (one round trip where there were
        # two); a large one goes by COPY, which a pipeline cannot hold
        if not _small(by_id):
            return None
        return _insert_small(session, run_id, by_id, then)

    def insert_known_points_then(
        self,
        session: Session,
        run_id: str,
        by_id: dict[int, Column],
        then: Callable[[], None],
        activity: UpdateBase,
        params: dict[str, Any],
    ) -> KnownInsert | None:
        # the usual small batch without the lookup of its run and metric ids before it (a round
        # trip and a statement): the run's activity, last in the pipeline, answers whether the
        # run is still the one the ids were read from
        if not _small(by_id):
            return None
        raw = _raw(session)
        # the store's statement as psycopg's text (compiled once), sent on a cursor of its own so
        # that its answer is read after the pipeline, not awaited inside it
        text, literals = _psycopg_text(activity, session.get_bind().dialect)
        answered: list[psycopg.Cursor] = []

        def then_and_activity() -> None:
            then()
            cursor = raw.cursor()
            cursor.execute(text, {**literals, **params})
            answered.append(cursor)

        try:
            stored, conflicts = _insert_small(session, run_id, by_id, then_and_activity)
        except psycopg.errors.ForeignKeyViolation:
            # a remembered id the run has not (deleted, or re-created without that metric yet):
            # the transaction is void, the caller rolls it back
            return KnownInsert(stored={}, conflicts={}, run=None)
        with answered[0] as cursor:
            row = cursor.fetchone()
        return KnownInsert(stored=stored, conflicts=conflicts, run=(row[0], row[1]) if row else None)

    def update_metric_summaries(
        self, session: Session, run_id: str, rows: list[SummaryRow], last_values: Sequence[float] | None = None
    ) -> None:
        # all the batch's metrics in one UPDATE, their figures as arrays (no bound on parameters).
        # The subquery names the run as a constant too: on Citus a subquery correlated by
        # `p.run_id = metrics.run_id` makes the UPDATE a task on every shard, and such multi-shard
        # updates lock every shard in turn, so every run's ingest waited on every other's.
        # Given the values at the last steps (every point new), no subquery: an index probe into
        # the points per metric saved.
        ids, counts, firsts, lasts = (list(column) for column in zip(*rows))
        params: dict[str, Any] = {
            "ids": array_text(ids),
            "counts": array_text(counts),
            "firsts": array_text(firsts),
            "lasts": array_text(lasts),
            "run": run_id,
        }
        if last_values is None:
            last_value = (
                "(SELECT p.value FROM points p WHERE p.run_id = %(run)s AND p.metric_id = "
                f"metrics.metric_id AND p.step = {_NEW_LAST})"
            )
            values, columns = "", ""
        else:
            # a step sent again keeps its stored value: the batch's only when its step is later
            last_value = (
                "CASE WHEN metrics.last_step IS NULL OR metrics.last_step < v.last_step THEN v.last_value"
                " ELSE metrics.last_value END"
            )
            values, columns = ", %(values)s::float8[]", ", last_value"
            params["values"] = binary_array(np.asarray(last_values, dtype=np.float64), "float8")
        with _cursor(session) as cursor:
            cursor.execute(
                "UPDATE metrics SET"
                " count = metrics.count + v.stored,"
                " first_step = CASE WHEN metrics.first_step IS NULL OR metrics.first_step > v.first_step THEN "
                "v.first_step ELSE metrics.first_step END,"
                f" last_step = {_NEW_LAST},"
                f" last_value = {last_value}"
                f" FROM unnest(%(ids)s::int[], %(counts)s::bigint[], %(firsts)s::bigint[], %(lasts)s::bigint[]{values})"
                f" AS v(metric_id, stored, first_step, last_step{columns})"
                " WHERE metrics.run_id = %(run)s AND metrics.metric_id = v.metric_id",
                params,
            )

    def read_points_from(
        self, session: Session, starts: Sequence[tuple[str, int, int]], limit_each: int
    ) -> dict[tuple[str, int], PointColumns] | None:
        out: dict[tuple[str, int], PointColumns] = {
            (run_id, metric_id): ([], [], []) for run_id, metric_id, _ in starts
        }
        by_run: dict[str, list[tuple[int, int]]] = {}
        for run_id, metric_id, start in starts:
            by_run.setdefault(run_id, []).append((metric_id, start))
        with _cursor(session) as cursor:
            # The run is a constant, not a column of the unnest: on Citus a query naming one run goes
            # to that run's shard whole, while a LIMIT in a lateral subquery keyed by a row of a
            # table function that names several runs is refused ("cannot push down this subquery").
            for run_id, wanted in by_run.items():
                metrics, firsts = (list(column) for column in zip(*wanted))
                # a row per metric, its points as two arrays (what detection reads: no wall
                # times), which psycopg parses in C rather than a row at a time in Python
                cursor.execute(
                    "SELECT w.metric_id, array_agg(p.step ORDER BY p.step), array_agg(p.value ORDER BY p.step)"
                    " FROM unnest(%s::int[], %s::bigint[]) AS w(metric_id, first_step)"
                    " CROSS JOIN LATERAL (SELECT step, value FROM points"
                    "  WHERE run_id = %s AND metric_id = w.metric_id AND step >= w.first_step ORDER BY step LIMIT %s) "
                    "AS p"
                    " GROUP BY w.metric_id",
                    (array_text(metrics), array_text(firsts), run_id, limit_each),
                )
                for metric_id, steps, stored in cursor:
                    # NaN is stored as NULL
                    values = [np.nan if value is None else value for value in stored] if None in stored else stored
                    out[(run_id, metric_id)] = (steps, values, [])
        return out

    def touch_detection_rows(self, session: Session, keys: Sequence[tuple[str, int]], moment: datetime) -> bool:
        by_run: dict[str, list[int]] = {}
        for run_id, metric_id in keys:
            by_run.setdefault(run_id, []).append(metric_id)
        # a statement per run (one shard each on Citus), of one text whatever the number of
        # metrics (psycopg parses it once), all in one pipelined round trip
        with _cursor(session) as cursor:
            cursor.executemany(
                "UPDATE detector_states SET updated_at = %s WHERE run_id = %s AND metric_id = ANY(%s::int[])",
                [(moment, run_id, array_text(ids)) for run_id, ids in by_run.items()],
            )
        return True

    def save_detected_steps(self, session: Session, rows: Sequence[tuple[str, int, int]], moment: datetime) -> bool:
        # the statement the portable path sends, row by row in one pipelined round trip, without
        # SQLAlchemy building each row's parameters (a pass saves the progress of every metric it read)
        with _cursor(session) as cursor:
            cursor.executemany(
                "UPDATE detector_states SET detected_step = %s, updated_at = %s WHERE run_id = %s AND metric_id = %s",
                [(step, moment, run_id, metric_id) for run_id, metric_id, step in rows],
            )
        return True

    @contextmanager
    def writes_together(self, session: Session) -> Iterator[None]:
        # a pipeline: the server runs the statements in order, the client waits once
        with _raw(session).pipeline():
            yield

    def lock_rollup_slots(self, session: Session, run_id: str, slots: list[int]) -> None:
        with _cursor(session) as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s), m) FROM unnest(%s::int[]) AS m ORDER BY m",
                (run_id, array_text(slots)),
            )

    def upsert_rollups(
        self, session: Session, run_id: str, columns: list[np.ndarray], lists: list[list[Any]], statement: RollupUpsert
    ) -> None:
        arrays = ", ".join(f"%s::{kind}[]" for kind in statement.types)
        with _cursor(session) as cursor:
            # Rows in key order, so concurrent writers lock shared rows in the same order.
            cursor.execute(
                f"INSERT INTO rollups ({statement.names}) SELECT %s, r.* FROM unnest({arrays}) AS r ORDER BY 1, 2, 3, 4"
                f" ON CONFLICT ({statement.key}) DO UPDATE SET "
                + statement.on_conflict.format(finite_sum=_FINITE_SUM_MERGE),
                (
                    run_id,
                    *(
                        array_text(values, kind) if None in values else binary_array(column, kind)
                        for column, values, kind in zip(columns, lists, statement.types)
                    ),
                ),
            )

    def fetch_columns(self, session: Session, sql: str, params: Sequence[Any], kinds: str) -> list[np.ndarray]:
        # Rows as binary COPY, read by numpy without a Python object per value (a chart read
        # fetches thousands of rows; building tuples cost more than the query).
        statement = "COPY (" + sql.format(nan="'NaN'::float8") + ") TO STDOUT (FORMAT BINARY)"
        with _cursor(session) as cursor, cursor.copy(statement, params) as copy:
            data = b"".join(bytes(chunk) for chunk in copy)
        return decode_binary_copy(data, kinds)

    def insert_ignoring_conflicts(self, model: type) -> postgresql.Insert:
        return postgresql.insert(model).on_conflict_do_nothing()


def array_text(values: Sequence[int | float | None], kind: str = "int8") -> str:
    """An array parameter as Postgres's own array literal (`{1,2,NULL}`), cast in the statement
    (`%s::int8[]`). psycopg dumps a Python list element by element in Python (its array dumper has
    no C path); a small batch's points and rollup rows are ~4,000 numbers, and dumping them was
    about a tenth of the request's CPU: one `str.join` costs a fraction of that, and Postgres
    parses the text in C. Floats go by `repr`, the shortest text that reads back as the same
    double (`nan`, `inf`, `-inf` as Postgres reads them); integers by `str`; None as NULL."""
    text = repr if kind.startswith("float") else str
    if None in values:
        return "{" + ",".join("NULL" if v is None else text(v) for v in values) + "}"
    return "{" + ",".join(map(text, values)) + "}"


class BinaryArray(bytes):
    """A numeric array in Postgres's binary array format, sent as a binary parameter (the
    statement's `%s::float8[]` cast gives it its type)."""


class _BinaryArrayDumper(psycopg.adapt.Dumper):
    format = psycopg.pq.Format.BINARY

    def dump(self, obj: BinaryArray) -> bytes:
        return obj


psycopg.adapters.register_dumper(BinaryArray, _BinaryArrayDumper)

# element type: (its oid, its big-endian numpy type)
_ELEMENTS = {"int2": (21, ">i2"), "int4": (23, ">i4"), "int8": (20, ">i8"), "float8": (701, ">f8")}


def binary_array(values: np.ndarray, kind: str) -> BinaryArray:
    """A numeric column with no missing value as a binary array parameter, built by numpy in one
    pass: a rollup upsert's sixteen columns were most of what text literals still cost (every
    double written out by `repr`). Elements are a 4-byte length and the value, big-endian."""
    oid, dtype = _ELEMENTS[kind]
    if not len(values):
        return BinaryArray(struct.pack(">iii", 0, 0, oid))
    rows = np.empty(len(values), dtype=[("length", ">i4"), ("value", dtype)])
    rows["length"] = np.dtype(dtype).itemsize
    rows["value"] = values
    return BinaryArray(struct.pack(">iiiii", 1, 0, oid, len(values), 1) + rows.tobytes())


def decode_binary_copy(data: bytes, kinds: str) -> list[np.ndarray]:
    """The columns of a `COPY ... TO STDOUT (FORMAT BINARY)` whose columns are all non-NULL
    BIGINT ("i") or DOUBLE ("f"), as numpy arrays."""
    fields = [("fields", ">i2")]
    for index, kind in enumerate(kinds):
        fields += [(f"length{index}", ">i4"), (f"c{index}", ">i8" if kind == "i" else ">f8")]
    row = np.dtype(fields)
    start = 19 + int.from_bytes(data[15:19], "big")  # signature, flags, header extension
    table = np.frombuffer(data, dtype=row, offset=start, count=(len(data) - start - 2) // row.itemsize)
    return [table[f"c{index}"].astype(np.int64 if kind == "i" else np.float64) for index, kind in enumerate(kinds)]


def _insert_small(
    session: Session, run_id: str, by_id: dict[int, Column], then: Callable[[], None] | None = None
) -> tuple[dict[int, int], dict[int, Conflict]]:
    """One `INSERT ... SELECT FROM unnest(arrays) ON CONFLICT DO NOTHING` that answers how many
    points of each metric were new (the first of a step sent twice wins, as with COPY); only
    when some were not, a second statement finds the steps sent again with another value.
    `then`: writes sent in the same pipeline as the INSERT, run after it by the server."""
    ids: list[int] = []
    steps: list[int] = []
    values: list[float] = []
    times: list[float | None] = []
    for metric_id, (metric_steps, metric_values, metric_times) in by_id.items():
        ids += [metric_id] * len(metric_steps)
        steps += metric_steps
        values += metric_values
        times += metric_times
    arrays = (
        binary_array(np.asarray(ids), "int4"),
        binary_array(np.asarray(steps), "int8"),
        binary_array(np.asarray(values, dtype=float), "float8"),
        # the client's wall times are usually all there: binary, no `repr` of each
        array_text(times, "float8") if None in times else binary_array(np.asarray(times, dtype=float), "float8"),
    )
    insert = (
        "WITH inserted AS ("
        " INSERT INTO points (run_id, metric_id, step, value, wall_time)"
        " SELECT %s, i.* FROM unnest(%s::int[], %s::bigint[], %s::float8[], %s::float8[]) AS i"
        " ON CONFLICT DO NOTHING RETURNING metric_id)"
        " SELECT metric_id, count(*) FROM inserted GROUP BY metric_id"
    )
    raw = _raw(session)
    with raw.cursor() as cursor:
        if then is None:
            cursor.execute(insert, (run_id, *arrays))
        else:
            # the cursor keeps the INSERT's answer while `then`'s statements go out on their own
            # cursors; all of it is sent, run in order and answered at the pipeline's end
            with raw.pipeline():
                cursor.execute(insert, (run_id, *arrays))
                then()
        stored: dict[int, int] = dict(cursor.fetchall())
        if all(stored.get(metric_id, 0) == len(column[0]) for metric_id, column in by_id.items()):
            return stored, {}
        cursor.execute(
            "SELECT i.metric_id, count(*), (array_agg(i.step ORDER BY i.step))[1:%s]"
            " FROM unnest(%s::int[], %s::bigint[], %s::float8[]) AS i(metric_id, step, value)"
            " JOIN points p ON p.run_id = %s AND p.metric_id = i.metric_id AND p.step = i.step"
            " WHERE p.value IS DISTINCT FROM i.value GROUP BY i.metric_id",
            (CONFLICT_STEPS_SHOWN, *arrays[:3], run_id),
        )
        conflicts = {
            metric_id: Conflict(count=count, steps=list(found)) for metric_id, count, found in cursor.fetchall()
        }
    return stored, conflicts


def _insert_copy(session: Session, run_id: str, by_id: dict[int, Column]) -> tuple[dict[int, int], dict[int, Conflict]]:
    """COPY straight into the points table, which is about twice as fast as going through a
    staging table; when any point is already stored (a retried batch) the COPY fails on the key,
    its savepoint is rolled back, and the batch goes the exactly-once way instead."""
    raw = _raw(session)
    try:
        # the COPY apart from the savepoint it runs in
        with raw.transaction(), raw.cursor() as cursor:  # noqa: SIM117 — a savepoint inside the request's transaction
            with cursor.copy(
                "COPY points (run_id, metric_id, step, value, wall_time) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["varchar", "int4", "int8", "float8", "float8"])
                for metric_id, (steps, values, times) in by_id.items():
                    for row in zip(repeat(run_id), repeat(metric_id), steps, values, times):
                        copy.write_row(row)
        return {metric_id: len(column[0]) for metric_id, column in by_id.items()}, {}
    except psycopg.errors.UniqueViolation:
        return _insert_once(raw, run_id, by_id)


def _insert_once(
    raw: psycopg.Connection, run_id: str, by_id: dict[int, Column]
) -> tuple[dict[int, int], dict[int, Conflict]]:
    """Store the points not stored yet: COPY into a transaction-local staging table, then one
    INSERT ... ON CONFLICT DO NOTHING; returns how many were new per metric, and the metrics
    whose incoming value differs from the one stored at its step (NaN equals NaN in Postgres)."""
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
        stored: dict[int, int] = dict(cursor.fetchall())
        cursor.execute(
            "SELECT i.metric_id, count(*), (array_agg(i.step ORDER BY i.step))[1:%s] FROM points_incoming i"
            " JOIN points p ON p.run_id = %s AND p.metric_id = i.metric_id AND p.step = i.step"
            " WHERE p.value IS DISTINCT FROM i.value GROUP BY i.metric_id",
            (CONFLICT_STEPS_SHOWN, run_id),
        )
        conflicts = {
            metric_id: Conflict(count=count, steps=list(steps)) for metric_id, count, steps in cursor.fetchall()
        }
        cursor.execute("TRUNCATE points_incoming")
    return stored, conflicts


POSTGRES = PostgresBackend()
