"""Plateau: the metric stops moving while it should still move.

* a gradient (or activation) norm of exactly zero for `ZERO_MIN_POINTS` points: no learning
  signal reaches the weights;
* a value repeated exactly for `frozen_min_points` points: a frozen metric or a dead run. Not
  exact zeros (a gradient norm's zeros are the first case; a loss printed as 0.0 is read with the
  rest of the run, see findings.py) and not a value at the last printed digit (a loss logged to
  4 decimals sitting at 0.0002 is too good, see too_good.py, not frozen);
* a loss that is still at its starting level after `FLAT_START_POINTS` points, or after
  `FLAT_START_MIN_POINTS` points that span `FLAT_START_STEPS` steps (sparse logging): nothing
  learns from step zero (healthy runs always show the steep early drop).
A loss that flattens after falling (convergence at the end of a schedule) is not a plateau.
Zeros and a flat start are critical while they last; once the metric moves again they are a
recovered excursion, a warning.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from holter_server.detect.events import Event, format_step, format_value
from holter_server.detect.runs import RunTracker, RunUpdate
from holter_server.detect.window import Window
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.profiles import KindProfile
from holter_server.vocabulary.severities import Level

ZERO_MIN_POINTS = 3
FLAT_START_POINTS = 100
FLAT_START_MIN_POINTS = 10
FLAT_START_STEPS = 1000
# a repeated value this many print quanta from zero sits at the last printed digit
PRINT_FLOOR_QUANTA = 3
FLAT_START_BAND = 0.02
START_POINTS = 3


class PlateauDetector:
    """Exact zeros, frozen values, and a flat line from the first step."""

    def __init__(self, metric: str, profile: KindProfile) -> None:
        self.metric = metric
        self.profile = profile
        self.zero = RunTracker(min_len=ZERO_MIN_POINTS, merge_gap=ZERO_MIN_POINTS)
        self.frozen = RunTracker(min_len=max(1, (profile.frozen_min_points or 1) - 1))
        self.flat = RunTracker(min_len=1)
        self.first_step: int | None = None
        self.start_level: float | None = None
        self.flat_unbroken = True
        self.events: dict[str, list[Event]] = {"zero": [], "frozen": [], "flat": []}

    def process(self, window: Window) -> None:
        """Feed the new points of `window`."""
        p = self.profile
        x = window.values[window.new_from :]
        first = window.first_index + window.new_from
        if p.zero_is_plateau:
            for update in self.zero.update(x == 0.0, first):
                self._report("zero", update, update.start, window)
        if p.frozen_min_points is not None and window.new_from + len(x) > 1:
            previous = window.values[max(window.new_from - 1, 0) : len(window.values) - 1]
            same = np.zeros(len(x), dtype=bool)
            same[len(x) - len(previous) :] = x[len(x) - len(previous) :] == previous
            same &= (x != 0.0) & (np.abs(x) > PRINT_FLOOR_QUANTA * window.quantum)
            for update in self.frozen.update(same, first):
                self._report("frozen", update, update.start - 1, window)
        if p.flat_from_start:
            self._flat_from_start(window, first)

    def _flat_from_start(self, window: Window, first: int) -> None:
        if self.first_step is None and window.first_index == 0:
            self.first_step = int(window.steps[0])
        if self.start_level is None and window.end_index >= START_POINTS and window.first_index == 0:
            self.start_level = float(np.median(window.values[:START_POINTS]))
        if not self.flat_unbroken:
            return
        index = np.arange(first, first + len(window.level))
        if self.start_level is None:
            near = np.ones(len(index), dtype=bool)
        else:
            near = (np.abs(window.level - self.start_level) <= FLAT_START_BAND * abs(self.start_level)) | (
                index < START_POINTS
            )
        near = np.logical_and.accumulate(near)
        self.flat_unbroken = bool(near[-1]) if len(near) else True
        points = index + 1
        span = window.steps[window.new_from :] - (self.first_step or 0)
        long_enough = (points >= FLAT_START_POINTS) | ((points >= FLAT_START_MIN_POINTS) & (span >= FLAT_START_STEPS))
        for update in self.flat.update(near & long_enough, first):
            self._report("flat", update, 0, window)

    def _report(self, cause: str, update: RunUpdate, start: int, window: Window) -> None:
        events = self.events[cause]
        end, ongoing = update.end, update.ongoing
        if update.opened:
            start_step = self.first_step if cause == "flat" else window.step_at(start)
            events.append(
                Event(
                    kind=EventKind.PLATEAU,
                    metric=self.metric,
                    start_step=int(start_step or 0),
                    end_step=0,
                    severity=Level.WARNING,
                    score=0.0,
                    summary="",
                    details={"cause": cause, "start_index": start},
                )
            )
        event = events[-1]
        event.severity = Level.CRITICAL if cause != "frozen" and ongoing else Level.WARNING
        event.end_step = window.step_at(end)
        points = end - event.details["start_index"] + 1
        event.score = float(points)
        event.details["points"] = points
        value = window.value_at(end)
        span = f"from step {format_step(event.start_step)} to step {format_step(event.end_step)} ({points} points)"
        still = " and still is" if ongoing else ""
        if cause == "zero":
            event.summary = f"{self.metric} was exactly 0 {span}{still}: no learning signal reaches the weights"
        elif cause == "frozen":
            event.summary = (
                f"{self.metric} repeated exactly {format_value(value)} {span}{still}: the metric or the run is frozen"
            )
        elif ongoing:
            event.summary = (
                f"{self.metric} stayed within {FLAT_START_BAND:.0%} of its starting level "
                f"{format_value(self.start_level or value)} {span}{still}: nothing is learning from step zero"
            )
        else:
            event.summary = (
                f"{self.metric} stayed within {FLAT_START_BAND:.0%} of its starting level "
                f"{format_value(self.start_level or value)} {span} before it began to fall: "
                f"nothing learned for the first {format_step(event.end_step - event.start_step)} steps"
            )

    def all_events(self) -> list[Event]:
        """Every plateau event, in the order found."""
        return [e for events in self.events.values() for e in events]

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {
            "zero": self.zero.state(),
            "frozen": self.frozen.state(),
            "flat": self.flat.state(),
            "first_step": self.first_step,
            "start_level": self.start_level,
            "flat_unbroken": self.flat_unbroken,
            "events": {k: [e.to_dict() for e in v] for k, v in self.events.items()},
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.zero.restore(state["zero"])
        self.frozen.restore(state["frozen"])
        self.flat.restore(state["flat"])
        self.first_step = state["first_step"]
        self.start_level = state["start_level"]
        self.flat_unbroken = state["flat_unbroken"]
        self.events = {k: [Event.from_dict(e) for e in v] for k, v in state["events"].items()}
