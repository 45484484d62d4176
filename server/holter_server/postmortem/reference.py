"""Comparing a run with a trusted reference run, aligned by step.

The reference gives a band: its own curve, smoothed, widened by its local noise (and never
narrower than a small share of its level). A run that stays outside the band for long enough
has drifted: "eval_loss 0.12 above the reference from step 20,000", the silent-bug signature
of shared/seeds/004 when the train loss still matches. Pure: arrays in, drifts out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from holter_server.detect.events import format_step, format_value

SMOOTH_POINTS = 9
NOISE_MULTIPLE = 4.0
MIN_RELATIVE_WIDTH = 0.02
MIN_POINTS_OUTSIDE = 5


@dataclass
class Band:
    """The reference at the run's steps, and the band around it."""

    steps: np.ndarray
    reference: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass
class Drift:
    """A stretch where the run stayed outside the reference's band."""

    metric: str
    start_step: int
    end_step: int
    mean_gap: float
    direction: str  # above or below
    points: int

    def summary(self, companions: dict[str, bool]) -> str:
        others = [f"{name} {'matches' if ok else 'also drifts'}" for name, ok in companions.items()]
        tail = f" while {', '.join(others)}" if others else ""
        return (
            f"{self.metric} ran {format_value(abs(self.mean_gap))} {self.direction} the reference from step "
            f"{format_step(self.start_step)} to {format_step(self.end_step)} ({self.points} points){tail}"
        )


def _rolling_median(values: np.ndarray, width: int) -> np.ndarray:
    if len(values) < width:
        return np.full_like(values, np.nanmedian(values) if len(values) else np.nan)
    pad = width // 2
    padded = np.pad(values, pad, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, width)
    return np.nanmedian(windows, axis=1)


def band(ref_steps: np.ndarray, ref_values: np.ndarray, steps: np.ndarray) -> Band:
    """The reference's band at `steps` (only where the reference covers them)."""
    finite = np.isfinite(ref_values)
    ref_steps, ref_values = ref_steps[finite], ref_values[finite]
    smooth = _rolling_median(ref_values, SMOOTH_POINTS)
    noise = _rolling_median(np.abs(ref_values - smooth), SMOOTH_POINTS * 3) * 1.4826
    inside = (steps >= ref_steps[0]) & (steps <= ref_steps[-1]) if len(ref_steps) else np.zeros(len(steps), bool)
    at = steps[inside]
    centre = np.interp(at, ref_steps, smooth)
    width = np.maximum(NOISE_MULTIPLE * np.interp(at, ref_steps, noise), MIN_RELATIVE_WIDTH * np.abs(centre))
    return Band(steps=at, reference=centre, low=centre - width, high=centre + width)


def drifts(
    metric: str, ref_steps: np.ndarray, ref_values: np.ndarray, steps: np.ndarray, values: np.ndarray
) -> tuple[Band, list[Drift]]:
    """The band, and every stretch of at least MIN_POINTS_OUTSIDE points the run spent outside it."""
    b = band(
        np.asarray(ref_steps, dtype=np.int64), np.asarray(ref_values, dtype=float), np.asarray(steps, dtype=np.int64)
    )
    run = np.interp(b.steps, np.asarray(steps), np.asarray(values, dtype=float)) if len(b.steps) else np.empty(0)
    run = _rolling_median(run, 3) if len(run) else run  # a single noisy point is not a drift
    side = np.where(run > b.high, 1, np.where(run < b.low, -1, 0))
    found: list[Drift] = []
    start = None
    for i in range(len(side) + 1):
        current = side[i] if i < len(side) else 0
        if start is not None and (current != side[start]):
            if i - start >= MIN_POINTS_OUTSIDE:
                gap = float(np.mean(run[start:i] - b.reference[start:i]))
                found.append(
                    Drift(
                        metric,
                        int(b.steps[start]),
                        int(b.steps[i - 1]),
                        gap,
                        "above" if side[start] > 0 else "below",
                        i - start,
                    )
                )
            start = None
        if start is None and current != 0:
            start = i
    return b, found
