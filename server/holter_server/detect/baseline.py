"""The local normal every detector compares against: a smoothed level and a robust noise scale.

Both are causal and depend only on a point's series-wide index, never on how the points were
batched, which is what makes the batch and incremental entry points agree exactly.

* level: the median of the last `LEVEL_POINTS` points (one-point outliers cannot move it).
* base/scale: points are grouped into blocks of `BLOCK` by index; a point is compared with the
  median of the medians of the `HISTORY_BLOCKS` blocks before its own, and the noise scale is
  1.4826 x the median of those blocks' median absolute deviations (a robust σ). Updating the
  baseline once per block keeps a 1,000,000-point series to a few vectorised passes.
* after a level shift (two blocks in a row far from the history, on the same side) the history
  restarts at the new level instead of remembering the old one for `HISTORY_BLOCKS` blocks: a
  dip right after a throughput drop is measured against the new level, and recovers to it.
* the scale has floors, so that no summary claims thousands of σ the data cannot support: 1% of
  the level, half the print quantum (a log printed to 2 decimals cannot show noise below 0.005,
  and the MAD of a quiet window of such a log is exactly 0), and the kind's absolute floor.
* the first `MIN_HISTORY_BLOCKS` blocks (cold start) compare each point with the median of the
  `BLOCK` points before it and a robust σ from the differences between all the points before
  it (a steep early fall is a trend, not noise), once there are `EARLY_MAD_POINTS` of them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

LEVEL_POINTS = 5
BLOCK = 8
HISTORY_BLOCKS = 8
MIN_HISTORY_BLOCKS = 2
# Robust σ is floored at 1% of the level and at half the print quantum: logged values are
# often rounded (2 decimals), which makes the MAD of a quiet window exactly zero.
RELATIVE_NOISE_FLOOR = 0.01
QUANTUM_SHARE = 0.5
MAD_TO_SIGMA = 1.4826
DIFF_TO_SIGMA = MAD_TO_SIGMA / np.sqrt(2.0)
# Before this many earlier points there is no noise estimate at all (spikes use a cap instead).
EARLY_MAD_POINTS = 4
# A level shift that restarts the history: two consecutive blocks this far from it, same side.
RESET_NOISE_UNITS = 6.0
RESET_MIN_REL = 0.1
# Blocks kept between updates: the history plus the two blocks a restart is judged on.
KEEP_BLOCKS = HISTORY_BLOCKS + 2
MAX_DECIMALS = 12
_POWERS = 10.0 ** np.arange(MAX_DECIMALS + 1)
_POWER_FLOATS = [float(p) for p in _POWERS]
# The print quantum of each decimal count, computed by numpy's power as `_windows` computes it
# (Python's ** may round differently in the last bit), for the scalar path to read.
_QUANTA = [float(q) for q in 10.0 ** -np.arange(MAX_DECIMALS + 1).astype(float)]
# Up to this many new points, `rolling_level` gathers its windows by index (same rows, same medians).
SMALL_LEVEL_BATCH = 4096
_LEVEL_OFFSETS = np.arange(LEVEL_POINTS)
# Updates that complete at most this many blocks take the scalar path (`_update_few`): a few
# points per call cost a few dozen numpy calls on 8-element arrays otherwise, and their overhead
# is the whole cost. Larger batches are cheaper vectorised.
SCALAR_MAX_BLOCKS = 16
# A new series' first points (`rolling_level`'s first few, the baseline's early ones) take plain
# Python too on `_plain` values: each is a median of a handful (tests turn it off to compare).
SCALAR_FIRST_POINTS = True
# The scalar path declines values this large: a sum of two could overflow, and an inf - inf
# NaN orders differently in Python's sorted() than in numpy's partition.
SCALAR_MAX_ABS = 1e300


def rolling_level(values: np.ndarray, new_from: int, first_index: int) -> np.ndarray:
    """Median of each new point and the `LEVEL_POINTS - 1` points before it."""
    width = LEVEL_POINTS
    out = np.empty(len(values) - new_from)
    full_from = max(new_from, width - 1 - first_index)
    for pos in range(new_from, min(full_from, len(values))):
        # a series' first few points: numpy's median costs more to call than to compute here
        first = values[: pos + 1].tolist()
        out[pos - new_from] = _median_of(first) if SCALAR_FIRST_POINTS and _plain(first) else np.median(first)
    if full_from < len(values):
        count = len(values) - full_from
        if count <= SMALL_LEVEL_BATCH:
            # gathering the few windows is far cheaper than setting up a strided view
            windows = values[np.arange(full_from - width + 1, len(values) - width + 1)[:, None] + _LEVEL_OFFSETS]
        else:
            windows = sliding_window_view(values[full_from - width + 1 :], width)
        out[full_from - new_from :] = row_medians(windows)
    return out


def decimals(values: np.ndarray) -> np.ndarray:
    """How many decimals each value is printed with: 2 for 0.25, `MAX_DECIMALS` for a float32
    value that no short decimal writes; -1 for 0 (which says nothing about the print)."""
    a = np.abs(np.asarray(values, dtype=float))
    out = np.full(len(a), MAX_DECIMALS)
    # values no short decimal writes are settled by one test; the rest by the fewest decimals
    todo = np.flatnonzero(_written_with(a, MAX_DECIMALS))
    for d in range(MAX_DECIMALS):
        if not len(todo):
            break
        fits = _written_with(a[todo], d)
        out[todo[fits]] = d
        todo = todo[~fits]
    return np.where(a == 0, -1, out)


def _written_with(a: np.ndarray, d: int) -> np.ndarray:
    """Whether each value is a whole number of 10^-d, up to float64 rounding (0.29 * 100 is
    28.999999999999996)."""
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = a * _POWERS[d]
        return np.abs(scaled - np.round(scaled)) <= 1e-6 + 4e-16 * scaled


def decimals_of(value: float) -> int:
    """`decimals` of one value, in plain Python: the same count, without numpy's per-call
    overhead (one value per completed block, a block or two per call when points trickle in)."""
    a = abs(value)
    if a == 0:
        return -1
    if not _written_with_scalar(a, MAX_DECIMALS):
        return MAX_DECIMALS
    for d in range(MAX_DECIMALS):
        if _written_with_scalar(a, d):
            return d
    return MAX_DECIMALS


def _written_with_scalar(a: float, d: int) -> bool:
    """`_written_with` for one float: Python's round() also rounds half to even, and float
    arithmetic is the same IEEE arithmetic; an overflow to inf fits nothing, as in numpy."""
    scaled = a * _POWER_FLOATS[d]
    if not math.isfinite(scaled):
        return False
    return abs(scaled - round(scaled)) <= 1e-6 + 4e-16 * scaled


def quantum(decimal_counts: np.ndarray) -> float:
    """The print quantum (10^-decimals) of values with these decimal counts; 0 when unknown."""
    known = decimal_counts[decimal_counts >= 0]
    return float(10.0 ** -int(known.max())) if len(known) else 0.0


def noise_floor(base: np.ndarray | float, print_quantum: np.ndarray | float, abs_floor: float) -> np.ndarray:
    """The smallest σ the data can support at level `base`."""
    return np.maximum(
        np.maximum(RELATIVE_NOISE_FLOOR * np.abs(base), QUANTUM_SHARE * np.asarray(print_quantum)), abs_floor
    )


def row_medians(rows: np.ndarray, inside: np.ndarray | None = None) -> np.ndarray:
    """Median of each row (of the `inside` entries only, at least one per row): what np.median
    gives, without its per-call overhead, which dominates when points arrive a few at a time."""
    if inside is None:
        n = rows.shape[1]
        if n % 2:
            return np.partition(rows, n // 2, axis=1)[:, n // 2]
        ordered = np.partition(rows, [n // 2 - 1, n // 2], axis=1)
        return (ordered[:, n // 2 - 1] + ordered[:, n // 2]) / 2
    ordered = np.sort(np.where(inside, rows, np.inf), axis=1)
    count = inside.sum(axis=1)
    at = np.arange(len(rows))
    return (ordered[at, (count - 1) // 2] + ordered[at, count // 2]) / 2


def _median_of(values: list[float]) -> float:
    """Median of a short list, as `row_medians` computes it (mean of the two middle values, or
    of the middle one with itself). Only for `_plain` values, on which Python's sort and numpy's
    agree."""
    ordered = sorted(values)
    count = len(ordered)
    return (ordered[(count - 1) // 2] + ordered[count // 2]) / 2


def bounded(values: list[float]) -> bool:
    """Whether these values are finite and far from overflow: arithmetic on a few of them cannot
    make an inf - inf NaN, on which Python's sorted() and max() differ from numpy's."""
    if not values:
        return True
    total = sum(values)  # NaN if any is NaN (min and max would not say)
    return total == total and min(values) >= -SCALAR_MAX_ABS and max(values) <= SCALAR_MAX_ABS


def _plain(values: list[float]) -> bool:
    """Whether the scalar path computes exactly what the vectorised one does on these values:
    `bounded`, and no -0.0 (equal to 0.0 for any sort, so which of the two a median picks would
    depend on the algorithm)."""
    if not bounded(values):
        return False
    return 0.0 not in values or not any(math.copysign(1.0, v) < 0 for v in values if v == 0.0)


def _windows(
    meds: np.ndarray, mads: np.ndarray, decs: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median of block medians, median of block MADs and print quantum over blocks [lo, hi)
    (local indices, at most `HISTORY_BLOCKS` wide) for each query."""
    width = HISTORY_BLOCKS
    idx = hi[:, None] - width + np.arange(width)[None, :]
    inside = idx >= lo[:, None]
    safe = np.clip(idx, 0, max(len(meds) - 1, 0))
    mask = None if inside.all() else inside
    base = row_medians(meds[safe], mask)
    mad = row_medians(mads[safe], mask)
    d = np.where(inside, decs[safe], -1).max(axis=1) if len(lo) else np.empty(0, dtype=int)
    q = np.where(d >= 0, 10.0 ** -np.maximum(d, 0).astype(float), 0.0)
    return base, mad, q


