"""Too good: a loss far below what the task allows — almost always a leak or memorisation.

Judged against the caller's `expected_floor` when given (the smoothed level holds clearly under
it), otherwise from the curve's own scale:
* a cross-entropy that started near ln(vocab) (≥ `SCRATCH_MIN_START` nats, ln 20: trained from
  scratch) and now holds below `OWN_SCALE_CEILING` nats, more than ten times lower;
* one that started at ≥ 1 nat (a fine-tune) and now holds below `FINETUNE_CEILING` nats: a
  verifier or classifier fine-tune legitimately ends at a few hundredths, not at thousandths;
* a loss sitting at its last printed digits (within `PRINT_FLOOR_QUANTA` print quanta of zero:
  0.0002 in a log printed to 4 decimals) after starting far above them: memorised. Such a loss
  repeats the same printed value for many steps, which is not a frozen run.
A loss printed as exactly 0 from its first step says nothing here (a GRPO loss prints 0.0 by
design); the run-level rules read it together with the gradient norm (findings.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from holter_server.detect.events import Event, format_step, format_value
from holter_server.detect.runs import RunTracker
from holter_server.detect.window import Window
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.profiles import KindProfile
from holter_server.vocabulary.severities import Level

OWN_SCALE_CEILING = 0.1
SCRATCH_MIN_START = 3.0
FINETUNE_CEILING = 0.01
OWN_SCALE_MIN_START = 1.0
OWN_SCALE_FACTOR = 10.0
PRINT_FLOOR_QUANTA = 3
# ... and it started at least this many print quanta above zero
PRINT_FLOOR_MIN_START = 100
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
            ceiling = OWN_SCALE_CEILING if start >= SCRATCH_MIN_START else FINETUNE_CEILING
            below |= (level < ceiling) & (level < start / OWN_SCALE_FACTOR)
        if start is not None:
            q = window.quantum
            below |= (q > 0) & (np.abs(level) <= PRINT_FLOOR_QUANTA * q) & (start >= PRINT_FLOOR_MIN_START * q)
        below &= np.arange(first, first + len(level)) >= START_POINTS
        for update in self.runs.update(below, first, score=-level):
            if update.opened:
                event = Event(
                    kind=EventKind.TOO_GOOD,
                    metric=self.metric,
                    start_step=window.step_at(update.start),
                    end_step=0,
                    severity=Level.WARNING,
                    score=0.0,
                    summary="",
                )
                self.events.append(event)
            event = self.events[-1]
            event.end_step = window.step_at(update.end)
            if window.holds(update.peak_index):  # else the low is older than the tail and already recorded
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
                event.score = float(min((start or 0.0) / max(lowest, 1e-12), 1e6))
                ratio = f"{event.score:,.0f}x lower" if lowest > 0 else "to zero"
                event.summary = (
                    f"{self.metric} fell from {format_value(start or 0.0)} to {format_value(lowest)} "
                    f"({ratio}) by step {format_step(event.peak_step)} and has held there since step "
                    f"{format_step(event.start_step)}: a loss this low usually means a leak (mask, label shift, "
                    f"eval data in train) or a model that memorised its training set"
                )

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {
            "runs": self.runs.state(),
            "start_level": self.start_level,
            "events": [e.to_dict() for e in self.events],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.runs.restore(state["runs"])
        self.start_level = state["start_level"]
        self.events = [Event.from_dict(e) for e in state["events"]]
