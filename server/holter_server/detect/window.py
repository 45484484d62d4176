"""The slice of a series the detectors see on each `add`: recent history plus the new points."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Window:
    """Finite points: a bounded tail of earlier points followed by the points just added.

    Positions index `steps`/`values`; `first_index` is the series-wide index (count of finite
    points before) of position 0, so `first_index + position` names a point for good.
    `level`, `base` and `scale` describe the new points only (index 0 = position `new_from`).
    """

    steps: np.ndarray
    values: np.ndarray
    new_from: int
    first_index: int
    level: np.ndarray
    base: np.ndarray
    scale: np.ndarray
    early: np.ndarray

    @property
    def end_index(self) -> int:
        """Series-wide index one past the last point."""
        return self.first_index + len(self.values)

    def position(self, index: int) -> int:
        """Position in this window of the point with series-wide `index`."""
        return index - self.first_index

    def step_at(self, index: int) -> int:
        """Step of the point with series-wide `index`."""
        return int(self.steps[index - self.first_index])

    def value_at(self, index: int) -> float:
        """Value of the point with series-wide `index`."""
        return float(self.values[index - self.first_index])
