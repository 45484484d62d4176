"""Rollups: per metric, summaries of power-of-two step buckets (their arithmetic:
store/rollup_buckets.py). All SQL about rollups lives here.

Ingest keeps them exact. A batch whose points were all new adds its own summaries to the stored
ones (sums add, extremes compete, first and last move outward). A batch of which only some
points were new (a retry that raced the original, an overlapping replay) cannot tell which of
its values were stored, so the buckets it touched are rebuilt from the points, finest level
first. A batch of which nothing was new changes nothing. On Postgres an advisory lock per metric
(metrics share them modulo `ROLLUP_LOCK_SLOTS`) orders a rebuild against concurrent additions,
so neither loses the other's points.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np
from sqlalchemy.orm import Session

from holter_server.store.backends import backend_for
from holter_server.store.backends.base import RollupUpsert
from holter_server.store.rollup_buckets import (
    LEVELS,
    NO_STEP,
    Buckets,
    bucket_points,
    empty_buckets,
    is_stored,
    merge_buckets,
    merge_groups,
    summarise_points,
)

COLUMNS = (
    "count",
    "finite_sum",
    "min_value",
    "min_step",
    "max_value",
    "max_step",
    "first_step",
    "first_value",
    "last_step",
    "last_value",
    "nan_count",
    "posinf_count",
    "neginf_count",
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
# `{{finite_sum}}` is the backend's sum of the two finite sums: past the largest double it is
# infinite, as numpy's own sum of a batch is (Postgres refuses such an addition unless told).
_MERGE = f"""
    count = rollups.count + excluded.count,
    finite_sum = {{finite_sum}},
    min_value = CASE WHEN {_NEW_MIN} THEN excluded.min_value ELSE rollups.min_value END,
    min_step = CASE WHEN {_NEW_MIN} THEN excluded.min_step ELSE rollups.min_step END,
    max_value = CASE WHEN {_NEW_MAX} THEN excluded.max_value ELSE rollups.max_value END,
    max_step = CASE WHEN {_NEW_MAX} THEN excluded.max_step ELSE rollups.max_step END,
    first_value = CASE WHEN excluded.first_step < rollups.first_step
        THEN excluded.first_value ELSE rollups.first_value END,
    first_step = CASE WHEN excluded.first_step < rollups.first_step
        THEN excluded.first_step ELSE rollups.first_step END,
    last_value = CASE WHEN excluded.last_step > rollups.last_step THEN excluded.last_value ELSE rollups.last_value END,
    last_step = CASE WHEN excluded.last_step > rollups.last_step THEN excluded.last_step ELSE rollups.last_step END,
    nan_count = rollups.nan_count + excluded.nan_count,
    posinf_count = rollups.posinf_count + excluded.posinf_count,
    neginf_count = rollups.neginf_count + excluded.neginf_count
