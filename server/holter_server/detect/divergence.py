"""Divergence: the metric becomes NaN/±Inf, or climbs far above its best and stays there.

Two detectors:
* `NonFiniteDetector` — a streak of NaN/±Inf values; says which and the first bad step.
* `RiseDetector` — the smoothed level holds at `rise_factor` x its running minimum (and far
  outside the noise, and for losses a share `rise_min_range` of the way back up to where the
  curve came down from) for `rise_persist` points: a loss that shot up and never came back, an
  eval loss turning up (overfitting), a gradient norm growing toward inf.

Severity follows recovery: critical while the metric is still non-finite or still up; once it
came back (finite values returned, the level fell back below the threshold) the event is a
recovered excursion, a warning. An eval loss turning up is a warning either way.

Norms (profiles with `rise_warmup_factor`) legitimately grow from their initialisation: the RMS
of a layer's activations rises several-fold in the first steps, then stays bounded. For them the
running minimum starts only once the level has settled — it grew by less than `SETTLE_GROWTH`
over the last `SETTLE_SPAN` points, at least `SETTLE_MIN_POINTS` in (or `SETTLE_MAX_POINTS` in
at the latest) — and before that only a rise of `rise_warmup_factor` x the minimum since init
counts (a blow-up during warm-up).
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

NONFINITE_MERGE_GAP = 16
# The rise must also clear this many robust σ, so that a level near zero cannot "double".
RISE_NOISE_UNITS = 4.0
# The first points of a series are all start-up; the running minimum starts after them.
RISE_SKIP_POINTS = 2
SETTLE_SPAN = 8
SETTLE_GROWTH = 1.1
SETTLE_MIN_POINTS = 16
SETTLE_MAX_POINTS = 100


class NonFiniteDetector:
    """NaN/±Inf streaks over every accepted point, finite or not."""

    def __init__(self, metric: str) -> None:
        self.metric = metric
        self.runs = RunTracker(min_len=1, merge_gap=NONFINITE_MERGE_GAP)
        self.seen = 0
        self.counted_to = 0
        self.last_finite: float | None = None
        self.counts = {"NaN": 0, "+Inf": 0, "-Inf": 0}
        self.first_kind = ""
        self.events: list[Event] = []

    def process(self, steps: np.ndarray, values: np.ndarray) -> None:
        """Feed accepted points in step order."""
        bad = ~np.isfinite(values)
        first = self.seen
        for update in self.runs.update(bad, first):
            if update.end < first:  # the streak ended with the last batch
                event = self.events[-1]
                event.details["ongoing"] = False
                event.severity = _nonfinite_severity(event)
                event.summary = self._summary(event)
                continue
            lo = max(update.start, first, self.counted_to) - first
            chunk = values[lo : update.end - first + 1]
            chunk = chunk[~np.isfinite(chunk)]
            self.counted_to = update.end + 1
            if update.opened:
                self.counts = {"NaN": 0, "+Inf": 0, "-Inf": 0}
                self.first_kind = _nonfinite_name(float(chunk[0]))
                before = values[:lo][np.isfinite(values[:lo])]
                previous = float(before[-1]) if len(before) else self.last_finite
                event = Event(
                    kind=EventKind.DIVERGENCE,
                    metric=self.metric,
                    start_step=int(steps[lo]),
                    end_step=int(steps[lo]),
                    severity=Level.CRITICAL,
                    score=0.0,
                    summary="",
                    peak_step=int(steps[lo]),
                    details={"cause": "nonfinite", "first_value": self.first_kind, "previous_finite": previous},
                )
                self.events.append(event)
            event = self.events[-1]
            self._count(chunk)
            event.end_step = int(steps[update.end - first])
            event.details["counts"] = dict(self.counts)
            event.score = float(sum(self.counts.values()))
            event.details["ongoing"] = update.ongoing
            event.severity = _nonfinite_severity(event)
            event.summary = self._summary(event)
        finite = values[~bad]
        if len(finite):
            self.last_finite = float(finite[-1])
        self.seen += len(values)

    def _count(self, chunk: np.ndarray) -> None:
        self.counts["NaN"] += int(np.isnan(chunk).sum())
        self.counts["+Inf"] += int(np.isposinf(chunk).sum())
        self.counts["-Inf"] += int(np.isneginf(chunk).sum())

    def _summary(self, event: Event) -> str:
        total = sum(self.counts.values())
        kinds = ", ".join(f"{n} {k}" for k, n in self.counts.items() if n)
        after = event.details.get("previous_finite")
        after_text = f" (last finite value {format_value(after)})" if after is not None else ""
        tail = "and is still non-finite" if event.details.get("ongoing") else "before finite values returned"
        return (
            f"{self.metric} became {self.first_kind} at step {format_step(event.start_step)}{after_text}; "
            f"{total} non-finite point{'s' if total != 1 else ''} ({kinds}) up to step "
            f"{format_step(event.end_step)} {tail}"
        )

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {
            "runs": self.runs.state(),
            "seen": self.seen,
            "counted_to": self.counted_to,
            "last_finite": self.last_finite,
            "counts": self.counts,
            "first_kind": self.first_kind,
            "events": [e.to_dict() for e in self.events],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.runs.restore(state["runs"])
        self.seen = state["seen"]
        self.counted_to = state["counted_to"]
        self.last_finite = state["last_finite"]
        self.counts = dict(state["counts"])
        self.first_kind = state["first_kind"]
        self.events = [Event.from_dict(e) for e in state["events"]]


def _nonfinite_severity(event: Event) -> str:
    """Critical while the metric is still non-finite; a streak that finite values ended (a
    skipped fp16 overflow step, a restart from a checkpoint) is a recovered excursion: a warning."""
    return Level.CRITICAL if event.details.get("ongoing") else Level.WARNING


def _nonfinite_name(value: float) -> str:
    if np.isnan(value):
        return "NaN"
    return "+Inf" if value > 0 else "-Inf"


class RiseDetector:
    """The smoothed level holds far above its running minimum: divergence in slow or fast motion."""

    def __init__(self, metric: str, profile: KindProfile) -> None:
        self.metric = metric
        self.profile = profile
        self.enabled = profile.rise_factor is not None and profile.direction > 0
        self.settles = profile.rise_warmup_factor is not None
        self.runs = RunTracker(min_len=profile.rise_persist, merge_gap=profile.rise_persist)
        self.best = np.inf
        self.best_step = 0
        # the highest level seen, and what it was when the running minimum was last set
        self.top = -np.inf
        self.top_at_best = -np.inf
        # norms only: where the level settled (series index), the running minimum since then,
        # and the last `SETTLE_SPAN` levels to judge settling on
        self.settled_at: int | None = None
        self.settled_best = np.inf
        self.settled_best_step = 0
        self.recent_levels: list[float] = []
        self.run_reference: tuple[float, int] | None = None
        self.events: list[Event] = []

    def process(self, window: Window) -> None:
        """Feed the new points of `window`."""
        if not self.enabled:
            return
        level = window.level
        first = window.first_index + window.new_from
        index = np.arange(first, first + len(level))
        new_steps = window.steps[window.new_from :]
        eligible = np.where(index >= RISE_SKIP_POINTS, level, np.inf)
        running, best_step = _running_min(eligible, self.best, self.best_step, new_steps)
        factor: float | np.ndarray = self.profile.rise_factor or 0.0
        if self.settles:
            settled = self._settled(level, index)
            eligible = np.where(settled, level, np.inf)
            settled_running, settled_step = _running_min(eligible, self.settled_best, self.settled_best_step, new_steps)
            # before the level settles, a rise counts against the minimum since init, by a wider margin
            warm = ~settled
            factor = np.where(warm, self.profile.rise_warmup_factor or 0.0, factor)
            reference = np.where(warm, running, settled_running)
            reference_step = np.where(warm, best_step, settled_step)
        else:
            reference, reference_step = running, best_step
        with np.errstate(invalid="ignore"):
            needed = np.maximum((factor - 1.0) * np.abs(reference), RISE_NOISE_UNITS * window.scale)
            if self.profile.rise_min_range:
                needed = np.maximum(
                    needed, self.profile.rise_min_range * (self._top_at_best(level, index, running) - reference)
                )
            # a minimum at or below zero (an RL loss swinging around 0) has no factor to rise by
            above = np.isfinite(reference) & (reference > 0) & (level - reference >= needed)
        for update in self.runs.update(above, first, score=level):
            if update.end < first:  # the rise ended with the last batch
                event = self.events[-1]
                event.details["ongoing"] = False
                event.severity = self._severity(event)
                event.summary = self._summary(event, float(event.details.get("last_value", np.nan)))
                continue
            if update.opened:
                at = update.start - first
                minimum, minimum_step = (
                    (float(reference[at]), int(reference_step[at])) if at >= 0 else self.run_reference or (np.inf, 0)
                )
                event = Event(
                    kind=EventKind.DIVERGENCE,
                    metric=self.metric,
                    start_step=minimum_step,
                    end_step=0,
                    severity=Level.WARNING if self.profile.name == "eval_loss" else Level.CRITICAL,
                    score=0.0,
                    summary="",
                    details={
                        "cause": "rise",
                        "minimum": minimum,
                        "minimum_step": minimum_step,
                        "detected_step": window.step_at(update.start),
                    },
                )
                self.events.append(event)
            event = self.events[-1]
            event.end_step = window.step_at(update.end)
            if window.holds(update.peak_index):  # else the peak is older than the tail and already recorded
                event.peak_step = window.step_at(update.peak_index)
            peak = update.peak_score
            minimum = event.details["minimum"]
            event.score = float(peak / minimum) if minimum > 0 else float(peak - minimum)
            event.details["peak"] = peak
            event.details["ongoing"] = update.ongoing
            event.details["last_value"] = window.value_at(update.end)
            event.severity = self._severity(event)
            event.summary = self._summary(event, window.value_at(update.end))
        if len(level):
            # the reference where the current run of "above" began, for a run that opens later
            if not above[-1]:
                self.run_reference = None
            else:
                below = np.flatnonzero(~above)
                begin = int(below[-1]) + 1 if len(below) else 0
                if begin > 0 or self.run_reference is None:
                    self.run_reference = (float(reference[begin]), int(reference_step[begin]))
            self.best = float(running[-1])
            self.best_step = int(best_step[-1])
            if self.settles:
                self.settled_best = float(settled_running[-1])
                self.settled_best_step = int(settled_step[-1])
                self.recent_levels = [float(v) for v in np.concatenate([self.recent_levels, level])[-SETTLE_SPAN:]]

    def _top_at_best(self, level: np.ndarray, index: np.ndarray, running: np.ndarray) -> np.ndarray:
        """Per new point: the highest level seen up to where its running minimum was set."""
        eligible = np.where(index >= RISE_SKIP_POINTS, level, -np.inf)
        top = np.maximum.accumulate(np.concatenate([[self.top], eligible]))[1:]
        new_best = running < np.concatenate([[self.best], running[:-1]])
        at = np.maximum.accumulate(np.where(new_best, np.arange(len(level)), -1))
        out = np.where(at >= 0, top[np.maximum(at, 0)], self.top_at_best)
        if len(level):
            self.top, self.top_at_best = float(top[-1]), float(out[-1])
        return out

    def _severity(self, event: Event) -> str:
        """An eval loss turning up is a warning; a rise that came back down is a recovered
        excursion, never critical."""
        if self.profile.name == "eval_loss" or not event.details.get("ongoing"):
            return Level.WARNING
        return Level.CRITICAL

    def _settled(self, level: np.ndarray, index: np.ndarray) -> np.ndarray:
        """Per new point: has the level settled by then (and so the minimum since settling counts)?"""
        if self.settled_at is None:
            history = np.concatenate([np.asarray(self.recent_levels, dtype=float), level])
            offset = len(self.recent_levels)
            pos = np.arange(len(level)) + offset - SETTLE_SPAN
            earlier = np.where(pos >= 0, history[np.maximum(pos, 0)], np.nan)
            with np.errstate(invalid="ignore"):
                calm = (index >= SETTLE_MIN_POINTS) & (np.abs(level) <= SETTLE_GROWTH * np.abs(earlier))
            calm |= index >= SETTLE_MAX_POINTS
            hits = np.flatnonzero(calm)
            if len(hits):
                self.settled_at = int(index[hits[0]])
        if self.settled_at is None:
            return np.zeros(len(level), dtype=bool)
        return index >= self.settled_at

    def _summary(self, event: Event, last_value: float) -> str:
        d = event.details
        what = "eval loss turned up" if self.profile.name == "eval_loss" else f"{self.metric} rose"
        ratio = f" ({d['peak'] / d['minimum']:.1f}x)" if d["minimum"] > 0 else ""
        tail = (
            f"and has not come back (last {format_value(last_value)} at step {format_step(event.end_step)})"
            if d.get("ongoing")
            else f"and came back below after step {format_step(event.end_step)}"
        )
        return (
            f"{what} from its minimum {format_value(d['minimum'])} at step {format_step(d['minimum_step'])} "
            f"to {format_value(d['peak'])}{ratio} by step {format_step(event.peak_step or event.end_step)} {tail}"
        )

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {
            "runs": self.runs.state(),
            "best": None if self.best == np.inf else self.best,
            "best_step": self.best_step,
            "top": None if self.top == -np.inf else self.top,
            "top_at_best": None if self.top_at_best == -np.inf else self.top_at_best,
            "settled_at": self.settled_at,
            "settled_best": None if self.settled_best == np.inf else self.settled_best,
            "settled_best_step": self.settled_best_step,
            "recent_levels": self.recent_levels,
            "run_reference": list(self.run_reference) if self.run_reference else None,
            "events": [e.to_dict() for e in self.events],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.runs.restore(state["runs"])
        self.best = np.inf if state["best"] is None else state["best"]
        self.best_step = state["best_step"]
        self.top = -np.inf if state["top"] is None else state["top"]
        self.top_at_best = -np.inf if state["top_at_best"] is None else state["top_at_best"]
        self.settled_at = state.get("settled_at")
        self.settled_best = np.inf if state.get("settled_best") is None else state["settled_best"]
        self.settled_best_step = state.get("settled_best_step", 0)
        self.recent_levels = list(state.get("recent_levels", []))
        reference = state.get("run_reference")
        self.run_reference = (float(reference[0]), int(reference[1])) if reference else None
        self.events = [Event.from_dict(e) for e in state["events"]]


def _running_min(eligible: np.ndarray, best: float, best_step: int, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Running minimum over `eligible` (inf = not eligible) continuing from `best`, and its step."""
    running = np.minimum.accumulate(np.concatenate([[best], eligible]))
    is_new_best = np.concatenate([[False], running[1:] < running[:-1]])
    best_pos = np.maximum.accumulate(np.where(is_new_best, np.arange(len(running)), 0))
    at_step = np.where(best_pos > 0, steps[np.maximum(best_pos - 1, 0)], best_step)[1:]
    return running[1:], at_step
