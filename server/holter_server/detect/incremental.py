"""`IncrementalDetector`: the classifier fed point by point (or batch by batch) as a run logs.

Every detector works from causal, index-based statistics over a bounded tail of recent points,
so feeding a series in one piece or in any batches gives the same events (a test proves it on
the whole corpus). The batch entry point, `classify_series`, is this detector fed once.

Cost per point is O(1) amortised plus the per-call overhead of a few vectorised passes; the
state is bounded (the last `TAIL_POINTS` points plus a few counters) and JSON-serialisable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from holter_server.detect.baseline import BlockBaseline, rolling_level
from holter_server.detect.ceiling import HealthyCeiling
from holter_server.detect.divergence import NonFiniteDetector, RiseDetector
from holter_server.detect.drift import DriftDetector
from holter_server.detect.events import Event, format_step, format_value
from holter_server.detect.findings import SeriesSnapshot
from holter_server.detect.level_shift import LevelShiftDetector
from holter_server.detect.outline import Outline, SeriesOutline
from holter_server.detect.plateau import PlateauDetector
from holter_server.detect.rl_health import PolicyHealth
from holter_server.detect.sawtooth import ACF_WINDOW, SawtoothDetector, without_its_teeth
from holter_server.detect.spikes import MAX_SPIKE_STEPS, SpikeDetector
from holter_server.detect.too_good import TooGoodDetector
from holter_server.detect.window import Window
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.profiles import profile_for
from holter_server.vocabulary.severities import Level, capped

DETECTOR_VERSION = "2.3.0"
TAIL_POINTS = ACF_WINDOW
STATE_FORMAT = 2


@dataclass
class Update:
    """What one `add` changed: events new or updated (by `event_id`), and ids withdrawn.

    An event is withdrawn when later evidence explains it better, e.g. spikes that turn out to
    be members of a periodic train are folded into one sawtooth event.
    """

    changed: list[Event]
    withdrawn: list[str]


def diff_visible(visible: dict[str, dict[str, Any]], events: list[Event]) -> tuple[Update, dict[str, dict[str, Any]]]:
    """The update from `visible` (each event as last reported, by id) to `events`, and what is
    visible after it. Every detector that reports events one `add` at a time reports them so."""
    current = {e.event_id: e for e in events}
    changed = [e for key, e in current.items() if visible.get(key) != e.to_dict()]
    withdrawn = [key for key in visible if key not in current]
    return Update(changed=changed, withdrawn=withdrawn), {key: e.to_dict() for key, e in current.items()}


class IncrementalDetector:
    """Detect spike, divergence, plateau, sawtooth, too_good and level_shift on one series, and
    on an RL policy's KL, entropy, clip fraction or reward its own failure (rl_health.py).

    `kind` (default: what the vocabulary understands `metric` to be) picks the profile: its
    thresholds, which detectors run, and the loudest severity its events may have.
    """

    def __init__(self, metric: str, *, kind: str | None = None, expected_floor: float | None = None) -> None:
        self.metric = metric
        self.profile = profile_for(metric, kind)
        self.kind = self.profile.name
        self.detectors = frozenset(self.profile.detectors)
        self.expected_floor = expected_floor
        self.last_step: int | None = None
        self.late_points = 0
        self.finite_seen = 0
        self.tail_steps = np.empty(0, dtype=np.int64)
        self.tail_values = np.empty(0, dtype=float)
        self.baseline = BlockBaseline(self.profile.abs_floor)
        tolerance = self.profile.abs_tolerance
        self.ceiling = HealthyCeiling(tolerance, self.profile.healthy_level) if tolerance is not None else None
        self.nonfinite = NonFiniteDetector(metric)
        self.rise = RiseDetector(metric, self.profile)
        self.drift = DriftDetector(metric, self.profile)
        self.spikes = SpikeDetector(metric, self.profile)
        self.sawtooth = SawtoothDetector(metric, self.profile)
        self.shifts = LevelShiftDetector(metric, self.profile)
        self.plateau = PlateauDetector(metric, self.profile)
        self.too_good = TooGoodDetector(metric, self.profile, expected_floor)
        # an RL policy's KL, entropy, clip fraction or reward: the rules its profile lists
        self.health = PolicyHealth(metric, self.profile)
        self.outline = Outline()
        self._visible: dict[str, dict[str, Any]] = {}

    def add(self, steps: Any, values: Any) -> Update:
        """Feed points; return the events this batch opened, changed or withdrew.

        Points may come in any batch size and out of order within a batch. A step already seen
        (or older than the newest step seen) is ignored and counted in `late_points`; within a
        batch the first value given for a step wins.
        """
        steps_arr = np.asarray(steps, dtype=np.int64).reshape(-1)
        values_arr = np.asarray(values, dtype=float).reshape(-1)
        if steps_arr.shape != values_arr.shape:
            raise ValueError("steps and values must have the same length")
        in_order = (
            len(steps_arr)
            and (self.last_step is None or steps_arr[0] > self.last_step)
            and (len(steps_arr) == 1 or bool((steps_arr[1:] > steps_arr[:-1]).all()))
        )
        if not in_order:
            # (the usual batch, new steps in increasing order, keeps every point as it came)
            order = np.argsort(steps_arr, kind="stable")
            steps_arr, values_arr = steps_arr[order], values_arr[order]
            keep = np.ones(len(steps_arr), dtype=bool)
            keep[1:] = steps_arr[1:] != steps_arr[:-1]
            if self.last_step is not None:
                keep &= steps_arr > self.last_step
            self.late_points += int(len(keep) - keep.sum())
            steps_arr, values_arr = steps_arr[keep], values_arr[keep]
        if len(steps_arr):
            self.last_step = int(steps_arr[-1])
            self._process(steps_arr, values_arr)
        return self._diff_visible()

    def _process(self, steps: np.ndarray, values: np.ndarray) -> None:
        runs = self.detectors
        if "nonfinite" in runs:
            self.nonfinite.process(steps, values)
        finite = np.isfinite(values)
        steps, values = steps[finite], values[finite]
        if not len(values):
            return
        all_steps = np.concatenate([self.tail_steps, steps])
        all_values = np.concatenate([self.tail_values, values])
        new_from = len(self.tail_values)
        first_index = self.finite_seen - new_from
        level = rolling_level(all_values, new_from, first_index)
        base, scale, early, quantum = self.baseline.update(all_values, new_from, first_index)
        ceiling = self.ceiling.update(all_values, new_from, first_index) if self.ceiling else None
        window = Window(all_steps, all_values, new_from, first_index, level, base, scale, early, quantum, ceiling)

        if self.sawtooth.series_start is None:
            self.sawtooth.series_start = int(steps[0])
        opened_spikes = self.spikes.process(window) if "spike" in runs else []
        if "sawtooth" in runs:
            # the median logging interval over the tail, only when a spike needs it: a median
            # of a thousand gaps on every call was a tenth of the cost of a small batch
            if opened_spikes or self.spikes.parts:
                interval = float(np.median(np.diff(all_steps))) if len(all_steps) > 1 else 1.0
                self.sawtooth.add_spikes(opened_spikes, interval)
                self.sawtooth.add_parts(self.spikes.parts, interval)
            self.sawtooth.process(window)
        if "level_shift" in runs:
            first_block, block_medians, block_mads = self.baseline.new_blocks
            self.shifts.process(window, first_block, block_medians, block_mads)
        if "rise" in runs:
            self.rise.process(window)
        if "drift" in runs:
            first_block, block_medians, _ = self.baseline.new_blocks
            floor = self.ceiling.floor if self.ceiling is not None else None
            self.drift.process(window, first_block, block_medians, self.rise.settled_at, floor)
        if "plateau" in runs:
            self.plateau.process(window)
        if "too_good" in runs:
            self.too_good.process(window)
        if self.health:
            self.health.process(window)
        self.outline.add(steps, values)

        self.finite_seen += len(values)
        self.tail_steps = all_steps[-TAIL_POINTS:].copy()
        self.tail_values = all_values[-TAIL_POINTS:].copy()

    @property
    def events(self) -> list[Event]:
        """The current events, in step order; one event per anomaly."""
        members = self.sawtooth.member_spike_steps()
        # drifts that came back; inside a sawtooth's stretch they are its teeth, which it names
        humps = [
            e for e in self.drift.events if e.kind == EventKind.SPIKE and not _overlaps_any(e, self.sawtooth.events)
        ]
        spikes = [e for e in self.spikes.events if e.start_step not in members] + humps
        drifts = [e for e in self.drift.events if e.kind == EventKind.DIVERGENCE]
        # an excursion that came back is the spike, not a divergence that "came back" nor a shift
        # that "stayed there" while it decayed back
        rises = [e for e in self.rise.events if not _within_spike(e, spikes)]
        # a rise that came back within a few hundred steps of where it set off was an excursion
        # that recovered, however wide: a spike with its recovery time, not a divergence
        came_back = [e for e in rises if _came_back_soon(e)]
        spikes += [_recovered_spike(e) for e in came_back]
        rises = [e for e in rises if e not in came_back]
        shifts = [
            e
            for e in self.shifts.events
            if not _within_spike(e, spikes)
            and not any(_overlaps_any(e, [r]) and e.end_step <= r.start_step + MAX_SPIKE_STEPS for r in came_back)
        ]
        # a level shift named before a drift over the same steps is that episode (the drift is
        # the step seen from afar); otherwise the divergence stands for both
        drifts = [d for d in drifts if not any(_overlaps_any(d, [s]) and _named(s) < _named(d) for s in shifts)]
        divergences = self.nonfinite.events + _named_first(rises, drifts)
        shifts = [e for e in shifts if not _overlaps_any(e, divergences)]
        # a jump inside a divergence's course is that divergence seen up close, not a spike of its
        # own: the divergence names it (issue 46: a spike rode on most grad-norm divergences); so
        # is a jump inside an RL policy's collapse or KL blow-up
        health = self.health.events if self.health else []
        spikes = [e for e in spikes if not _inside_any(e, divergences + health)]
        found = spikes + divergences + shifts + self.sawtooth.events + self.plateau.all_events() + self.too_good.events
        found = without_its_teeth(found, self.sawtooth.events)
        cap = self.profile.severity_cap
        if cap is not None:
            found = [replace(e, severity=capped(e.severity, cap)) for e in found]
        # the RL health rules say their own severity: the cap keeps a reward's NaN or outlier at
        # info, never its collapse
        found += health
        return sorted(found, key=lambda e: (e.start_step, e.kind, e.end_step))

    def outline_snapshot(self) -> SeriesOutline:
        """The series in outline, for the run-level rules (train vs eval, a loss stuck at 0)."""
        return self.outline.snapshot(self.metric, self.kind)

    def snapshot(self) -> SeriesSnapshot:
        """What the run-level rules (`findings.cross_signal_findings`) need of this series."""
        outline = self.outline_snapshot()
        last = float(self.tail_values[-1]) if len(self.tail_values) else None
        first = int(outline.steps[0]) if len(outline.steps) else None
        return SeriesSnapshot(self.metric, last, first, self.last_step, kind=self.kind, outline=outline)

    def _diff_visible(self) -> Update:
        update, self._visible = diff_visible(self._visible, self.events)
        return update

    def state(self) -> dict[str, Any]:
        """Everything needed to resume: JSON-serialisable, bounded in size by the tail."""
        return {
            "format": STATE_FORMAT,
            "detector_version": DETECTOR_VERSION,
            "metric": self.metric,
            "kind": self.kind,
            "expected_floor": self.expected_floor,
            "last_step": self.last_step,
            "late_points": self.late_points,
            "finite_seen": self.finite_seen,
            # (numpy's tolist: the same Python ints and floats, without a call per point)
            "tail_steps": self.tail_steps.astype(np.int64, copy=False).tolist(),
            "tail_values": self.tail_values.astype(float, copy=False).tolist(),
            "baseline": self.baseline.state(),
            "ceiling": self.ceiling.state() if self.ceiling else None,
            "nonfinite": self.nonfinite.state(),
            "rise": self.rise.state(),
            "drift": self.drift.state(),
            "spikes": self.spikes.state(),
            "sawtooth": self.sawtooth.state(),
            "shifts": self.shifts.state(),
            "plateau": self.plateau.state(),
            "too_good": self.too_good.state(),
            "health": self.health.state(),
            "outline": self.outline.state(),
            "visible": self._visible,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> IncrementalDetector:
        """Rebuild a detector from `state()`; it continues exactly where the saved one stopped."""
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"unsupported detector state format {state.get('format')!r}")
        detector = cls(state["metric"], kind=state["kind"], expected_floor=state["expected_floor"])
        detector.last_step = state["last_step"]
        detector.late_points = state["late_points"]
        detector.finite_seen = state["finite_seen"]
        detector.tail_steps = np.asarray(state["tail_steps"], dtype=np.int64)
        detector.tail_values = np.asarray(state["tail_values"], dtype=float)
        detector.baseline.restore(state["baseline"])
        if detector.ceiling is not None:
            detector.ceiling.restore(state["ceiling"])
        detector.nonfinite.restore(state["nonfinite"])
        detector.rise.restore(state["rise"])
        detector.drift.restore(state["drift"])
        detector.spikes.restore(state["spikes"])
        detector.sawtooth.restore(state["sawtooth"])
        detector.shifts.restore(state["shifts"])
        detector.plateau.restore(state["plateau"])
        detector.too_good.restore(state["too_good"])
        detector.health.restore(state.get("health") or {})
        detector.outline.restore(state["outline"])
        detector._visible = state["visible"]
        return detector


def _named_first(rises: list[Event], drifts: list[Event]) -> list[Event]:
    """One divergence per episode: where a rise (a level far above its minimum) and a drift (a
    creep from the best) cover the same steps, the one named first stands for both, so that an
    episode already reported keeps its identity as it grows."""
    if not rises or not drifts:
        return rises + drifts
    kept = []
    for event in rises + drifts:
        rivals = drifts if event in rises else rises
        named = event.details.get("detected_step", event.start_step)
        earlier = [
            other
            for other in rivals
            if _overlaps_any(event, [other])
            and (
                other.details.get("detected_step", other.start_step) < named
                or (other.details.get("detected_step", other.start_step) == named and event in rises)
            )
        ]
        if earlier:
            continue
        kept.append(event)
    return kept


# A rise "came back" only if its last point above the minimum was back near where it set off: at
# most this many times the minimum, or this share of the way from the minimum up to the peak.
# (A loss that exploded widens its own noise band until the rise detector stops counting it
# "above"; it ended there at 28-52x its minimum, and that is no recovery.)
CAME_BACK_FACTOR = 3.0
CAME_BACK_SHARE = 0.25


def _came_back_soon(rise: Event) -> bool:
    """Whether a rise over the minimum ended within `MAX_SPIKE_STEPS` of its first step, back
    near the level it set off from."""
    d = rise.details
    if not (
        d.get("cause") == "rise" and d.get("ongoing") is False and rise.end_step - rise.start_step <= MAX_SPIKE_STEPS
    ):
        return False
    minimum, peak, last = d.get("minimum"), d.get("peak"), d.get("last_value")
    if not all(isinstance(v, float) and math.isfinite(v) for v in (minimum, peak, last)) or minimum <= 0:
        return True  # nothing to measure the way back by: as before
    return last <= CAME_BACK_FACTOR * minimum or last - minimum <= CAME_BACK_SHARE * (peak - minimum)


def _recovered_spike(rise: Event) -> Event:
    """The spike a rise that came back soon was: information, with where it peaked and came back."""
    d = rise.details
    peak, minimum = d.get("peak"), d.get("minimum")
    ratio = (
        f" ({peak / minimum:.1f}x)" if isinstance(peak, float) and isinstance(minimum, float) and minimum > 0 else ""
    )
    peak_step = rise.peak_step if rise.peak_step is not None else rise.end_step
    start = int(d.get("detected_step", rise.start_step))
    summary = (
        f"{rise.metric} jumped from {format_value(minimum)} to {format_value(peak)}{ratio} at step "
        f"{format_step(start)}, peaked by step {format_step(peak_step)} and came back by step "
        f"{format_step(rise.end_step)} ({format_step(rise.end_step - start)} steps after it began): a spike "
        "that recovered, not a divergence"
    )
    return replace(
        rise,
        kind=EventKind.SPIKE,
        start_step=start,
        severity=Level.INFO,
        summary=summary,
        details={**d, "recovered_step": rise.end_step, "recovered": True},
    )


def _named(event: Event) -> int:
    """The step at which an event was first reported."""
    return int(event.details.get("detected_step", event.start_step))


def _inside_any(event: Event, spans: list[Event]) -> bool:
    """Whether `event` began within one of `spans` (from its start to its end)."""
    return any(span.start_step <= event.start_step <= span.end_step for span in spans)


def _within_spike(event: Event, spikes: list[Event]) -> bool:
    """Whether `event` was named while a spike was up and ended by the time it came back."""
    named = event.details.get("detected_step", event.start_step)
    return any(s.start_step <= named and event.end_step <= s.details.get("recovered_step", s.end_step) for s in spikes)


def _overlaps_any(event: Event, others: list[Event]) -> bool:
    return any(o.start_step <= event.end_step and event.start_step <= o.end_step for o in others)
