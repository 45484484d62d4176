"""Downsampling that never hides an extreme: min/max per power-of-two step bucket.

A chart of `max_points` points gets at most `max_points // 2` buckets. Each bucket contributes
its finite minimum and maximum at the steps where they happened (one point when they are the
same point), so a single-step spike stays at its height and place at every zoom level. NaN,
+Inf and -Inf are counted per bucket and reported apart; a bucket with nothing finite gives one
point, its first value, so a series that went NaN still shows where. Buckets lie on a grid of
multiples of their width, the same grid as the stored rollups, so a read merges whole rollup
rows and never estimates.
"""

from __future__ import annotations

import numpy as np

from holter_server.store.rollup_buckets import LEVELS, NO_STEP, Buckets, first_stored_bucket

Piece = tuple[int, int, int]  # (rollup level, first bucket, last bucket)
StepRange = tuple[int, int]  # (first step, last step), inclusive


def choose_shift(*, start: int, end: int, max_buckets: int) -> int:
    """The smallest bucket width 2**shift that splits steps start..end into at most `max_buckets`."""
    shift = 0
    while (end >> shift) - (start >> shift) + 1 > max_buckets:
        shift += 1
    return shift


def cover(*, start: int, end: int, shift: int) -> tuple[list[Piece], list[StepRange]]:
    """Split steps start..end into stored rollup buckets no wider than 2**shift, coarsest
    first, and the leftover step ranges (narrower than the finest level) to read as points.

    The middle comes from the coarsest usable level; each ragged edge from finer levels, at
    most 15 buckets per level, down to fewer than 64 single points per edge. Bucket 0 of a
    level above the finest is not stored (`rollup_buckets.first_stored_bucket`): steps below 2**level
    are an edge too, read from the levels below it, at most 15 buckets each.
    """
    usable = [level for level in reversed(LEVELS) if level <= shift]
    pieces: list[Piece] = []
    raw: list[StepRange] = []
    pending = [(start, end, 0)]
    while pending:
        first, last, index = pending.pop()
        if first > last:
            continue
        if index == len(usable):
            raw.append((first, last))
            continue
        level = usable[index]
        width = 1 << level
        lo = max(-(-first // width), first_stored_bucket(level))
        hi = (last + 1) // width - 1
        if lo > hi:
            pending.append((first, last, index + 1))
            continue
        pieces.append((level, lo, hi))
        pending.append((first, lo * width - 1, index + 1))
        pending.append(((hi + 1) * width, last, index + 1))
    return pieces, sorted(raw)


def minmax_points(buckets: Buckets) -> tuple[np.ndarray, np.ndarray]:
    """The points a chart draws for these buckets: per bucket its minimum and maximum in step
    order, or its first value when nothing in it is finite."""
    has_finite = buckets.min_step != NO_STEP
    lows = np.where(has_finite, buckets.min_step, buckets.first_step)
    low_values = np.where(has_finite, buckets.min_value, buckets.first_value)
    distinct_high = has_finite & (buckets.max_step != buckets.min_step)
    steps = np.concatenate([lows, buckets.max_step[distinct_high]])
    values = np.concatenate([low_values, buckets.max_value[distinct_high]])
    order = np.argsort(steps, kind="stable")
    return steps[order], values[order]
