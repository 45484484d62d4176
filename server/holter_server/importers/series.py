"""What every importer produces: per metric, its steps and values."""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


class ImportFormatError(ValueError):
    """The file cannot be read as training metrics; the message says why, in one line."""


@dataclass
class Series:
    """One metric's points: `steps` (int64) and `values` (float64, NaN/±Inf kept as data)."""

    metric: str
    steps: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.steps)


Point = tuple[str, int, float]


def collect(points: Iterable[Point]) -> dict[str, Series]:
    """Gather (metric, step, value) points into one `Series` per metric, in first-seen order.

    Points are appended to compact typed buffers, never held as Python objects per point.
    """
    steps: dict[str, array] = {}
    values: dict[str, array] = {}
    for metric, step, value in points:
        if metric not in steps:
            steps[metric], values[metric] = array("q"), array("d")
        steps[metric].append(step)
        values[metric].append(value)
    return {
        m: Series(m, np.frombuffer(steps[m], dtype=np.int64).copy(), np.frombuffer(values[m], dtype=np.float64).copy())
        for m in steps
    }


def parse_number(text: str) -> float | None:
    """A CSV cell as a float ('nan', 'inf', '-inf' included); None when empty or not a number."""
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_step(raw: object, where: str) -> int:
    """A step as an int; whole floats ('12.0') are accepted, anything else is a format error."""
    try:
        number = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ImportFormatError(f"{where}: step {raw!r} is not a number") from None
    if not np.isfinite(number) or number != int(number):
        raise ImportFormatError(f"{where}: step {raw!r} is not a whole number")
    return int(number)
