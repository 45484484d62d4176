"""Detectors for the GPU vitals the client samples (holter/system.py), one per kind:

* `gpu_memory_leak` on `holter/system/gpu.<i>.memory_used_frac` — memory creeping up sample after
  sample, past the job's start, toward the card's limit (a leak: tensors kept alive by a
  growing list, a cache, a graph held across steps). A job's memory rises while it loads and
  warms up and then holds steady; only a climb that goes on counts.
* `gpu_idle` on `holter/system/gpu.<i>.utilization` — utilisation collapsing while steps continue (the
  client samples only when the step moved): the GPU waits for data, an input-pipeline stall,
  "a throughput drop with no GPU utilisation".
* `gpu_throttled` on `holter/system/gpu.<i>.throttle.thermal` / `.power` — the clocks cut for heat, or
  by the hardware for power, for several samples in a row.

Pure: numbers in, events out; the same interface as `IncrementalDetector` (`add`, `events`,
`state`, `from_state`), so live detection, re-analysis and `holter import` use them alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from holter_server.detect.events import Event, format_step
from holter_server.detect.findings import SeriesSnapshot
from holter_server.detect.incremental import DETECTOR_VERSION, Update, diff_visible
from holter_server.detect.runs import RunTracker
from holter_server.vocabulary.profiles import SYSTEM_KINDS, SystemKind
from holter_server.vocabulary.severities import Level

STATE_FORMAT = 1


def _gpu_name(metric: str) -> str:
    """'holter/system/gpu.3.utilization' -> 'GPU 3'."""
    parts = metric.split(".")
    return f"GPU {parts[1]}" if len(parts) > 1 and parts[1].isdigit() else metric


class SystemVitalDetector:
    """Shared bookkeeping: points in step order, each step once; the events' visibility diff."""

    def __init__(self, metric: str, kind: str) -> None:
        self.metric = metric
        self.kind = kind
        self.profile: SystemKind = SYSTEM_KINDS[kind]
        self.first_step: int | None = None
        self.last_step: int | None = None
        self.last_value: float | None = None
        self.seen = 0
        self.found: dict[int, Event] = {}  # by start step
        self._visible: dict[str, dict[str, Any]] = {}

    def add(self, steps: Any, values: Any) -> Update:
        """Feed points (any batches, any order within one); returns what changed."""
        steps_arr = np.asarray(steps, dtype=np.int64).reshape(-1)
        values_arr = np.asarray(values, dtype=float).reshape(-1)
        if steps_arr.shape != values_arr.shape:
            raise ValueError("steps and values must have the same length")
        order = np.argsort(steps_arr, kind="stable")
        steps_arr, values_arr = steps_arr[order], values_arr[order]
        for step, value in zip(steps_arr.tolist(), values_arr.tolist()):
            if self.last_step is not None and step <= self.last_step:
                continue
            self.last_step = step
            if self.first_step is None:
                self.first_step = step
            self.last_value = value
            if np.isfinite(value):
                self._point(step, value)
                self.seen += 1
        return self._diff_visible()

    @property
    def events(self) -> list[Event]:
        """The current events, in step order."""
        return [self.found[start] for start in sorted(self.found)]

    def snapshot(self) -> SeriesSnapshot:
        """What the run-level rules need of this series (no outline: they read losses' outlines)."""
        return SeriesSnapshot(self.metric, self.last_value, self.first_step, self.last_step, kind=self.kind)

    def _point(self, step: int, value: float) -> None:
        raise NotImplementedError

    def _diff_visible(self) -> Update:
        update, self._visible = diff_visible(self._visible, self.events)
        return update

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state, bounded by the detector's window."""
        return {
            "format": STATE_FORMAT,
            "detector_version": DETECTOR_VERSION,
            "detector": type(self).__name__,
            "metric": self.metric,
            "kind": self.kind,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "last_value": self.last_value,
            "seen": self.seen,
            "found": [e.to_dict() for e in self.events],
            "visible": self._visible,
            "own": self._own_state(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SystemVitalDetector:
        """Rebuild a detector from `state()`."""
        detector = DETECTORS[state["kind"]](state["metric"], state["kind"])
        detector.first_step = state.get("first_step")
        detector.last_step = state["last_step"]
        detector.last_value = state.get("last_value")
        detector.seen = state["seen"]
        detector.found = {e["start_step"]: Event.from_dict(e) for e in state["found"]}
        detector._visible = state["visible"]
        detector._restore(state["own"])
        return detector

    def _own_state(self) -> dict[str, Any]:
        return {}

    def _restore(self, own: dict[str, Any]) -> None:
        pass


class GpuMemoryLeakDetector(SystemVitalDetector):
    """Memory use that keeps climbing toward the card's limit."""

    def __init__(self, metric: str, kind: str = "gpu_memory") -> None:
        super().__init__(metric, kind)
        self.tail_steps: list[int] = []
        self.tail_values: list[float] = []
        self.open_start: int | None = None
        self.open_value = 0.0

    def _point(self, step: int, value: float) -> None:
        p = self.profile
        self.tail_steps = ([*self.tail_steps, step])[-p.window :]
        self.tail_values = ([*self.tail_values, value])[-p.window :]
        if self.seen + 1 < p.warmup_points + p.window:
            return
        values = np.asarray(self.tail_values)
        rise = values[-1] - values[0]
        diffs = np.diff(values)
        rising = float(np.mean(diffs >= 0.0))
        per_sample = rise / (len(values) - 1)
        to_limit = (p.limit - values[-1]) / per_sample if per_sample > 0 else np.inf
        # a creep, not one step up (an eval pass, a longer batch): no single jump makes most of the rise
        creeping = rise > 0 and float(diffs.max()) <= p.max_jump_share * rise
        leaking = rise >= p.min_rise and rising >= p.rising_share and creeping and to_limit <= p.horizon
        if self.open_start is not None:  # once named, the episode lasts while the memory still climbs
            leaking = rise >= p.min_rise / 2
        if not leaking:
            self.open_start = None
            return
        if self.open_start is None:
            self.open_start, self.open_value = self.tail_steps[0], float(values[0])
        start = self.open_start
        severity = Level.CRITICAL if values[-1] >= p.critical_level else p.severity
        eta = (
            "it is at the limit"
            if to_limit <= 0
            else f"at this pace it reaches {p.limit:.0%} in about {to_limit:.0f} more samples"
        )
        self.found[start] = Event(
            kind=p.event_kind,
            metric=self.metric,
            start_step=start,
            end_step=step,
            severity=severity,
            score=float(rise),
            peak_step=step,
            summary=(
                f"{_gpu_name(self.metric)} memory keeps climbing: {self.open_value:.0%} → {values[-1]:.0%} of the card "
                f"from step {format_step(start)} to {format_step(step)}; "
                f"{eta}: a leak (tensors or graphs kept across steps?)"
            ),
            details={
                "first": self.open_value,
                "last": float(values[-1]),
                "rise": float(rise),
                "samples_to_limit": None if not np.isfinite(to_limit) else float(max(to_limit, 0.0)),
            },
        )

    def _own_state(self) -> dict[str, Any]:
        return {
            "tail_steps": self.tail_steps,
            "tail_values": self.tail_values,
            "open_start": self.open_start,
            "open_value": self.open_value,
        }

    def _restore(self, own: dict[str, Any]) -> None:
        self.tail_steps, self.tail_values = own["tail_steps"], own["tail_values"]
        self.open_start, self.open_value = own["open_start"], own["open_value"]


class GpuIdleDetector(SystemVitalDetector):
    """Utilisation that collapses from a busy level and stays down while steps go on."""

    def __init__(self, metric: str, kind: str = "gpu_utilization") -> None:
        super().__init__(metric, kind)
        self.history: list[float] = []  # the busy level's window: samples outside any low run
        self.baseline: float | None = None  # the level before the low run under way
        self.low_start = 0
        self.low_count = 0
        self.low_sum = 0.0

    def _point(self, step: int, value: float) -> None:
        p = self.profile
        if self.baseline is None and self.seen >= p.warmup_points and len(self.history) >= p.min_points:
            level = float(np.median(self.history))
            if level >= p.busy_floor and value < min(p.idle_ceiling, p.idle_share * level):
                self.baseline, self.low_start, self.low_count, self.low_sum = level, step, 0, 0.0
        if self.baseline is None or value >= min(p.idle_ceiling, p.idle_share * self.baseline):
            self.baseline = None  # busy (again)
            self.history = ([*self.history, value])[-p.window :]
            return
        self.low_count += 1
        self.low_sum += value
        if self.low_count < p.min_points:
            return
        mean = self.low_sum / self.low_count
        self.found[self.low_start] = Event(
            kind=p.event_kind,
            metric=self.metric,
            start_step=self.low_start,
            end_step=step,
            severity=p.severity,
            score=float(self.baseline - mean),
            peak_step=self.low_start,
            summary=(
                f"{_gpu_name(self.metric)} utilisation fell from {self.baseline:.0f}% to {mean:.0f}% at step "
                f"{format_step(self.low_start)} and stayed down for {self.low_count} samples while steps went on "
                f"(to {format_step(step)}): the GPU is waiting, most likely for the input pipeline"
            ),
            details={"before": self.baseline, "after": mean, "samples": self.low_count},
        )

    def _own_state(self) -> dict[str, Any]:
        return {
            "history": self.history,
            "baseline": self.baseline,
            "low_start": self.low_start,
            "low_count": self.low_count,
            "low_sum": self.low_sum,
        }

    def _restore(self, own: dict[str, Any]) -> None:
        self.history, self.baseline = own["history"], own["baseline"]
        self.low_start, self.low_count, self.low_sum = own["low_start"], own["low_count"], own["low_sum"]


class GpuThrottleDetector(SystemVitalDetector):
    """A throttle flag held for several samples (thermal, or hardware power slowdown)."""

    def __init__(self, metric: str, kind: str = "gpu_throttle") -> None:
        super().__init__(metric, kind)
        self.tracker = RunTracker(min_len=self.profile.min_points, merge_gap=self.profile.merge_gap)
        self.run_first: int | None = None  # the step the flagged run under way began at
        self.episode_start = 0  # the step the current episode began at
        self.last_flagged: int | None = None  # the step of the last flagged sample

    def _point(self, step: int, value: float) -> None:
        index = self.seen
        flagged = value > 0.5
        if not flagged:
            self.run_first = None
        elif self.run_first is None:
            self.run_first = step
        thermal = self.metric.endswith("thermal")
        for update in self.tracker.update(np.array([flagged]), index):
            if update.opened:
                self.episode_start = self.run_first if self.run_first is not None else step
            samples = update.end - update.start + 1
            # an episode that ended at the previous sample is closed when this one arrives
            end = step if update.end == index else (self.last_flagged if self.last_flagged is not None else step)
            self.found[self.episode_start] = Event(
                kind=self.profile.event_kind,
                metric=self.metric,
                start_step=self.episode_start,
                end_step=end,
                severity=self.profile.severity,
                score=float(samples),
                peak_step=self.episode_start,
                summary=(
                    f"{_gpu_name(self.metric)} clocks were cut for "
                    f"{'heat (thermal slowdown)' if thermal else 'power (hardware slowdown or power brake)'} from step "
                    f"{format_step(self.episode_start)} to {format_step(end)} ({samples} samples): "
                    "the job runs slower than the card can"
                ),
                details={"cause": "thermal" if thermal else "power", "samples": samples},
            )
        if flagged:
            self.last_flagged = step

    def _own_state(self) -> dict[str, Any]:
        return {
            "tracker": self.tracker.state(),
            "run_first": self.run_first,
            "episode_start": self.episode_start,
            "last_flagged": self.last_flagged,
        }

    def _restore(self, own: dict[str, Any]) -> None:
        self.tracker.restore(own["tracker"])
        self.run_first = own["run_first"]
        self.episode_start = own["episode_start"]
        self.last_flagged = own.get("last_flagged")


DETECTORS: dict[str, type[SystemVitalDetector]] = {
    "gpu_memory": GpuMemoryLeakDetector,
    "gpu_utilization": GpuIdleDetector,
    "gpu_throttle": GpuThrottleDetector,
}