class BlockBaseline:
    """Per-point robust baseline and noise scale from the blocks before each point."""

    def __init__(self, abs_floor: float) -> None:
        self.abs_floor = abs_floor
        self.medians: list[float] = []
        self.mads: list[float] = []
        self.decimals: list[int] = []
        self.completed = 0
        self.restart = 0  # block number where the history restarts (after the last level shift)
        # (block, completed, restart) -> that block's base, MAD and quantum: points arriving a few
        # at a time mostly fall in the block the last update already described (derived, not state)
        self.cached: tuple[tuple[int, int, int], tuple[float, float, float]] | None = None
        # Blocks completed by the last update: (number of the first, medians, MADs).
        self.new_blocks: tuple[int, np.ndarray, np.ndarray] = (0, np.empty(0), np.empty(0))

    def update(
        self, values: np.ndarray, new_from: int, first_index: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Return (base, scale, early, print quantum) for the new points and record the blocks
        they complete.

        `early` marks points with too little history for block statistics: their base is the
        median of the last `BLOCK` earlier points and their scale the robust σ of the earlier
        points' differences (from `EARLY_MAD_POINTS` of them on; the floor before that). The
        print quantum (0.01 for a log printed to 2 decimals; 0 when unknown) is read off the
        points before each point.
        """
        few = self._update_few(values, new_from, first_index)
        if few is not None:
            return few
        start = first_index + new_from
        stop = first_index + len(values)
        first_block = start // BLOCK
        last_block = (stop - 1) // BLOCK
        done_before = self.completed
        n_new_blocks = stop // BLOCK - done_before
        new_meds = np.empty(0)
        new_mads = np.empty(0)
        new_decs = np.empty(0, dtype=int)
        if n_new_blocks > 0:
            lo = done_before * BLOCK - first_index
            blocks = values[lo : lo + n_new_blocks * BLOCK].reshape(n_new_blocks, BLOCK)
            new_meds = row_medians(blocks)
            new_mads = row_medians(np.abs(blocks - new_meds[:, None]))
            # the print is read off one real value per block (its largest); the quantum of a
            # history takes the finest of eight such values
            new_decs = decimals(blocks.max(axis=1))
        meds = np.concatenate([np.asarray(self.medians, dtype=float), new_meds])
        mads = np.concatenate([np.asarray(self.mads, dtype=float), new_mads])
        decs = np.concatenate([np.asarray(self.decimals, dtype=int), new_decs])
        offset = done_before - len(self.medians)  # block number of meds[0]

        block_ids = np.arange(first_block, last_block + 1)
        key = (first_block, done_before, self.restart)
        if n_new_blocks <= 0 and self.cached is not None and self.cached[0] == key:
            # the block the last update described, with no block completed since
            block_base, block_mad, block_q = (np.array([v]) for v in self.cached[1])
            restart_after = np.empty(0, dtype=np.int64)
        else:
            # the history of each block (the 8 before it) as if nothing restarted: it judges the
            # restarts, and is each block's own history unless a restart falls inside it
            ids = np.arange(max(first_block - 1, MIN_HISTORY_BLOCKS), last_block + 1)
            u_base, u_mad, u_q = _windows(meds, mads, decs, np.maximum(ids - HISTORY_BLOCKS, 0) - offset, ids - offset)

            # restarts: block f and the one before it both far from the history of the 8 before them
            restart_after = np.full(max(n_new_blocks, 0), self.restart, dtype=np.int64)
            if n_new_blocks > 0:
                f = np.arange(done_before, done_before + n_new_blocks)
                judged = f >= MIN_HISTORY_BLOCKS + 1
                if judged.any():
                    fj = f[judged]
                    at = fj - 1 - ids[0]
                    ref, ref_mad, ref_q = u_base[at], u_mad[at], u_q[at]
                    noise = np.maximum(MAD_TO_SIGMA * ref_mad, noise_floor(ref, ref_q, self.abs_floor))
                    need = np.maximum(RESET_NOISE_UNITS * noise, RESET_MIN_REL * np.abs(ref))
                    now, prev = meds[fj - offset] - ref, meds[fj - 1 - offset] - ref
                    shifted = (np.sign(now) == np.sign(prev)) & (np.minimum(np.abs(now), np.abs(prev)) >= need)
                    marks = np.zeros(n_new_blocks, dtype=np.int64)
                    marks[np.flatnonzero(judged)[shifted]] = fj[shifted]
                    restart_after = np.maximum.accumulate(np.maximum(marks, self.restart))

            # the restart a block sees: from flagged blocks before it (the block before a flagged
            # one may straddle the change, so the new history starts at the flagged block itself)
            seen = np.full(len(block_ids), self.restart, dtype=np.int64)
            if n_new_blocks > 0:
                later = block_ids - 1 - done_before  # index into restart_after of the block before
                has = later >= 0
                seen[has] = restart_after[np.minimum(later[has], n_new_blocks - 1)]
            block_base = np.full(len(block_ids), np.nan)
            block_mad = np.full(len(block_ids), np.nan)
            block_q = np.zeros(len(block_ids))
            full = block_ids >= MIN_HISTORY_BLOCKS
            if full.any():
                b = block_ids[full]
                at = b - ids[0]
                block_base[full], block_mad[full], block_q[full] = u_base[at], u_mad[at], u_q[at]
                cut = seen[full] > b - HISTORY_BLOCKS
                if cut.any():
                    bc = b[cut]
                    lo_blocks = np.minimum(np.maximum(seen[full][cut], 0), bc - 1)
                    rows = np.flatnonzero(full)[cut]
                    block_base[rows], block_mad[rows], block_q[rows] = _windows(
                        meds, mads, decs, lo_blocks - offset, bc - offset
                    )
        restart_now = int(restart_after[-1]) if len(restart_after) else self.restart
        self.cached = (
            (last_block, done_before + max(n_new_blocks, 0), restart_now),
            (float(block_base[-1]), float(block_mad[-1]), float(block_q[-1])),
        )

        per_point_block = np.arange(start, stop) // BLOCK - first_block
        base = block_base[per_point_block]
        print_quantum = block_q[per_point_block]
        scale = np.maximum(MAD_TO_SIGMA * block_mad[per_point_block], noise_floor(base, print_quantum, self.abs_floor))
        early = np.isnan(base)
        if early.any():
            self._fill_early(values, new_from, np.flatnonzero(early), base, scale, print_quantum)

        keep = KEEP_BLOCKS
        self.medians = [float(v) for v in meds[-keep:]] if len(meds) else []
        self.mads = [float(v) for v in mads[-keep:]] if len(mads) else []
        self.decimals = [int(v) for v in decs[-keep:]] if len(decs) else []
        self.restart = restart_now
        self.completed = done_before + n_new_blocks
        self.new_blocks = (done_before, new_meds, new_mads)
        return base, scale, early, print_quantum

    def _fill_early(
        self,
        values: np.ndarray,
        new_from: int,
        rows: np.ndarray,
        base: np.ndarray,
        scale: np.ndarray,
        print_quantum: np.ndarray,
    ) -> None:
        """Base, scale and print quantum of the early points `rows` (see `update`), in place: from
        the points before each one. A new metric's first two calls are mostly these 16 points, so
        on `_plain` values they are computed in plain Python, each value's decimals counted once and
        their maximum taken over the prefix (the same numbers: `_median_of` is numpy's median on such
        values, `decimals_of` its `decimals`, the floor the same IEEE operations); otherwise point
        by point with numpy."""
        last = new_from + int(rows[-1])  # every early point reads only points before it
        prefix = values[:last].tolist()
        if not (SCALAR_FIRST_POINTS and _plain(prefix)):
            for i in rows:
                pos = new_from + int(i)
                if pos == 0:
                    scale[i] = self.abs_floor
                    continue
                previous = values[:pos]
                base[i] = np.median(previous[-BLOCK:])
                print_quantum[i] = quantum(decimals(previous))
                floor = float(noise_floor(base[i], print_quantum[i], self.abs_floor))
                # from point-to-point differences: the steep early fall of a loss is a trend, not noise
                spread = DIFF_TO_SIGMA * float(np.median(np.abs(np.diff(previous)))) if pos >= EARLY_MAD_POINTS else 0.0
                scale[i] = max(spread, floor)
            return
        counts = [decimals_of(v) for v in prefix]  # `decimals` value by value: of the prefix's, a prefix
        gaps = [abs(b - a) for a, b in zip(prefix, prefix[1:])]
        abs_floor = float(self.abs_floor)
        for i in rows:
            pos = new_from + int(i)
            if pos == 0:
                scale[i] = self.abs_floor
                continue
            middle = _median_of(prefix[max(pos - BLOCK, 0) : pos])
            finest = max(counts[:pos])
            q = float(10.0**-finest) if finest >= 0 else 0.0
            floor = max(RELATIVE_NOISE_FLOOR * abs(middle), QUANTUM_SHARE * q, abs_floor)
            spread = DIFF_TO_SIGMA * _median_of(gaps[: pos - 1]) if pos >= EARLY_MAD_POINTS else 0.0
            base[i], print_quantum[i] = middle, q
            scale[i] = max(spread, floor)

    def _update_few(
        self, values: np.ndarray, new_from: int, first_index: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """`update` for a batch that completes few blocks, block by block in plain Python; None
        (and nothing changed) where it does not apply: many blocks, or values `_plain` rejects
        (a new series' early points are filled by `_fill_early`, as `update` fills them: its
        first calls were mostly numpy's overhead on empty windows). Every number is the one the
        vectorised path computes, by the same IEEE operations in the same order (a test feeds
        both the same series and compares bits)."""
        start = first_index + new_from
        stop = first_index + len(values)
        first_block = start // BLOCK
        last_block = (stop - 1) // BLOCK
        done_before = self.completed
        n_new = stop // BLOCK - done_before
        offset = done_before - len(self.medians)  # block number of medians[0]
        # the oldest block read: the history of the block before the first one completed here
        if not 0 <= n_new <= SCALAR_MAX_BLOCKS:
            return None
        if offset > max(done_before - 1 - HISTORY_BLOCKS, 0):
            return None
        if not (_plain(self.medians) and _plain(self.mads)):
            return None
        lo = done_before * BLOCK - first_index
        if lo < 0:
            return None
        seg = values[lo : lo + n_new * BLOCK].tolist()
        if not _plain(seg):
            return None

        meds = list(self.medians)
        mads = list(self.mads)
        decs = list(self.decimals)
        for k in range(n_new):
            block = seg[k * BLOCK : (k + 1) * BLOCK]
            med = _median_of(block)
            meds.append(med)
            mads.append(_median_of([abs(v - med) for v in block]))
            decs.append(decimals_of(max(block)))
        abs_floor = float(self.abs_floor)

        known: dict[tuple[int, int], tuple[float, float, float]] = {}

        def history(lo_block: int, hi_block: int) -> tuple[float, float, float]:
            # median of medians, median of MADs and print quantum over blocks [lo, hi); a block's
            # own history is mostly the one the restart test of the block after it read
            if (lo_block, hi_block) not in known:
                a, b = lo_block - offset, hi_block - offset
                d = max(decs[a:b])
                known[lo_block, hi_block] = (
                    _median_of(meds[a:b]),
                    _median_of(mads[a:b]),
                    _QUANTA[d] if d >= 0 else 0.0,
                )
            return known[lo_block, hi_block]

        def floor(base: float, print_quantum: float) -> float:
            return max(RELATIVE_NOISE_FLOOR * abs(base), QUANTUM_SHARE * print_quantum, abs_floor)

        # restarts: block f and the one before it both far from the history of the 8 before them
        restart = self.restart
        restart_after = []
        for f in range(done_before, done_before + n_new):
            if f >= MIN_HISTORY_BLOCKS + 1:
                ref, ref_mad, ref_q = history(max(f - 1 - HISTORY_BLOCKS, 0), f - 1)
                noise = max(MAD_TO_SIGMA * ref_mad, floor(ref, ref_q))
                need = max(RESET_NOISE_UNITS * noise, RESET_MIN_REL * abs(ref))
                now, prev = meds[f - offset] - ref, meds[f - 1 - offset] - ref
                same_side = (now > 0) - (now < 0) == (prev > 0) - (prev < 0)
                if same_side and min(abs(now), abs(prev)) >= need:
                    restart = max(restart, f)
            restart_after.append(restart)

        key = (first_block, done_before, self.restart)
        blocks: list[tuple[float, float, float]] = []
        if n_new == 0 and self.cached is not None and self.cached[0] == key:
            blocks.append(self.cached[1])
        else:
            for b in range(first_block, last_block + 1):
                if b < MIN_HISTORY_BLOCKS:  # no block statistics yet: its points are early
                    blocks.append((math.nan, math.nan, 0.0))
                    continue
                later = b - 1 - done_before
                seen = restart_after[min(later, n_new - 1)] if later >= 0 else self.restart
                lo_block = min(max(seen, 0), b - 1) if seen > b - HISTORY_BLOCKS else max(b - HISTORY_BLOCKS, 0)
                blocks.append(history(lo_block, b))
        self.cached = ((last_block, done_before + n_new, restart), blocks[-1])

        bases: list[float] = []
        scales: list[float] = []
        quanta: list[float] = []
        for j, (block_base, block_mad, block_q) in enumerate(blocks):
            b = first_block + j
            count = min(stop, (b + 1) * BLOCK) - max(start, b * BLOCK)
            bases += [block_base] * count
            scales += [max(MAD_TO_SIGMA * block_mad, floor(block_base, block_q))] * count
            quanta += [block_q] * count

        keep = KEEP_BLOCKS
        self.medians = meds[-keep:]
        self.mads = mads[-keep:]
        self.decimals = decs[-keep:]
        self.restart = restart
        self.completed = done_before + n_new
        self.new_blocks = (done_before, np.array(meds[len(meds) - n_new :]), np.array(mads[len(mads) - n_new :]))
        base, scale, print_quantum = np.array(bases), np.array(scales), np.array(quanta)
        early = np.isnan(base)
        if early.any():  # a new series' first blocks: as `update` fills them
            self._fill_early(values, new_from, np.flatnonzero(early), base, scale, print_quantum)
        return base, scale, early, print_quantum

    def last_level(self) -> tuple[float, float] | None:
        """The base and noise scale of the last block the last update described (what a point
        arriving now is compared with); None before the first blocks, or after a restore."""
        if self.cached is None:
            return None
        base, mad, print_quantum = self.cached[1]
        if not (math.isfinite(base) and math.isfinite(mad)):
            return None
        return base, max(MAD_TO_SIGMA * mad, float(noise_floor(base, print_quantum, self.abs_floor)))

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {
            "medians": self.medians,
            "mads": self.mads,
            "decimals": self.decimals,
            "completed": self.completed,
            "restart": self.restart,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.medians = list(state["medians"])
        self.mads = list(state["mads"])
        self.decimals = [int(d) for d in state["decimals"]]
        self.completed = int(state["completed"])
        self.restart = int(state["restart"])
