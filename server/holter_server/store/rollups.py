"""Rollups: per metric, summaries of power-of-two step buckets. All SQL about rollups lives here.

Bucket `b` of level `L` holds steps `b * 2**L` to `(b + 1) * 2**L - 1`. The stored levels are
`LEVELS` (every fourth power of two from 64 steps), so a read at any bucket width finds a level
at most 16 times finer than it needs and merges at most 16 rows per output bucket; narrower
buckets are read from the points. Starting at 64 steps keeps the rows ingest writes near 1.7%
of the points it stores.

Ingest keeps them exact. A batch whose points were all new adds its own summaries to the stored
ones (sums add, extremes compete, first and last move outward). A batch of which only some
points were new (a retry that raced the original, an overlapping replay) cannot tell which of
its values were stored, so the buckets it touched are rebuilt from the points, finest level
first. A batch of which nothing was new changes nothing. On Postgres a per-metric advisory lock
orders a rebuild against concurrent additions, so neither loses the other's points.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace

import numpy as np
from sqlalchemy.orm import Session

LEVELS = tuple(range(6, 43, 4))
NO_STEP = -1  # stands for "no such step" (a bucket without finite values has no extremes)

COLUMNS = (
    "count", "finite_sum", "min_value", "min_step", "max_value", "max_step",
    "first_step", "first_value", "last_step", "last_value", "nan_count", "posinf_count", "neginf_count",
)
_NEW_MIN = (
    "excluded.min_step IS NOT NULL AND (rollups.min_step IS NULL OR excluded.min_value < rollups.min_value"
    " OR (excluded.min_value = rollups.min_value AND excluded.min_step < rollups.min_step))"
)
_NEW_MAX = (
    "excluded.max_step IS NOT NULL AND (rollups.max_step IS NULL OR excluded.max_value > rollups.max_value"
    " OR (excluded.max_value = rollups.max_value AND excluded.max_step < rollups.max_step))"
)
# Merging a batch's summary into a stored one; the SET expressions see the stored row as it was.
_MERGE = f"""
    count = rollups.count + excluded.count,
    finite_sum = rollups.finite_sum + excluded.finite_sum,
    min_value = CASE WHEN {_NEW_MIN} THEN excluded.min_value ELSE rollups.min_value END,
    min_step = CASE WHEN {_NEW_MIN} THEN excluded.min_step ELSE rollups.min_step END,
    max_value = CASE WHEN {_NEW_MAX} THEN excluded.max_value ELSE rollups.max_value END,
    max_step = CASE WHEN {_NEW_MAX} THEN excluded.max_step ELSE rollups.max_step END,
    first_value = CASE WHEN excluded.first_step < rollups.first_step THEN excluded.first_value ELSE rollups.first_value END,
    first_step = CASE WHEN excluded.first_step < rollups.first_step THEN excluded.first_step ELSE rollups.first_step END,
    last_value = CASE WHEN excluded.last_step > rollups.last_step THEN excluded.last_value ELSE rollups.last_value END,
    last_step = CASE WHEN excluded.last_step > rollups.last_step THEN excluded.last_step ELSE rollups.last_step END,
    nan_count = rollups.nan_count + excluded.nan_count,
    posinf_count = rollups.posinf_count + excluded.posinf_count,
    neginf_count = rollups.neginf_count + excluded.neginf_count
