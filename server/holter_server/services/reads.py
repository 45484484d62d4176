"""Chart reads: one series, several series, and a metric family as a matrix, at any zoom.

A range holding at most `max_points` points comes back as it is stored. A larger one comes back
downsampled (see `services/downsample.py`) from the rollups: whole rollup buckets for the middle
of the range, finer ones and at most a few dozen points for its ragged ends, so a read touches a
bounded number of rows however many points the range holds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from sqlalchemy.orm import Session

from holter_server.services.downsample import choose_shift, cover, minmax_points
from holter_server.store import points as points_store
from holter_server.store import rollups as rollups_store
from holter_server.store import runs as runs_store
from holter_server.store.models import MetricRow
from holter_server.store.rollup_buckets import NO_STEP, Buckets, bucket_points, concat_buckets, merge_buckets

FamilyStat = Literal["min", "max", "mean", "first", "last"]


@dataclass(frozen=True)
class SeriesRead:
    """One series over a step range: its points as stored, or a downsampled picture.

    `start` and `end` are the requested range narrowed to the steps the series holds (None when
    it holds none there). When `downsampled`, `buckets` are the summaries of consecutive buckets
    of `bucket_width` steps (bucket `b` starts at step `b * bucket_width`), `steps` and `values`
    the points to draw, `times` None, and `points_in_range` the exact number of points behind it.
    """

    run_id: str
    metric: str
    start: int | None
    end: int | None
    steps: list[int]
    values: list[float]
    times: list[float | None] | None
    truncated: bool = False
    downsampled: bool = False
    bucket_width: int | None = None
    points_in_range: int | None = None
    buckets: Buckets | None = None


@dataclass(frozen=True)
class FamilyRead:
    """Metrics of one family as rows of a matrix over shared step buckets (None: no finite value
    or no point in that cell), with the count of non-finite values per cell beside it."""

    run_id: str
    prefix: str
    stat: FamilyStat
    metrics: list[str]
    bucket_width: int
    bucket_starts: list[int]
    values: list[list[float | None]]
    nonfinite: list[list[int]]


def read_curve(*, session: Session, run_id: str, metric: str, limit: int) -> tuple[np.ndarray, np.ndarray] | None:
    """A run's metric as (steps, values) arrays, its first `limit` points (None: the run lacks it)."""
    row = runs_store.get_metric(session=session, run_id=run_id, name=metric)
    if row is None:
        return None
    points = points_store.read_points(
        session=session, run_id=run_id, metric_id=row.metric_id, start=None, end=None, limit=limit
    )
    return np.asarray(points.steps, dtype=np.int64), np.asarray(points.values, dtype=float)


