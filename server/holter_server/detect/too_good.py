"""Too good: a loss far below what the task allows — almost always a leak.

Judged against the caller's `expected_floor` when given (the smoothed level holds clearly under
it), otherwise from the curve's own scale: a cross-entropy that started at ≥ 1 nat (an LM starts
near ln(vocab)) and now holds below `OWN_SCALE_CEILING` nats, more than ten times lower.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from holter_server.detect.events import Event, format_step, format_value
from holter_server.detect.kinds import KindProfile
from holter_server.detect.runs import RunTracker
from holter_server.detect.window import Window

OWN_SCALE_CEILING = 0.1
OWN_SCALE_MIN_START = 1.0
OWN_SCALE_FACTOR = 10.0
FLOOR_MARGIN = 0.1
FLOOR_NOISE_UNITS = 3.0
PERSIST = 3
START_POINTS = 3


class TooGoodDetector:
    """A loss holding far below its floor."""

    def __init__(self, metric: str, profile: KindProfile, expected_floor: float | None) -> None:
        self.metric = metric
        self.enabled = profile.too_good
        self.expected_floor = expected_floor
        self.runs = RunTracker(min_len=PERSIST, merge_gap=4 * PERSIST)
        self.start_level: float | None = None
        self.events: list[Event] = []

    def process(self, window: Window) -> None:
        """Feed the new points of `window`."""
        if not self.enabled:
            return
        if self.start_level is None and window.end_index >= START_POINTS and window.first_index == 0:
            # the highest of the first points: a loss curve starts at its top
            self.start_level = float(np.max(window.values[:START_POINTS]))
        level = window.level
        first = window.first_index + window.new_from
        below = np.zeros(len(level), dtype=bool)
        if self.expected_floor is not None:
            floor = self.expected_floor
            with np.errstate(invalid="ignore"):
                margin = np.maximum(FLOOR_MARGIN * abs(floor), FLOOR_NOISE_UNITS * np.nan_to_num(window.scale))
            below |= level < floor - margin
        start = self.start_level
        if start is not None and start >= OWN_SCALE_MIN_START:
            below |= (level < OWN_SCALE_CEILING) & (level < start / OWN_SCALE_FACTOR)
        below &= np.arange(first, first + len(level)) >= START_POINTS
        for update in self.runs.update(below, first, score=-level):
            if update.opened:
                event = Event(kind="too_good", metric=self.metric, start_step=window.step_at(update.start),
                              end_step=0, severity="warning", score=0.0, summary="")
                self.events.append(event)
            event = self.events[-1]
            event.end_step = window.step_at(update.end)
            event.peak_step = window.step_at(update.peak_index)
            lowest = -update.peak_score
            event.details = {"lowest": lowest, "start_level": start, "expected_floor": self.expected_floor}
            if self.expected_floor is not None and lowest < self.expected_floor:
                event.score = float(self.expected_floor / max(lowest, 1e-12))
                event.summary = (
                    f"{self.metric} fell to {format_value(lowest)} at step {format_step(event.peak_step)}, below the "
                    f"expected floor {format_value(self.expected_floor)} from step {format_step(event.start_step)}: "
                    f"a loss this low usually means a leak (mask, label shift, eval data in train)"
                )
            else:
                event.score = float((start or 0.0) / max(lowest, 1e-12))
                event.summary = (
                    f"{self.metric} fell from {format_value(start or 0.0)} to {format_value(lowest)} "
                    f"({event.score:.0f}x lower) by step {format_step(event.peak_step)}, under "
                    f"{OWN_SCALE_CEILING} nats from step {format_step(event.start_step)}: "
                    f"a loss this low usually means a leak (mask, label shift, eval data in train)"
                )

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {"runs": self.runs.state(), "start_level": self.start_level, "events": [e.to_dict() for e in self.events]}

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.runs.restore(state["runs"])
        self.start_level = state["start_level"]
        self.events = [Event.from_dict(e) for e in state["events"]]
