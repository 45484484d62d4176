"""Rollup buckets: the pure arithmetic of per-metric summaries of power-of-two step buckets.

Bucket `b` of level `L` holds steps `b * 2**L` to `(b + 1) * 2**L - 1`. The levels are `LEVELS`
(every fourth power of two from 64 steps), so a read at any bucket width finds a level at most
16 times finer than it needs and merges at most 16 rows per output bucket (the one holding step
0: at most 15 per level, see below); narrower buckets are read from the points. Starting at 64
steps keeps the rows ingest writes near 1.7% of the points it stores.

Bucket 0 is stored at the finest level only (`is_stored`). At a coarser level it would hold
steps 0 to 2**L - 1, which the level below already holds as its buckets 0 to 15 (its own bucket
0 again split the same way): a read takes them from there, at most 15 rows per level, as it
takes a range's ragged edges. That bucket was most of what ingest wrote: a run of fewer than
16,384 steps has nothing else at levels 14 to 42, so a small batch of it wrote ten rows per
metric, and now writes one or two (a point at step s is in a stored bucket of level L > 6 only
when s >= 2**L: four rows per metric up to 2**22 steps). A database written before keeps its old
bucket-0 rows above the finest level, no longer brought up to date: nothing reads them (a read's
cover never names them, a rebuild reads only the buckets under a stored one), so reads are the
same with or without them, and `DELETE FROM rollups WHERE level > 6 AND bucket = 0` frees them.

Numbers in, summaries out: no database here (store/rollups.py stores and reads them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

LEVELS = tuple(range(6, 43, 4))
NO_STEP = -1  # stands for "no such step" (a bucket without finite values has no extremes)


def first_stored_bucket(level: int) -> int:
    """The first bucket of `level` the store keeps: 0 at the finest level, 1 above it (see the
    module's docstring)."""
    return 0 if level == LEVELS[0] else 1


def is_stored(level: int, bucket: np.ndarray) -> np.ndarray:
    """Which of these buckets of `level` the store keeps."""
    return bucket >= first_stored_bucket(level)


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

    def take(self, index: np.ndarray | slice) -> Buckets:
        """The buckets at `index` (an index array, a boolean mask or a slice)."""
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
    return summarise_points(steps, values, buckets, np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]]))


def summarise_points(steps: np.ndarray, values: np.ndarray, buckets: np.ndarray, starts: np.ndarray) -> Buckets:
    """Summaries of the groups of points beginning at `starts`."""
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
        min_value=min_value,
        min_step=min_step,
        max_value=max_value,
        max_step=max_step,
        first_step=steps[starts],
        first_value=values[starts],
        last_step=steps[ends],
        last_value=values[ends],
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
    return merge_groups(parts, buckets, np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]]))


def merge_groups(parts: Buckets, buckets: np.ndarray, starts: np.ndarray) -> Buckets:
    """The groups of buckets beginning at `starts` merged into one each, numbered `buckets`."""
    ends = np.r_[starts[1:], len(buckets)] - 1
    has_finite = parts.min_step != NO_STEP
    min_value, min_step = _extreme(np.where(has_finite, parts.min_value, np.inf), starts, parts.min_step, np.minimum)
    max_value, max_step = _extreme(np.where(has_finite, parts.max_value, -np.inf), starts, parts.max_step, np.maximum)
    return Buckets(
        bucket=buckets[starts],
        count=np.add.reduceat(parts.count, starts),
        finite_sum=np.add.reduceat(parts.finite_sum, starts),
        min_value=min_value,
        min_step=min_step,
        max_value=max_value,
        max_step=max_step,
        first_step=parts.first_step[starts],
        first_value=parts.first_value[starts],
        last_step=parts.last_step[ends],
        last_value=parts.last_value[ends],
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


def _extreme(
    candidates: np.ndarray, starts: np.ndarray, steps: np.ndarray, ufunc: np.ufunc
) -> tuple[np.ndarray, np.ndarray]:
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
    """The summaries of points (steps ascending, distinct) at every level, the buckets the store
    keeps (`is_stored`) and no others."""
    finest = bucket_points(steps, values, LEVELS[0])
    out = [(LEVELS[0], finest)]
    for previous, level in zip(LEVELS, LEVELS[1:]):
        finer = out[-1][1]
        if len(finer) == 1:  # a batch usually fits one coarse bucket: nothing to merge
            out.append((level, replace(finer, bucket=finer.bucket >> (level - previous))))
        else:
            out.append((level, merge_buckets(finer, level - previous)))
    return [(level, buckets.take(is_stored(level, buckets.bucket))) for level, buckets in out]