def read_series(
    *,
    session: Session,
    metric: MetricRow,
    start: int | None,
    end: int | None,
    max_points: int | None,
    plain_cap: int,
    with_times: bool = False,
) -> SeriesRead:
    """One metric over steps start..end (inclusive; None: from its first or to its last step).

    Without `max_points` this is the plain read of old: at most `plain_cap` points, `truncated`
    when more lay in the range. With it, at most `max_points` points, downsampled when the
    range holds more. A downsampled read carries the drawn points' wall times only when asked
    (`with_times`): they cost one more lookup, and only a wall-time axis needs them.
    """
    first, last = _bounds(metric, start, end)
    if first is None or last is None:
        return SeriesRead(run_id=metric.run_id, metric=metric.name, start=None, end=None, steps=[], values=[], times=[])
    if max_points is None:
        return _plain(session, metric, first, last, plain_cap)
    if last - first + 1 <= max_points or metric.count <= max_points:
        return _plain(session, metric, first, last, max_points)
    shift = choose_shift(start=first, end=last, max_buckets=max_points // 2)
    buckets = _gather(session, metric.run_id, [metric.metric_id], first, last, shift)[metric.metric_id]
    total = int(buckets.count.sum())
    if total <= max_points:
        return _plain(session, metric, first, last, max_points)
    steps, values = minmax_points(buckets)
    drawn = steps.tolist()
    times = (
        points_store.wall_times_at(session=session, run_id=metric.run_id, metric_id=metric.metric_id, steps=drawn)
        if with_times
        else None
    )
    return SeriesRead(
        run_id=metric.run_id,
        metric=metric.name,
        start=first,
        end=last,
        steps=drawn,
        values=values.tolist(),
        times=times,
        downsampled=True,
        bucket_width=1 << shift,
        points_in_range=total,
        buckets=buckets,
    )


def read_many(
    *,
    session: Session,
    metrics: Sequence[MetricRow],
    start: int | None,
    end: int | None,
    max_points: int,
    with_times: bool = False,
) -> list[SeriesRead]:
    """Several series for one chart. An open end of the range is the earliest first step (or
    latest last step) among them, so every series is cut on the same step range."""
    firsts = [m.first_step for m in metrics if m.first_step is not None]
    lasts = [m.last_step for m in metrics if m.last_step is not None]
    start = start if start is not None else (min(firsts) if firsts else None)
    end = end if end is not None else (max(lasts) if lasts else None)
    return [
        read_series(
            session=session,
            metric=m,
            start=start,
            end=end,
            max_points=max_points,
            plain_cap=max_points,
            with_times=with_times,
        )
        for m in metrics
    ]


def natural_key(name: str) -> list[str | int]:
    """Sort key that puts `layer.9` before `layer.10`."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def list_family(*, session: Session, run_id: str, prefix: str, limit: int) -> list[MetricRow]:
    """The run's metrics whose names start with `prefix` (a trailing `*` is ignored), in natural order."""
    rows = points_store.list_metrics_with_prefix(
        session=session, run_id=run_id, prefix=prefix.removesuffix("*"), limit=limit
    )
    return sorted(rows, key=lambda row: natural_key(row.name))


def read_family(
    *,
    session: Session,
    run_id: str,
    prefix: str,
    metrics: Sequence[MetricRow],
    start: int | None,
    end: int | None,
    max_buckets: int,
    stat: FamilyStat,
) -> FamilyRead:
    """A family (metrics in natural order) as a metrics × step-buckets matrix of `stat`."""
    names = [m.name for m in metrics]
    firsts = [m.first_step for m in metrics if m.first_step is not None]
    lasts = [m.last_step for m in metrics if m.last_step is not None]
    first = max(start, min(firsts)) if start is not None and firsts else (min(firsts) if firsts else None)
    last = min(end, max(lasts)) if end is not None and lasts else (max(lasts) if lasts else None)
    if first is None or last is None or first > last:
        return FamilyRead(run_id, prefix, stat, names, 1, [], [[] for _ in names], [[] for _ in names])
    shift = choose_shift(start=first, end=last, max_buckets=max_buckets)
    origin = first >> shift
    width = (last >> shift) - origin + 1
    by_id = _gather(session, run_id, [m.metric_id for m in metrics], first, last, shift)
    values, nonfinite = [], []
    for metric in metrics:
        buckets = by_id[metric.metric_id]
        row: list[float | None] = [None] * width
        counts = [0] * width
        cells = _family_stat(buckets, stat)
        for column, value, bad in zip(
            (buckets.bucket - origin).tolist(),
            cells.tolist(),
            (buckets.nan_count + buckets.posinf_count + buckets.neginf_count).tolist(),
        ):
            row[column] = None if value != value else value
            counts[column] = bad
        values.append(row)
        nonfinite.append(counts)
    starts = [(origin + i) << shift for i in range(width)]
    return FamilyRead(run_id, prefix, stat, names, 1 << shift, starts, values, nonfinite)


def _family_stat(buckets: Buckets, stat: FamilyStat) -> np.ndarray:
    if stat == "min":
        return buckets.min_value
    if stat == "max":
        return buckets.max_value
    if stat == "mean":
        return finite_mean(buckets)
    values = buckets.first_value if stat == "first" else buckets.last_value
    return np.where(np.isfinite(values), values, np.nan)


def has_finite(buckets: Buckets) -> np.ndarray:
    """Whether each bucket holds a finite value (one without has no extremes)."""
    return buckets.min_step != NO_STEP


def finite_mean(buckets: Buckets) -> np.ndarray:
    """Mean of each bucket's finite values (NaN where it has none)."""
    finite = buckets.count - buckets.nan_count - buckets.posinf_count - buckets.neginf_count
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(finite > 0, buckets.finite_sum / np.maximum(finite, 1), np.nan)


def _bounds(metric: MetricRow, start: int | None, end: int | None) -> tuple[int | None, int | None]:
    if metric.first_step is None or metric.last_step is None:
        return None, None
    first = metric.first_step if start is None else max(start, metric.first_step)
    last = metric.last_step if end is None else min(end, metric.last_step)
    return (first, last) if first <= last else (None, None)


def _plain(session: Session, metric: MetricRow, first: int, last: int, cap: int) -> SeriesRead:
    series = points_store.read_points(
        session=session, run_id=metric.run_id, metric_id=metric.metric_id, start=first, end=last, limit=cap + 1
    )
    return SeriesRead(
        run_id=metric.run_id,
        metric=metric.name,
        start=first,
        end=last,
        steps=series.steps[:cap],
        values=series.values[:cap],
        times=series.wall_times[:cap],
        truncated=len(series.steps) > cap,
    )


def _gather(
    session: Session, run_id: str, metric_ids: list[int], first: int, last: int, shift: int
) -> dict[int, Buckets]:
    """Per metric, the summaries of buckets of 2**shift steps over first..last, exactly."""
    pieces, raw = cover(start=first, end=last, shift=shift)
    stored = rollups_store.read_rollup_pieces(
        session=session, run_id=run_id, metric_ids=metric_ids, pieces=pieces, to_level=shift
    )
    points = rollups_store.read_point_ranges(session=session, run_id=run_id, metric_ids=metric_ids, ranges=raw)
    out = {}
    for metric_id in metric_ids:
        steps, values = points[metric_id]
        parts = concat_buckets([stored[metric_id], bucket_points(steps, values, shift)])
        out[metric_id] = merge_buckets(parts, 0)
    return out