"""
_REPLACE = ",\n".join(f"{column} = excluded.{column}" for column in COLUMNS)
_KEY = ("run_id", "metric_id", "level", "bucket")


@dataclass(frozen=True)
class Buckets:
    """Summaries of consecutive step buckets of one series, as parallel numpy arrays in step order.

    `min_step` and `max_step` are NO_STEP (and the values NaN) where a bucket holds no finite
    value. `first_value` and `last_value` may be NaN or ±Inf.
    """

    bucket: np.ndarray
    count: np.ndarray
    finite_sum: np.ndarray
    min_value: np.ndarray
    min_step: np.ndarray
    max_value: np.ndarray
    max_step: np.ndarray
    first_step: np.ndarray
    first_value: np.ndarray
    last_step: np.ndarray
    last_value: np.ndarray
    nan_count: np.ndarray
    posinf_count: np.ndarray
    neginf_count: np.ndarray

    def __len__(self) -> int:
        return len(self.bucket)

    def take(self, index: np.ndarray) -> Buckets:
        """The buckets at `index` (an index array or a boolean mask)."""
        return Buckets(*(getattr(self, f.name)[index] for f in fields(self)))


def empty_buckets() -> Buckets:
    """No buckets at all."""
    ints, floats = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
    return Buckets(ints, ints, floats, floats, ints, floats, ints, ints, floats, ints, floats, ints, ints, ints)


def bucket_points(steps: np.ndarray, values: np.ndarray, shift: int) -> Buckets:
    """Summarise points (steps ascending and distinct) into buckets of 2**shift steps."""
    if not len(steps):
        return empty_buckets()
    buckets = steps >> shift
    starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
    ends = np.r_[starts[1:], len(steps)] - 1
    is_nan = np.isnan(values)
    is_posinf = values == np.inf
    is_neginf = values == -np.inf
    finite = ~(is_nan | is_posinf | is_neginf)
    min_value, min_step = _extreme(np.where(finite, values, np.inf), starts, steps, np.minimum)
    max_value, max_step = _extreme(np.where(finite, values, -np.inf), starts, steps, np.maximum)
    return Buckets(
        bucket=buckets[starts],
        count=np.diff(np.r_[starts, len(steps)]).astype(np.int64),
        finite_sum=np.add.reduceat(np.where(finite, values, 0.0), starts),
        min_value=min_value, min_step=min_step, max_value=max_value, max_step=max_step,
        first_step=steps[starts], first_value=values[starts], last_step=steps[ends], last_value=values[ends],
        nan_count=np.add.reduceat(is_nan.astype(np.int64), starts),
        posinf_count=np.add.reduceat(is_posinf.astype(np.int64), starts),
        neginf_count=np.add.reduceat(is_neginf.astype(np.int64), starts),
    )


def merge_buckets(parts: Buckets, shift: int) -> Buckets:
    """Merge buckets (in step order, not overlapping) into buckets 2**shift times wider.

    Parts that already share a bucket number are merged too (shift 0), which is how summaries
    of the same output bucket read from different levels come together.
    """
    if not len(parts):
        return parts
    buckets = parts.bucket >> shift
    starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
    ends = np.r_[starts[1:], len(buckets)] - 1
    has_finite = parts.min_step != NO_STEP
    min_value, min_step = _extreme(np.where(has_finite, parts.min_value, np.inf), starts, parts.min_step, np.minimum)
    max_value, max_step = _extreme(np.where(has_finite, parts.max_value, -np.inf), starts, parts.max_step, np.maximum)
    return Buckets(
        bucket=buckets[starts],
        count=np.add.reduceat(parts.count, starts),
        finite_sum=np.add.reduceat(parts.finite_sum, starts),
        min_value=min_value, min_step=min_step, max_value=max_value, max_step=max_step,
        first_step=parts.first_step[starts], first_value=parts.first_value[starts],
        last_step=parts.last_step[ends], last_value=parts.last_value[ends],
        nan_count=np.add.reduceat(parts.nan_count, starts),
        posinf_count=np.add.reduceat(parts.posinf_count, starts),
        neginf_count=np.add.reduceat(parts.neginf_count, starts),
    )


def concat_buckets(parts: Sequence[Buckets]) -> Buckets:
    """Buckets from several disjoint step ranges, put in step order."""
    parts = [part for part in parts if len(part)]
    if not parts:
        return empty_buckets()
    joined = Buckets(*(np.concatenate([getattr(part, f.name) for part in parts]) for f in fields(Buckets)))
    return joined.take(np.argsort(joined.first_step, kind="stable"))


def _extreme(candidates: np.ndarray, starts: np.ndarray, steps: np.ndarray, ufunc: np.ufunc) -> tuple[np.ndarray, np.ndarray]:
    """Per group (groups begin at `starts`), the extreme of `candidates` and the first step
    holding it; NaN and NO_STEP where a group has only the neutral ±inf (no finite value)."""
    extreme = ufunc.reduceat(candidates, starts)
    group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(candidates)]))
    hits = np.flatnonzero((candidates == extreme[group]) & np.isfinite(candidates))
    found_groups, first_hit = np.unique(group[hits], return_index=True)
    step_of = np.full(len(starts), NO_STEP, dtype=np.int64)
    step_of[found_groups] = steps[hits[first_hit]]
    value = np.where(step_of == NO_STEP, np.nan, extreme)
    return value, step_of


def levels_of(steps: np.ndarray, values: np.ndarray) -> list[tuple[int, Buckets]]:
    """The summaries of points (steps ascending, distinct) at every stored level."""
    finest = bucket_points(steps, values, LEVELS[0])
    out = [(LEVELS[0], finest)]
    for previous, level in zip(LEVELS, LEVELS[1:]):
        finer = out[-1][1]
        if len(finer) == 1:  # a batch usually fits one coarse bucket: nothing to merge
            out.append((level, replace(finer, bucket=finer.bucket >> (level - previous))))
        else:
            out.append((level, merge_buckets(finer, level - previous)))
    return out


def add_to_rollups(*, session: Session, run_id: str, new_points: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
    """Add points that were all new to the store (metric id → steps ascending and distinct, values)."""
    rows = [
        row
        for metric_id, (steps, values) in sorted(new_points.items())
        for level, buckets in levels_of(steps, values)
        for row in _rows(run_id, metric_id, level, buckets)
    ]
    _upsert(session, rows, _MERGE)


def rebuild_rollups(*, session: Session, run_id: str, touched: dict[int, np.ndarray]) -> None:
    """Rebuild, from the stored points, every bucket holding one of the given steps (metric id →
    steps): the finest level from the points, each coarser level from the one below it."""
    for metric_id, steps in sorted(touched.items()):
        buckets_at = np.unique(np.asarray(steps, dtype=np.int64) >> LEVELS[0])
        point_steps, point_values = read_points_in_buckets(session=session, run_id=run_id, metric_id=metric_id, shift=LEVELS[0], buckets=buckets_at)
        rebuilt = bucket_points(point_steps, point_values, LEVELS[0])
        _upsert(session, _rows(run_id, metric_id, LEVELS[0], rebuilt), _REPLACE)
        for finer, level in zip(LEVELS, LEVELS[1:]):
            buckets_at = np.unique(buckets_at >> (level - finer))
            parts = read_rollups_in_buckets(session=session, run_id=run_id, metric_id=metric_id, level=finer, parents=buckets_at, shift=level - finer)
            _upsert(session, _rows(run_id, metric_id, level, merge_buckets(parts, level - finer)), _REPLACE)


def lock_metrics(*, session: Session, run_id: str, metric_ids: Iterable[int]) -> None:
    """On Postgres, take each metric's rollup lock until the transaction ends (in id order, so
    two writers never wait on each other in a circle). SQLite has one writer at a time anyway."""
    if session.get_bind().dialect.name != "postgresql":
        return
    with _cursor(session) as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s), m) FROM unnest(%s::int[]) AS m ORDER BY m",
            (run_id, sorted(metric_ids)),
        )


def _rows(run_id: str, metric_id: int, level: int, b: Buckets) -> list[tuple]:
    no_min = b.min_step == NO_STEP
    no_max = b.max_step == NO_STEP
    columns = [
        b.bucket.tolist(), b.count.tolist(), b.finite_sum.tolist(),
        _with_nulls(b.min_value, no_min), _with_nulls(b.min_step, no_min),
        _with_nulls(b.max_value, no_max), _with_nulls(b.max_step, no_max),
        b.first_step.tolist(), b.first_value.tolist(), b.last_step.tolist(), b.last_value.tolist(),
        b.nan_count.tolist(), b.posinf_count.tolist(), b.neginf_count.tolist(),
    ]
    return [(run_id, metric_id, level, *row) for row in zip(*columns)]


def _with_nulls(values: np.ndarray, missing: np.ndarray) -> list:
    out = values.tolist()
    for index in np.flatnonzero(missing):
        out[index] = None
    return out


def _cursor(session: Session):  # type: ignore[no-untyped-def]
    return session.connection().connection.driver_connection.cursor()


def _upsert(session: Session, rows: list[tuple], on_conflict: str) -> None:
    if not rows:
        return
    names = ", ".join((*_KEY, *COLUMNS))
    key = ", ".join(_KEY)
    if session.get_bind().dialect.name == "postgresql":
        with _cursor(session) as cursor:
            cursor.execute(
                "CREATE TEMP TABLE IF NOT EXISTS rollups_incoming (LIKE rollups INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
            )
            with cursor.copy(f"COPY rollups_incoming ({names}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["text", "int4", "int2", "int8", "int8", "float8", "float8", "int8", "float8", "int8",
                                "int8", "float8", "int8", "float8", "int8", "int8", "int8"])
                for row in rows:
                    copy.write_row(row)
            # Rows in key order, so concurrent writers lock shared rows in the same order.
            cursor.execute(
                f"INSERT INTO rollups ({names}) SELECT {names} FROM rollups_incoming ORDER BY {key}"
                f" ON CONFLICT ({key}) DO UPDATE SET {on_conflict}"
            )
            cursor.execute("TRUNCATE rollups_incoming")
        return
    raw = session.connection().connection.driver_connection
    marks = ", ".join("?" * (len(_KEY) + len(COLUMNS)))
    raw.executemany(f"INSERT INTO rollups ({names}) VALUES ({marks}) ON CONFLICT ({key}) DO UPDATE SET {on_conflict}", rows)


def _ranges(ids: np.ndarray) -> list[tuple[int, int]]:
    """Sorted distinct integers as runs of consecutive ones: [(first, last), ...]."""
    if not len(ids):
        return []
    breaks = np.flatnonzero(np.diff(ids) != 1)
    firsts = np.r_[ids[0], ids[breaks + 1]]
    lasts = np.r_[ids[breaks], ids[-1]]
    return list(zip(firsts.tolist(), lasts.tolist()))


def _placeholder(session: Session) -> str:
    return "%s" if session.get_bind().dialect.name == "postgresql" else "?"


def _fetch_columns(session: Session, sql: str, params: Sequence, kinds: str) -> list[np.ndarray]:
    """Run a query whose columns are all BIGINT ("i") or DOUBLE ("f") and return them as numpy
    arrays. On Postgres the rows come as binary COPY, read by numpy without a Python object per
    value (a chart read fetches thousands of rows; building tuples cost more than the query).
    Write `{nan}` where NaN must stand in for NULL (SQLite has no NaN; its NULL turns NaN here)."""
    if session.get_bind().dialect.name == "postgresql":
        statement = "COPY (" + sql.format(nan="'NaN'::float8") + ") TO STDOUT (FORMAT BINARY)"
        with _cursor(session) as cursor, cursor.copy(statement, params) as copy:
            data = b"".join(bytes(chunk) for chunk in copy)
        fields = [("fields", ">i2")]
        for index, kind in enumerate(kinds):
            fields += [(f"length{index}", ">i4"), (f"c{index}", ">i8" if kind == "i" else ">f8")]
        row = np.dtype(fields)
        start = 19 + int.from_bytes(data[15:19], "big")  # signature, flags, header extension
        table = np.frombuffer(data, dtype=row, offset=start, count=(len(data) - start - 2) // row.itemsize)
        return [table[f"c{index}"].astype(np.int64 if kind == "i" else np.float64) for index, kind in enumerate(kinds)]
    raw = session.connection().connection.driver_connection
    rows = raw.execute(sql.format(nan="NULL").replace("%s", "?"), params).fetchall()
    columns = list(zip(*rows)) if rows else [()] * len(kinds)
    return [np.asarray(column, dtype=np.int64 if kind == "i" else np.float64) for column, kind in zip(columns, kinds)]


def read_points_in_buckets(*, session: Session, run_id: str, metric_id: int, shift: int, buckets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Steps and values of the stored points of one metric in the given buckets of 2**shift steps."""
    ranges = [(first << shift, ((last + 1) << shift) - 1) for first, last in _ranges(buckets)]
    return read_point_ranges(session=session, run_id=run_id, metric_ids=[metric_id], ranges=ranges)[metric_id]


