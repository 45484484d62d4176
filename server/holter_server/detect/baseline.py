"""The local normal every detector compares against: a smoothed level and a robust noise scale.

Both are causal and depend only on a point's series-wide index, never on how the points were
batched, which is what makes the batch and incremental entry points agree exactly.

* level: the median of the last `LEVEL_POINTS` points (one-point outliers cannot move it).
* base/scale: points are grouped into blocks of `BLOCK` by index; a point is compared with the
  median of the medians of the `HISTORY_BLOCKS` blocks before its own, and the noise scale is
  1.4826 x the median of those blocks' median absolute deviations (a robust σ). Updating the
  baseline once per block keeps a 1,000,000-point series to a few vectorised passes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

LEVEL_POINTS = 5
BLOCK = 8
HISTORY_BLOCKS = 8
MIN_HISTORY_BLOCKS = 2
# Robust σ is floored at 1% of the level: logged values are often rounded (2 decimals), which
# makes the MAD of a quiet window exactly zero.
RELATIVE_NOISE_FLOOR = 0.01
MAD_TO_SIGMA = 1.4826


def rolling_level(values: np.ndarray, new_from: int, first_index: int) -> np.ndarray:
    """Median of each new point and the `LEVEL_POINTS - 1` points before it."""
    width = LEVEL_POINTS
    out = np.empty(len(values) - new_from)
    full_from = max(new_from, width - 1 - first_index)
    for pos in range(new_from, min(full_from, len(values))):
        out[pos - new_from] = np.median(values[: pos + 1])
    if full_from < len(values):
        windows = sliding_window_view(values[full_from - width + 1 :], width)
        out[full_from - new_from :] = np.median(windows, axis=1)
    return out


class BlockBaseline:
    """Per-point robust baseline and noise scale from the blocks before each point."""

    def __init__(self, abs_floor: float) -> None:
        self.abs_floor = abs_floor
        self.medians: list[float] = []
        self.mads: list[float] = []
        self.completed = 0
        # Blocks completed by the last update: (number of the first, medians, MADs).
        self.new_blocks: tuple[int, np.ndarray, np.ndarray] = (0, np.empty(0), np.empty(0))

    def update(self, values: np.ndarray, new_from: int, first_index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return (base, scale, early) for the new points and record the blocks they complete.

        `early` marks points with too little history for block statistics: their base is the
        median of all earlier points and their scale the relative floor.
        """
        start = first_index + new_from
        stop = first_index + len(values)
        first_block = start // BLOCK
        last_block = (stop - 1) // BLOCK
        done_before = self.completed
        n_new_blocks = stop // BLOCK - done_before
        new_meds = np.empty(0)
        new_mads = np.empty(0)
        if n_new_blocks > 0:
            lo = done_before * BLOCK - first_index
            blocks = values[lo : lo + n_new_blocks * BLOCK].reshape(n_new_blocks, BLOCK)
            new_meds = np.median(blocks, axis=1)
            new_mads = np.median(np.abs(blocks - new_meds[:, None]), axis=1)
        meds = np.concatenate([np.asarray(self.medians, dtype=float), new_meds])
        mads = np.concatenate([np.asarray(self.mads, dtype=float), new_mads])
        offset = done_before - len(self.medians)  # block number of meds[0]

        block_ids = np.arange(first_block, last_block + 1)
        block_base = np.empty(len(block_ids))
        block_mad = np.empty(len(block_ids))
        full = block_ids >= HISTORY_BLOCKS
        for i in np.flatnonzero(~full):
            b = int(block_ids[i])
            if b >= MIN_HISTORY_BLOCKS:
                block_base[i] = np.median(meds[0 - offset : b - offset])
                block_mad[i] = np.median(mads[0 - offset : b - offset])
            else:
                block_base[i] = np.nan
                block_mad[i] = np.nan
        if full.any():
            b0 = int(block_ids[full][0])
            lo = b0 - HISTORY_BLOCKS - offset
            hi = int(block_ids[-1]) - offset
            block_base[full] = np.median(sliding_window_view(meds[lo:hi], HISTORY_BLOCKS), axis=1)
            block_mad[full] = np.median(sliding_window_view(mads[lo:hi], HISTORY_BLOCKS), axis=1)

        per_point_block = np.arange(start, stop) // BLOCK - first_block
        base = block_base[per_point_block]
        scale = np.maximum(MAD_TO_SIGMA * block_mad[per_point_block], RELATIVE_NOISE_FLOOR * np.abs(base))
        early = np.isnan(base)
        for i in np.flatnonzero(early):
            pos = new_from + int(i)
            if pos == 0:
                continue
            previous = values[:pos]
            base[i] = np.median(previous)
            scale[i] = RELATIVE_NOISE_FLOOR * abs(base[i])
        scale = np.maximum(scale, self.abs_floor)

        keep = HISTORY_BLOCKS
        self.medians = [float(v) for v in meds[-keep:]] if len(meds) else []
        self.mads = [float(v) for v in mads[-keep:]] if len(mads) else []
        self.completed = done_before + n_new_blocks
        self.new_blocks = (done_before, new_meds, new_mads)
        return base, scale, early

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {"medians": self.medians, "mads": self.mads, "completed": self.completed}

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.medians = list(state["medians"])
        self.mads = list(state["mads"])
        self.completed = int(state["completed"])
