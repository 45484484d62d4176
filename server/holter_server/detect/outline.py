"""A series in outline: what the run-level rules need to read several series of a run together.

A bounded sample of the finite points (every `stride`-th one by series index; the stride doubles
whenever more than `OUTLINE_POINTS` would be kept), which is all of an eval loss logged 5-20
times and a few hundred points of a train loss, plus the trailing run of exactly repeated
values (a loss printing 0.0 at every step). It depends only on the points, never on how they
were batched, and it is small enough to live in the detector state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

OUTLINE_POINTS = 256


@dataclass(frozen=True)
class SeriesOutline:
    """A read-only copy of an outline, for the run-level rules."""

    metric: str
    kind: str
    steps: np.ndarray
    values: np.ndarray
    points: int
    repeated_value: float | None
    repeated_since: int | None
    repeated_points: int
    repeated_from_start: bool


class Outline:
    """Sample of a series' finite points and its trailing run of exactly repeated values."""

    def __init__(self) -> None:
        self.stride = 1
        self.steps: list[int] = []
        self.values: list[float] = []
        self.points = 0
        self.repeated_value: float | None = None
        self.repeated_since: int | None = None
        self.repeated_points = 0

    def add(self, steps: np.ndarray, values: np.ndarray) -> None:
        """Feed the new finite points, in step order."""
        n = len(values)
        if not n:
            return
        # the stride doubles until the samples fit; samples sit at indices k * stride, so the
        # ones already kept that stay are every (new / old)-th
        stride = self.stride
        while -(-(self.points + n) // stride) > OUTLINE_POINTS:
            stride *= 2
        if stride != self.stride:
            every = stride // self.stride
            self.steps, self.values, self.stride = self.steps[::every], self.values[::every], stride
        first = -self.points % stride
        self.steps += steps[first::stride].tolist()
        self.values += values[first::stride].tolist()
        before = np.nan if self.repeated_value is None else self.repeated_value
        changes = np.flatnonzero(values != np.concatenate([[before], values[:-1]]))
        if len(changes):
            start = int(changes[-1])
            self.repeated_value = float(values[start])
            self.repeated_since = int(steps[start])
            self.repeated_points = n - start
        else:
            self.repeated_points += n
        self.points += n

    def snapshot(self, metric: str, kind: str) -> SeriesOutline:
        """A copy to hand to the run-level rules."""
        return SeriesOutline(
            metric=metric,
            kind=kind,
            steps=np.asarray(self.steps, dtype=np.int64),
            values=np.asarray(self.values, dtype=float),
            points=self.points,
            repeated_value=self.repeated_value,
            repeated_since=self.repeated_since,
            repeated_points=self.repeated_points,
            repeated_from_start=self.points > 0 and self.repeated_points == self.points,
        )

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {
            "stride": self.stride,
            "steps": self.steps,
            "values": self.values,
            "points": self.points,
            "repeated_value": self.repeated_value,
            "repeated_since": self.repeated_since,
            "repeated_points": self.repeated_points,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.stride = int(state["stride"])
        self.steps = [int(s) for s in state["steps"]]
        self.values = [float(v) for v in state["values"]]
        self.points = int(state["points"])
        self.repeated_value = state["repeated_value"]
        self.repeated_since = state["repeated_since"]
        self.repeated_points = int(state["repeated_points"])

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Outline:
        """An outline rebuilt from `state()` (the service reads it from a stored detector state)."""
        outline = cls()
        outline.restore(state)
        return outline
