"""The slice of a series the detectors see on each `add`: recent history plus the new points."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Window:
    """Finite points: a bounded tail of earlier points followed by the points just added.

    Positions index `steps`/`values`; `first_index` is the series-wide index (count of finite
    points before) of position 0, so `first_index + position` names a point for good.
    `level`, `base`, `scale` and `quantum` (the print quantum of the points before: 0.01 for a
    log printed to 2 decimals, 0 when unknown) describe the new points only (index 0 = position
    `new_from`).
    """

    steps: np.ndarray
    values: np.ndarray
    new_from: int
    first_index: int
    level: np.ndarray
    base: np.ndarray
    scale: np.ndarray
    early: np.ndarray
    quantum: np.ndarray
    # kinds that should sit at ≈0: the healthy ceiling of each new point (see ceiling.py)
    ceiling: np.ndarray | None = None

    @property
    def end_index(self) -> int:
        """Series-wide index one past the last point."""
        return self.first_index + len(self.values)

    def position(self, index: int) -> int:
        """Position in this window of the point with series-wide `index`."""
        return index - self.first_index

    def holds(self, index: int) -> bool:
        """Whether the point with series-wide `index` is still in this window (a long event's
        peak or start may have scrolled out of the bounded tail)."""
        return self.first_index <= index < self.end_index

    def step_at(self, index: int) -> int:
        """Step of the point with series-wide `index`, which must be in the window: a negative
        position would silently read a point from the other end."""
        if not self.holds(index):
            raise IndexError(f"point {index} is outside the window [{self.first_index}, {self.end_index})")
        return int(self.steps[index - self.first_index])

    def value_at(self, index: int) -> float:
        """Value of the point with series-wide `index`."""
        return float(self.values[index - self.first_index])