"""
_REPLACE = ",\n".join(f"{column} = excluded.{column}" for column in COLUMNS)
_KEY = ("run_id", "metric_id", "level", "bucket")


def add_to_rollups(*, session: Session, run_id: str, new_points: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
    """Add points that were all new to the store (metric id → steps ascending and distinct, values).

    Only the buckets the store keeps are written (`rollup_buckets.is_stored`: not bucket 0 above
    the finest level), one or two per metric for a small batch of a run under 16,384 steps.
    Every metric of the batch is summarised at every level together, as numpy columns with the
    metric beside each bucket, and the lot goes to the store in one statement: a small batch
    touches one bucket per metric and stored level, and summarising metric by metric cost more than
    storing the points.
    """
    ids = sorted(metric_id for metric_id, (steps, _values) in new_points.items() if len(steps))
    if not ids:
        return
    steps = np.concatenate([np.asarray(new_points[metric_id][0], dtype=np.int64) for metric_id in ids])
    values = np.concatenate([np.asarray(new_points[metric_id][1], dtype=np.float64) for metric_id in ids])
    owners = np.repeat(np.asarray(ids, dtype=np.int64), [len(new_points[metric_id][0]) for metric_id in ids])
    add_columns_to_rollups(session=session, run_id=run_id, owners=owners, steps=steps, values=values)


def add_columns_to_rollups(
    *, session: Session, run_id: str, owners: np.ndarray, steps: np.ndarray, values: np.ndarray
) -> None:
    """`add_to_rollups` of points given as three columns (metric id, step, value: int64, int64,
    float64), in (metric id, step) order, no (metric id, step) twice, at least one point."""
    buckets = steps >> LEVELS[0]
    starts = np.flatnonzero(np.r_[True, (buckets[1:] != buckets[:-1]) | (owners[1:] != owners[:-1])])
    level_buckets = summarise_points(steps, values, buckets, starts)
    level_owners = owners[starts]
    parts = [_columns(level_owners, LEVELS[0], level_buckets)]
    for previous, level in zip(LEVELS, LEVELS[1:]):
        # Bucket 0 of a coarser level is not stored, and its steps lie in bucket 0 of every
        # level above too: dropped here, they are gone for good, and the loop ends with them.
        coarser = level_buckets.bucket >> (level - previous)
        kept = is_stored(level, coarser)
        if not kept.all():
            level_buckets, level_owners, coarser = level_buckets.take(kept), level_owners[kept], coarser[kept]
        if not len(level_owners):
            break
        if not np.any(level_owners[1:] == level_owners[:-1]):  # one bucket per metric (a small batch): no merging
            level_buckets = replace(level_buckets, bucket=coarser)
        else:
            starts = np.flatnonzero(
                np.r_[True, (coarser[1:] != coarser[:-1]) | (level_owners[1:] != level_owners[:-1])]
            )
            level_buckets = merge_groups(level_buckets, coarser, starts)
            level_owners = level_owners[starts]
        parts.append(_columns(level_owners, level, level_buckets))
    _upsert(session, run_id, [column for part in zip(*parts) for column in [np.concatenate(part)]], _MERGE)


def rebuild_rollups(*, session: Session, run_id: str, touched: dict[int, np.ndarray]) -> None:
    """Rebuild, from the stored points, every stored bucket holding one of the given steps (metric
    id → steps): the finest level from the points, each coarser level from the one below it
    (whose buckets under a stored one, 16 and up, are all stored)."""
    for metric_id, steps in sorted(touched.items()):
        buckets_at = np.unique(np.asarray(steps, dtype=np.int64) >> LEVELS[0])
        point_steps, point_values = read_points_in_buckets(
            session=session, run_id=run_id, metric_id=metric_id, shift=LEVELS[0], buckets=buckets_at
        )
        rebuilt = bucket_points(point_steps, point_values, LEVELS[0])
        _upsert(session, run_id, _columns(np.full(len(rebuilt), metric_id), LEVELS[0], rebuilt), _REPLACE)
        for finer, level in zip(LEVELS, LEVELS[1:]):
            buckets_at = np.unique(buckets_at >> (level - finer))
            buckets_at = buckets_at[is_stored(level, buckets_at)]
            if not len(buckets_at):
                break
            parts = read_rollups_in_buckets(
                session=session,
                run_id=run_id,
                metric_id=metric_id,
                level=finer,
                parents=buckets_at,
                shift=level - finer,
            )
            merged = merge_buckets(parts, level - finer)
            _upsert(session, run_id, _columns(np.full(len(merged), metric_id), level, merged), _REPLACE)


# Rollup locks per run: metric ids share them modulo this count, so that a batch touching
# thousands of metrics takes a bounded number of locks (Postgres keeps advisory locks in a shared
# table sized by max_locks_per_transaction: 20,000 per-metric locks ran out of shared memory).
ROLLUP_LOCK_SLOTS = 64


def lock_metrics(*, session: Session, run_id: str, metric_ids: Iterable[int]) -> None:
    """On Postgres, take the rollup locks of these metrics until the transaction ends (keyed
    (run, 1 + (id - 1) mod ROLLUP_LOCK_SLOTS), in key order, so two writers never wait on each
    other in a circle; key (run, 0) is the run's metric-id allocation lock, always taken first).
    SQLite has one writer at a time anyway."""
    slots = sorted({1 + (metric_id - 1) % ROLLUP_LOCK_SLOTS for metric_id in metric_ids})
    backend_for(session).lock_rollup_slots(session, run_id, slots)


# The columns `_upsert` takes after the run id: the key's metric id, level and bucket, then COLUMNS.
_UPSERT_TYPES = (
    "int4",
    "int2",
    "int8",
    "int8",
    "float8",
    "float8",
    "int8",
    "float8",
    "int8",
    "int8",
    "float8",
    "int8",
    "float8",
    "int8",
    "int8",
    "int8",
)


def _columns(owners: np.ndarray, level: int, b: Buckets) -> list[np.ndarray]:
    """Buckets as upsert columns (numpy, in `_UPSERT_TYPES` order); NO_STEP marks a missing extreme."""
    return [
        np.asarray(owners, dtype=np.int64),
        np.full(len(b), level, dtype=np.int64),
        b.bucket,
        b.count,
        b.finite_sum,
        b.min_value,
        b.min_step,
        b.max_value,
        b.max_step,
        b.first_step,
        b.first_value,
        b.last_step,
        b.last_value,
        b.nan_count,
        b.posinf_count,
        b.neginf_count,
    ]


def _with_nulls(values: np.ndarray, missing: np.ndarray) -> list[Any]:
    out: list[Any] = values.tolist()
    for index in np.flatnonzero(missing):
        out[index] = None
    return out


def _upsert(session: Session, run_id: str, columns: list[np.ndarray], on_conflict: str) -> None:
    """Insert or merge buckets given as `_columns` columns, in one statement on Postgres."""
    if not len(columns[0]):
        return
    no_min, no_max = columns[6] == NO_STEP, columns[8] == NO_STEP
    lists = [column.tolist() for column in columns]
    lists[5], lists[6] = _with_nulls(columns[5], no_min), _with_nulls(columns[6], no_min)
    lists[7], lists[8] = _with_nulls(columns[7], no_max), _with_nulls(columns[8], no_max)
    statement = RollupUpsert(
        names=", ".join((*_KEY, *COLUMNS)), key=", ".join(_KEY), on_conflict=on_conflict, types=_UPSERT_TYPES
    )
    backend_for(session).upsert_rollups(session, run_id, columns, lists, statement)


def _ranges(ids: np.ndarray) -> list[tuple[int, int]]:
    """Sorted distinct integers as runs of consecutive ones: [(first, last), ...]."""
    if not len(ids):
        return []
    breaks = np.flatnonzero(np.diff(ids) != 1)
    firsts = np.r_[ids[0], ids[breaks + 1]]
    lasts = np.r_[ids[breaks], ids[-1]]
    return list(zip(firsts.tolist(), lasts.tolist()))


def _fetch_columns(session: Session, sql: str, params: Sequence[Any], kinds: str) -> list[np.ndarray]:
    """Run a query whose columns are all BIGINT ("i") or DOUBLE ("f") and return them as numpy
    arrays (binary COPY on Postgres). Write `{nan}` where NaN must stand in for NULL (SQLite has
    no NaN; its NULL turns NaN here)."""
    return backend_for(session).fetch_columns(session, sql, params, kinds)


def read_points_in_buckets(
    *, session: Session, run_id: str, metric_id: int, shift: int, buckets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
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
    placeholders = ", ".join(["%s"] * len(metric_ids))
    one = (
        "SELECT CAST(metric_id AS BIGINT), step, COALESCE(value, {nan}) FROM points"
        f" WHERE run_id = %s AND metric_id IN ({placeholders}) AND step BETWEEN %s AND %s"
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


def read_rollups_in_buckets(
    *, session: Session, run_id: str, metric_id: int, level: int, parents: np.ndarray, shift: int
) -> Buckets:
    """The stored level-`level` buckets of one metric lying inside the given coarser buckets."""
    pieces = [(level, first << shift, ((last + 1) << shift) - 1) for first, last in _ranges(parents)]
    return read_rollup_pieces(session=session, run_id=run_id, metric_ids=[metric_id], pieces=pieces, to_level=level)[
        metric_id
    ]


def read_rollup_pieces(
    *, session: Session, run_id: str, metric_ids: Sequence[int], pieces: Sequence[tuple[int, int, int]], to_level: int
) -> dict[int, Buckets]:
    """Per metric, its stored buckets in any of the pieces (level, first bucket, last bucket),
    in step order, numbered as buckets of `to_level` (no finer than any piece's level): buckets
    of different levels that fall into the same `to_level` bucket then share its number."""
    out = {metric_id: empty_buckets() for metric_id in metric_ids}
    if not pieces or not metric_ids:
        return out
    placeholders = ", ".join(["%s"] * len(metric_ids))
    one = (
        "SELECT CAST(metric_id AS BIGINT), bucket, count, finite_sum, COALESCE(min_value, {nan}), COALESCE(min_step, "
        "-1),"
        " COALESCE(max_value, {nan}), COALESCE(max_step, -1), first_step, COALESCE(first_value, {nan}), last_step,"
        " COALESCE(last_value, {nan}), nan_count, posinf_count, neginf_count, CAST(level AS BIGINT)"
        f" FROM rollups WHERE run_id = %s AND metric_id IN ({placeholders}) AND level = %s AND bucket BETWEEN %s AND %s"
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


T = TypeVar("T")


def _chunks(items: list[T], size: int) -> Iterable[list[T]]:
    for index in range(0, len(items), size):
        yield items[index : index + size]
