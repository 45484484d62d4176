"""A metric's points as the dashboard holds them, and where they fall on the x axis.

The one place the dashboard decodes the API's values (`decode_values`: the JSON spellings of NaN
and ±Inf back into floats) and turns them into what Plotly draws (`gaps`: a gap where a value is
not finite); every chart and the run page's live appends go through these two.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

# how the API spells the values JSON has no number for (the server's wire codec; client/holter/wire.py writes the same)
NON_FINITE = {
    "NaN": math.nan,
    "Infinity": math.inf,
    "-Infinity": -math.inf,
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
}


@dataclass
class Series:
    """One metric's points as the API returns them, values as floats (NaN and ±Inf included)."""

    steps: list[int]
    values: list[float]
    times: list[float | None] = field(default_factory=list)
    downsampled: bool = False

    @classmethod
    def from_api(cls, payload: Mapping[str, Any]) -> Series:
        """Parse a points read: non-finite values arrive as the strings "NaN", "Infinity", "-Infinity"."""
        return cls(
            steps=[int(s) for s in payload.get("steps", [])],
            values=decode_values(payload.get("values", [])),
            times=list(payload.get("times") or []),
            downsampled=bool(payload.get("downsampled", False)),
        )

    def __len__(self) -> int:
        return len(self.steps)


def decode_values(values: Iterable[Any]) -> list[float]:
    """Floats from API values, turning the JSON spellings of NaN and ±Inf back into floats (null: NaN)."""
    out: list[float] = []
    for value in values:
        if isinstance(value, str):
            out.append(NON_FINITE.get(value, math.nan))
        elif value is None:
            out.append(math.nan)
        else:
            out.append(float(value))
    return out


def gaps(values: Sequence[float]) -> list[float | None]:
    """What Plotly draws: None (a gap) where a value is not finite."""
    return [v if math.isfinite(v) else None for v in values]


def spell(value: float) -> str:
    """A non-finite value as a person reads it: NaN, +Inf, -Inf."""
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def ema(
    values: Sequence[float], weight: float, state: tuple[float, float] | None = None
) -> tuple[list[float], tuple[float, float]]:
    """TensorBoard-style debiased exponential moving average with smoothing `weight` in [0, 1).

    Non-finite values are skipped (the smoothed line carries on through a NaN; the raw line
    shows the NaN). `state` continues a previous call, so live appends smooth seamlessly; the
    returned state is (accumulator, debias weight).
    """
    acc, norm = state if state else (0.0, 0.0)
    out: list[float] = []
    if weight <= 0:
        return [v if math.isfinite(v) else math.nan for v in values], (acc, norm)
    for value in values:
        if math.isfinite(value):
            acc = acc * weight + (1 - weight) * value
            norm = norm * weight + (1 - weight)
        out.append(acc / norm if norm > 0 else math.nan)
    return out, (acc, norm)


def value_at(series: Series, step: int) -> float | None:
    """The finite value of `series` at the point nearest `step`, or None."""
    if not series.steps:
        return None
    i = int(np.searchsorted(np.asarray(series.steps), step))
    candidates = [j for j in (i - 1, i, i + 1) if 0 <= j < len(series.steps)]
    j = min(candidates, key=lambda k: abs(series.steps[k] - step))
    value = series.values[j]
    return value if math.isfinite(value) else None


# ---------------------------------------------------------------------------------- view


@dataclass
class View:
    """What the user chose: smoothing, log scale, x axis, step range (None: everything)."""

    smoothing: float = 0.6
    log_y: bool = False
    x_axis: Literal["step", "time"] = "step"
    start: int | None = None
    end: int | None = None


def x_values(series: Series, view: View) -> list[Any]:
    """The x of each point: its step, or its wall time in ms (Plotly's date axis)."""
    if view.x_axis == "time":
        return [t * 1000 if t is not None else None for t in series.times] if series.times else list(series.steps)
    return list(series.steps)


def x_ends(series: Iterable[Series], view: View) -> list[float]:
    """The first and last x of each series that has points, where they are numbers."""
    ends = []
    for s in series:
        x = x_values(s, view)
        ends += [v for v in x[:1] + x[-1:] if isinstance(v, (int, float))]
    return ends


def wall_clock(series: Iterable[Series], most: int = 1000) -> list[list[float]]:
    """[step, wall time in ms] pairs of the first series that has wall times, at most `most` of
    them: what a zoom on a wall-time axis is turned back into steps with (assets/run_zoom.js)."""
    for s in series:
        pairs = [[step, t * 1000] for step, t in zip(s.steps, s.times) if t is not None]
        if pairs:
            every = max(1, math.ceil(len(pairs) / most))
            return pairs[::every] + ([pairs[-1]] if (len(pairs) - 1) % every else [])
    return []


def step_to_x(step: int | None, series: Iterable[Series], view: View) -> Any:
    """Where `step` falls on the x axis: the step itself, or its wall time (ms) interpolated."""
    if step is None or view.x_axis == "step":
        return step
    for s in series:
        pairs = [(st, t) for st, t in zip(s.steps, s.times) if t is not None]
        if pairs:
            xs, ts = zip(*pairs)
            return float(np.interp(step, xs, ts)) * 1000
    return step
