"""Runs of consecutive points that meet a condition, tracked across batches.

Several detectors are "the condition held for at least N points in a row" (a NaN streak, a
gradient norm stuck at zero, a level held above its minimum). `RunTracker` turns a boolean
mask over the new points into event openings and extensions, carrying the open run from one
batch to the next so that batching never changes the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class RunUpdate:
    """An event that opened or grew: series-wide indices of its run and of its peak."""

    start: int
    end: int
    opened: bool
    peak_index: int
    peak_score: float
    ongoing: bool


# Masks up to this long are walked in plain Python: a few points per call cost less that way
# than the half-dozen numpy calls of the edge search.
SMALL_MASK = 64


def true_segments(mask: np.ndarray) -> list[tuple[int, int]]:
    """Inclusive (first, last) positions of each run of True in `mask`."""
    if len(mask) <= SMALL_MASK:
        flags = mask.tolist()
        if True not in flags:
            return []
        segments = []
        start = None
        for i, flag in enumerate(flags):
            if flag and start is None:
                start = i
            elif not flag and start is not None:
                segments.append((start, i - 1))
                start = None
        if start is not None:
            segments.append((start, len(flags) - 1))
        return segments
    if not mask.any():
        return []
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.diff(padded)
    starts = np.flatnonzero(edges == 1)
    stops = np.flatnonzero(edges == -1) - 1
    return list(zip(starts.tolist(), stops.tolist()))


class RunTracker:
    """Open an event when a run reaches `min_len`; extend it while the run lasts.

    A new run that starts within `merge_gap` points of the last event's end extends that event
    instead of opening another, so a condition that flickers does not flood the list. An event
    still going at the end of one batch that ends at the start of the next gets a closing update
    (`ongoing` False, `end` before the new points), so batching never leaves it "still going".
    `score` (optional, per new point) is maximised over the event to report its peak.
    """

    def __init__(self, min_len: int, merge_gap: int = 0) -> None:
        self.min_len = min_len
        self.merge_gap = merge_gap
        self.run_start: int | None = None
        self.run_end: int | None = None
        self.event_start: int | None = None
        self.event_end: int | None = None
        self.peak_index = -1
        self.peak_score = -np.inf
        self.run_peak_index = -1
        self.run_peak_score = -np.inf

    def update(self, mask: np.ndarray, first_index: int, score: np.ndarray | None = None) -> list[RunUpdate]:
        """Feed the mask of the new points (series-wide index of mask[0] is `first_index`)."""
        updates: list[RunUpdate] = []
        last_index = first_index + len(mask) - 1
        if (
            self.event_end is not None
            and self.event_end == first_index - 1
            and self.run_end == self.event_end
            and len(mask)
            and not mask[0]
        ):
            # the event was still going at the end of the last batch and ends right here: say so,
            # as one pass over the whole series would have
            updates.append(
                RunUpdate(
                    start=int(self.event_start),
                    end=int(self.event_end),
                    opened=False,
                    peak_index=int(self.peak_index),
                    peak_score=float(self.peak_score),
                    ongoing=False,
                )
            )
        for lo, hi in true_segments(mask):
            g_lo, g_hi = first_index + lo, first_index + hi
            continuing = lo == 0 and self.run_start is not None and self.run_end == first_index - 1
            if not continuing:
                self.run_start = g_lo
                self.run_peak_score, self.run_peak_index = -np.inf, -1
            self.run_end = g_hi
            if score is not None:
                at = int(np.argmax(score[lo : hi + 1]))
                if float(score[lo + at]) > self.run_peak_score:
                    self.run_peak_score, self.run_peak_index = float(score[lo + at]), g_lo + at
            elif self.run_peak_index < 0:
                self.run_peak_score, self.run_peak_index = 0.0, g_lo
            run_start = self.run_start
            if g_hi - run_start + 1 < self.min_len:
                continue
            joins = self.event_end is not None and (
                self.event_end >= run_start - 1 or run_start - self.event_end <= self.merge_gap
            )
            if not joins:
                self.event_start = run_start
                self.peak_score, self.peak_index = -np.inf, -1
            self.event_end = g_hi
            if self.run_peak_score > self.peak_score:
                self.peak_score, self.peak_index = self.run_peak_score, self.run_peak_index
            updates.append(
                RunUpdate(
                    start=int(self.event_start),
                    end=g_hi,
                    opened=not joins,
                    peak_index=int(self.peak_index),
                    peak_score=float(self.peak_score),
                    ongoing=g_hi == last_index,
                )
            )
        return updates

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {
            "run_start": self.run_start,
            "run_end": self.run_end,
            "event_start": self.event_start,
            "event_end": self.event_end,
            "peak_index": self.peak_index,
            "peak_score": None if self.peak_score == -np.inf else self.peak_score,
            "run_peak_index": self.run_peak_index,
            "run_peak_score": None if self.run_peak_score == -np.inf else self.run_peak_score,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.run_start = state["run_start"]
        self.run_end = state["run_end"]
        self.event_start = state["event_start"]
        self.event_end = state["event_end"]
        self.peak_index = state["peak_index"]
        self.peak_score = -np.inf if state["peak_score"] is None else state["peak_score"]
        self.run_peak_index = state["run_peak_index"]
        self.run_peak_score = -np.inf if state["run_peak_score"] is None else state["run_peak_score"]