def read_point_ranges(
    *, session: Session, run_id: str, metric_ids: Sequence[int], ranges: Sequence[tuple[int, int]]
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per metric, the steps and values of its points in any of the step ranges (inclusive)."""
    out = {metric_id: (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)) for metric_id in metric_ids}
    if not ranges or not metric_ids:
        return out
    # One indexed range scan per range (UNION ALL): SQLite scans the whole series for an OR of ranges.
    ids = ", ".join(["%s"] * len(metric_ids))
    one = (
        "SELECT CAST(metric_id AS BIGINT), step, COALESCE(value, {nan}) FROM points"
        f" WHERE run_id = %s AND metric_id IN ({ids}) AND step BETWEEN %s AND %s"
    )
    parts = []
    for chunk in _chunks(list(ranges), 100):
        params = [value for first, last in chunk for value in (run_id, *metric_ids, first, last)]
        parts.append(_fetch_columns(session, " UNION ALL ".join([one] * len(chunk)), params, "iif"))
    ids_arr, steps_arr, values_arr = (np.concatenate(column) for column in zip(*parts))
    if not len(ids_arr):
        return out
    order = np.lexsort((steps_arr, ids_arr))
    ids_arr, steps_arr, values_arr = ids_arr[order], steps_arr[order], values_arr[order]
    for metric_id in metric_ids:
        lo, hi = np.searchsorted(ids_arr, [metric_id, metric_id + 1])
        out[metric_id] = (steps_arr[lo:hi], values_arr[lo:hi])
    return out


def read_rollups_in_buckets(*, session: Session, run_id: str, metric_id: int, level: int, parents: np.ndarray, shift: int) -> Buckets:
    """The stored level-`level` buckets of one metric lying inside the given coarser buckets."""
    pieces = [(level, first << shift, ((last + 1) << shift) - 1) for first, last in _ranges(parents)]
    return read_rollup_pieces(session=session, run_id=run_id, metric_ids=[metric_id], pieces=pieces, to_level=level)[metric_id]


def read_rollup_pieces(
    *, session: Session, run_id: str, metric_ids: Sequence[int], pieces: Sequence[tuple[int, int, int]], to_level: int
) -> dict[int, Buckets]:
    """Per metric, its stored buckets in any of the pieces (level, first bucket, last bucket),
    in step order, numbered as buckets of `to_level` (no finer than any piece's level): buckets
    of different levels that fall into the same `to_level` bucket then share its number."""
    out = {metric_id: empty_buckets() for metric_id in metric_ids}
    if not pieces or not metric_ids:
        return out
    ids = ", ".join(["%s"] * len(metric_ids))
    one = (
        "SELECT CAST(metric_id AS BIGINT), bucket, count, finite_sum, COALESCE(min_value, {nan}), COALESCE(min_step, -1),"
        " COALESCE(max_value, {nan}), COALESCE(max_step, -1), first_step, COALESCE(first_value, {nan}), last_step,"
        " COALESCE(last_value, {nan}), nan_count, posinf_count, neginf_count, CAST(level AS BIGINT)"
        f" FROM rollups WHERE run_id = %s AND metric_id IN ({ids}) AND level = %s AND bucket BETWEEN %s AND %s"
    )
    parts = []
    for chunk in _chunks(list(pieces), 100):
        params = [value for level, first, last in chunk for value in (run_id, *metric_ids, level, first, last)]
        parts.append(_fetch_columns(session, " UNION ALL ".join([one] * len(chunk)), params, "iiiffifiififiiii"))
    arrays = [np.concatenate(column) for column in zip(*parts)]
    if not len(arrays[0]):
        return out
    arrays[1] = arrays[1] >> (to_level - arrays.pop())
    ids = arrays[0]
    # Pieces of different levels interleave; put each metric's buckets in step order.
    order = np.lexsort((arrays[8], ids))
    ids = ids[order]
    table = Buckets(*(array[order] for array in arrays[1:]))
    for metric_id in metric_ids:
        lo, hi = np.searchsorted(ids, [metric_id, metric_id + 1])
        out[metric_id] = table.take(slice(lo, hi))
    return out


def _chunks(items: list, size: int) -> Iterable[list]:
    for index in range(0, len(items), size):
        yield items[index:index + size]
