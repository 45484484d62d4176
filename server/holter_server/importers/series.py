"""What every importer produces: points (metric, step, value, wall time) and, gathered, per-metric series."""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

# Wall times above this are milliseconds since the epoch (MLflow, many CSV exports), not seconds:
# 1e11 seconds is the year 5138.
_MILLISECONDS_ABOVE = 1e11

# The step's column (CSV) or key (JSONL), in order of preference. W&B's `_step` counts log calls;
# beside it the Trainer's own `train/global_step` (transformers' WandbCallback logs it with every
# row) or Lightning's `trainer/global_step` is the training step, so those win.
STEP_NAMES = ("step", "global_step", "train/global_step", "trainer/global_step", "_step", "iteration", "iter", "steps")


class ImportFormatError(ValueError):
    """The file cannot be read as training metrics; the message says why, in one line."""


class Point(NamedTuple):
    """One logged value: the metric, its training step, the value, and when it was logged
    (seconds since the epoch, None when the source does not say)."""

    metric: str
    step: int
    value: float
    wall_time: float | None = None


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


def parse_wall_time(raw: object) -> float | None:
    """A logged time as seconds since the epoch: a number of seconds or milliseconds, or an ISO
    8601 date (UTC when it names no zone); None when it is neither."""
    if isinstance(raw, bool) or raw is None:
        return None
    if isinstance(raw, (int, float)):
        number = float(raw)
    else:
        text = str(raw).strip()
        try:
            number = float(text)
        except ValueError:
            try:
                moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                return None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            return moment.timestamp()
    if not math.isfinite(number) or number <= 0:
        return None
    return number / 1000.0 if number > _MILLISECONDS_ABOVE else number


class FileProgress:
    """How far a reader has got through its files, by bytes."""

    def __init__(self, paths: Iterable[Path]) -> None:
        self.total = sum(p.stat().st_size for p in paths) or 1
        self.done = 0  # bytes of the files finished
        self.current: Callable[[], int] = lambda: 0  # bytes read of the file being read

    def __call__(self) -> float:
        return min(1.0, (self.done + self.current()) / self.total)
