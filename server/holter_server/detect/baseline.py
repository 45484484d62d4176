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


def rolling_level(values: np.ndarray, new_from: int, first_index: int) -> np.ndarray:
    """Median of each new point and the `LEVEL_POINTS - 1` points before it."""
    width = LEVEL_POINTS
    out = np.empty(len(values) - new_from)
    full_from = max(new_from, width - 1 - first_index)
    for pos in range(new_from, min(full_from, len(values))):
        out[pos - new_from] = np.median(values[: pos + 1])
    if full_from < len(values):
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
    scaled = a * _POWERS[d]
    with np.errstate(invalid="ignore", over="ignore"):
        return np.abs(scaled - np.round(scaled)) <= 1e-6 + 4e-16 * scaled


def quantum(decimal_counts: np.ndarray) -> float:
    """The print quantum (10^-decimals) of values with these decimal counts; 0 when unknown."""
    known = decimal_counts[decimal_counts >= 0]
    return float(10.0 ** -int(known.max())) if len(known) else 0.0


def noise_floor(base: np.ndarray | float, print_quantum: np.ndarray | float, abs_floor: float) -> np.ndarray:
    """The smallest σ the data can support at level `base`."""
    return np.maximum(np.maximum(RELATIVE_NOISE_FLOOR * np.abs(base), QUANTUM_SHARE * np.asarray(print_quantum)), abs_floor)


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


def _windows(meds: np.ndarray, mads: np.ndarray, decs: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
                    block_base[rows], block_mad[rows], block_q[rows] = _windows(meds, mads, decs, lo_blocks - offset, bc - offset)
        restart_now = int(restart_after[-1]) if len(restart_after) else self.restart
        self.cached = ((last_block, done_before + max(n_new_blocks, 0), restart_now),
                       (float(block_base[-1]), float(block_mad[-1]), float(block_q[-1])))

        per_point_block = np.arange(start, stop) // BLOCK - first_block
        base = block_base[per_point_block]
        print_quantum = block_q[per_point_block]
        scale = np.maximum(MAD_TO_SIGMA * block_mad[per_point_block], noise_floor(base, print_quantum, self.abs_floor))
        early = np.isnan(base)
        for i in np.flatnonzero(early):
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

        keep = KEEP_BLOCKS
        self.medians = [float(v) for v in meds[-keep:]] if len(meds) else []
        self.mads = [float(v) for v in mads[-keep:]] if len(mads) else []
        self.decimals = [int(v) for v in decs[-keep:]] if len(decs) else []
        self.restart = restart_now
        self.completed = done_before + n_new_blocks
        self.new_blocks = (done_before, new_meds, new_mads)
        return base, scale, early, print_quantum

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {"medians": self.medians, "mads": self.mads, "decimals": self.decimals, "completed": self.completed,
                "restart": self.restart}

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.medians = list(state["medians"])
        self.mads = list(state["mads"])
        self.decimals = [int(d) for d in state["decimals"]]
        self.completed = int(state["completed"])
        self.restart = int(state["restart"])
