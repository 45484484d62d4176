"""What every importer produces: points (metric, step, value, wall time) and, gathered, per-metric series.

The points, their parsing and the format error come from `holter_readers`, the readers the
client's `holter follow` shares; this module adds what only the service needs (numpy series).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from holter_readers import STEP_NAMES, Point, parse_number, parse_step, parse_wall_time
from holter_readers import FormatError as ImportFormatError


@dataclass
class Series:
    """One metric's points: `steps` (int64) and `values` (float64, NaN/±Inf kept as data)."""

    metric: str
    steps: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.steps)


@dataclass
class Source:
    """A run logged elsewhere, opened for reading.

    `points` streams lazily; `config` holds the run's hyperparameters (it may grow while the
    points are read: a TensorBoard `add_hparams` summary sits in its own event file);
    `progress()` is the share read so far (0..1), or None when the reader cannot tell.
    """

    path: Path
    format: str
    points: Iterator[Point]
    config: dict[str, Any] = field(default_factory=dict)
    progress: Callable[[], float | None] = lambda: None
    name: str | None = None


def collect(points: Iterable[Point]) -> dict[str, Series]:
    """Gather points into one `Series` per metric, in first-seen order.

    Points are appended to compact typed buffers, never held as Python objects per point.
    """
    steps: dict[str, array] = {}
    values: dict[str, array] = {}
    for metric, step, value, _ in points:
        if metric not in steps:
            steps[metric], values[metric] = array("q"), array("d")
        steps[metric].append(step)
        values[metric].append(value)
    return {
        m: Series(m, np.frombuffer(steps[m], dtype=np.int64).copy(), np.frombuffer(values[m], dtype=np.float64).copy())
        for m in steps
    }


__all__ = [
    "STEP_NAMES",
    "ImportFormatError",
    "Point",
    "Series",
    "Source",
    "collect",
    "parse_number",
    "parse_step",
    "parse_wall_time",
]
