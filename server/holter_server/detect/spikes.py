"""Spikes: a sudden jump in the bad direction that comes back within a few points.

A point is a candidate when it sits `spike_z` robust σ beyond the baseline of the blocks before
it and also by a relative margin (`spike_min_rel` of the level), so that a quiet, rounded
series cannot produce "huge" z-scores from tiny moves. The excursion is then followed against
the baseline frozen at its onset; it is a spike if it returns within a few hundred steps
(`MAX_SPIKE_STEPS`, at least `MAX_SPIKE_POINTS` points, at most `MAX_WIDE_POINTS`) however wide
(a loss that jumps and decays back over sixty steps is a spike with its recovery time, not a
divergence that came back nor a level shift), otherwise it is a shift or a divergence and left to
those detectors. Spikes a few points apart
are one event (a slow step followed by another).

Cold start: from the fifth point on, a point is judged against the median and robust σ of the
points before it (no extra margin); before that there is no noise estimate, and only a large
multiple of the first values counts (`EARLY_CAP_FACTOR`, or the kind's warm-up factor for norms,
which grow several-fold from their initialisation).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from holter_server.detect.baseline import EARLY_MAD_POINTS
from holter_server.detect.events import Event, format_step, format_value, format_z
from holter_server.detect.window import Window
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.profiles import KindProfile
from holter_server.vocabulary.severities import Level

MAX_SPIKE_POINTS = 10
# ... and an excursion that comes back within this many steps is a spike whatever its width, up to
# this many points (the bounded tail the detector sees holds 1,024)
MAX_SPIKE_STEPS = 300
MAX_WIDE_POINTS = 300
# past `MAX_SPIKE_POINTS`, an excursion is followed while it recedes: the median of its last
# `HOLD_WINDOW` points at least this share below the same `MAX_SPIKE_POINTS` points earlier
HOLD_WINDOW = 5
RECEDE_SHARE = 0.05
# a spike this many points wide or more says how long it took to come back
WIDE_POINTS = 4
# the logging interval is read off this many steps before the onset
INTERVAL_POINTS = 64
# Scores beyond this many σ are reported as "over": the noise they are measured against is a floor.
Z_CAP = 1000.0
MERGE_GAP_POINTS = 8
# Back to within this many σ of the onset baseline counts as recovered, or to within this share
# of the jump: a 3.5x slow step that lands on a level 15% higher (the run sped down as it
# resumed) came back; a loss that jumped and stays up did not.
RECOVERY_Z = 3.0
RECOVERY_SHARE = 0.1
# Before `EARLY_MAD_POINTS` points there is no noise estimate: a spike must reach this multiple
# of the median of the points before it.
EARLY_CAP_FACTOR = 3.0


class SpikeDetector:
    """Finds spikes among the new points of each window and reports them once recovered."""

    def __init__(self, metric: str, profile: KindProfile) -> None:
        self.metric = metric
        self.profile = profile
        self.open: dict[str, Any] | None = None
        self.last_end_index = -(10**12)
        self.events: list[Event] = []
        self.confirmed: list[Event] = []  # events that opened during the last `process`
        # every spike confirmed during the last `process`, merged into an earlier event or not:
        # (start step, whether it merged); periodic spikes closer than the merge gap are a sawtooth
        self.parts: list[tuple[int, bool]] = []

    def candidates(self, window: Window) -> np.ndarray:
        """Mask over the new points: far enough beyond the baseline to open a spike."""
        p = self.profile
        x = window.values[window.new_from :]
        excess = p.direction * (x - window.base)
        index = window.first_index + window.new_from + np.arange(len(x))
        cap = p.rise_warmup_factor or EARLY_CAP_FACTOR
        min_rel = np.where(index < EARLY_MAD_POINTS, cap - 1.0 if p.direction > 0 else 1.0 - 1.0 / cap, p.spike_min_rel)
        with np.errstate(invalid="ignore"):
            mask = (excess >= p.spike_z * window.scale) & (excess >= min_rel * np.abs(window.base))
            # before any noise is measured a spike is a multiple of the first values: of a level
            # that is positive (a loss swinging around zero has no multiple)
            mask &= (index >= EARLY_MAD_POINTS) | (window.base > 0)
            if window.ceiling is not None:
                mask &= x >= window.ceiling
            if not p.spike_early:
                mask &= ~window.early
        return mask

    def process(self, window: Window) -> list[Event]:
        """Feed the new points; return the spike events that opened (not merged) in them."""
        self.confirmed = []
        self.parts = []
        candidates = np.flatnonzero(self.candidates(window)) + window.new_from
        values = window.values
        pos = window.new_from
        ci = 0
        while True:
            if self.open is None:
                while ci < len(candidates) and candidates[ci] < pos:
                    ci += 1
                if ci == len(candidates):
                    break
                at = int(candidates[ci])
                k = at - window.new_from
                self.open = self._open(window, at, float(window.base[k]), float(window.scale[k]))
            onset = window.position(self.open["onset"])
            limit = onset + self.open.get("horizon", MAX_SPIKE_POINTS)
            base, threshold = self.open["base"], self.open["recovery"]
            end = min(len(values), limit + 1)
            following = values[onset + 1 : end]
            back = np.flatnonzero(self.profile.direction * (following - base) <= threshold)
            recovered = onset + 1 + int(back[0]) if len(back) else None
            holds = self._holds(values[onset:end], base)
            if recovered is not None and (holds is None or recovered <= onset + holds):
                self._confirm(window, onset, recovered)
                self.open = None
                pos = recovered
            elif holds is not None:
                self.open = None  # up and not coming back: a shift or a divergence, not a spike
                pos = onset + holds + 1
            elif limit < len(values):
                self.open = None  # still up after its horizon: not a spike
                pos = limit + 1
            else:
                break  # wait for more points
        return self.confirmed

    def _holds(self, values: np.ndarray, base: float) -> int | None:
        """The first position (from the onset) past `MAX_SPIKE_POINTS` where the excursion is not
        coming back: its excess over the last `HOLD_WINDOW` points has not receded by
        `RECEDE_SHARE` from where it was `MAX_SPIKE_POINTS` points before. A wide spike decays
        back; a shift holds and a divergence climbs."""
        excess = self.profile.direction * (values - base)
        first = MAX_SPIKE_POINTS + HOLD_WINDOW - 1
        if len(excess) <= first:
            return None
        medians = np.median(sliding_window_view(excess, HOLD_WINDOW), axis=1)
        now = medians[first - HOLD_WINDOW + 1 :]
        then = medians[: len(now)]
        holding = np.flatnonzero(now >= (1 - RECEDE_SHARE) * then)
        return first + int(holding[0]) if len(holding) else None

    def _open(self, window: Window, at: int, base: float, scale: float) -> dict[str, Any]:
        p = self.profile
        excess = p.direction * (float(window.values[at]) - base)
        recovery = max(RECOVERY_Z * scale, 0.5 * p.spike_min_rel * abs(base), RECOVERY_SHARE * excess)
        if window.ceiling is not None:
            recovery = max(recovery, 0.5 * float(window.ceiling[at - window.new_from]) - p.direction * base)
        steps = window.steps[max(at - INTERVAL_POINTS, 0) : at + 1]
        interval = float(np.median(np.diff(steps))) if len(steps) > 1 else 1.0
        horizon = int(min(max(MAX_SPIKE_POINTS, MAX_SPIKE_STEPS // max(interval, 1.0)), MAX_WIDE_POINTS))
        return {
            "onset": window.first_index + at,
            "base": base,
            "scale": scale,
            "recovery": recovery,
            "horizon": horizon,
        }

    def _confirm(self, window: Window, onset: int, recovered: int) -> None:
        p = self.profile
        assert self.open is not None  # a spike is confirmed only while one is open
        base, scale = self.open["base"], self.open["scale"]
        segment = window.values[onset:recovered]
        at = int(np.argmax(p.direction * (segment - base)))
        peak_value = float(segment[at])
        z = float(min(p.direction * (peak_value - base) / scale, Z_CAP))
        onset_index = window.first_index + onset
        last_index = window.first_index + recovered - 1
        record = {
            "base": base,
            "peak": peak_value,
            "z": z,
            "points": recovered - onset,
            "longest": recovered - onset,
            "recovered_step": window.step_at(window.first_index + recovered),
        }
        if onset_index < EARLY_MAD_POINTS:
            # no noise measured yet: the size is a multiple of the first values, not a count of σ
            record["cold_start"] = True
        merged = bool(self.events) and onset_index - self.last_end_index <= MERGE_GAP_POINTS
        self.parts.append((window.step_at(onset_index), merged))
        if merged:
            event = self.events[-1]
            event.end_step = window.step_at(last_index)
            event.details["recovered_step"] = record["recovered_step"]
            event.details["points"] += record["points"]
            event.details["longest"] = max(event.details["longest"], record["points"])
            event.details["parts"] += 1
            if z > event.score:
                event.score, event.peak_step = z, window.step_at(onset_index + at)
                event.details["peak"] = peak_value
        else:
            event = Event(
                kind=EventKind.SPIKE,
                metric=self.metric,
                start_step=window.step_at(onset_index),
                end_step=window.step_at(last_index),
                severity=p.spike_severity,
                score=z,
                summary="",
                peak_step=window.step_at(onset_index + at),
                details={**record, "parts": 1},
            )
            self.events.append(event)
            self.confirmed.append(event)
        self.last_end_index = last_index
        event.severity = self._severity(event)
        event.summary = self._summary(event)

    def _severity(self, event: Event) -> str:
        p = self.profile
        long = p.spike_warn_points is not None and event.details["longest"] > p.spike_warn_points
        return Level.WARNING if long and p.spike_severity == Level.INFO else p.spike_severity

    def _summary(self, event: Event) -> str:
        d = event.details
        verb = "jumped" if self.profile.direction > 0 else "dropped"
        where = f"at step {format_step(event.peak_step)}"
        if d["parts"] > 1:
            where = (
                f"between steps {format_step(event.start_step)} and {format_step(event.end_step)} ({d['parts']} times)"
            )
        size = format_z(event.score)
        if d.get("cold_start") and d["base"]:
            size = f"{d['peak'] / d['base']:.1f}x the first values"
        took = ""
        if d["longest"] > WIDE_POINTS:
            took = f" ({format_step(d['recovered_step'] - event.start_step)} steps after it began)"
        return (
            f"{self.metric} {verb} from {format_value(d['base'])} to {format_value(d['peak'])} "
            f"({size}) {where} and recovered by step {format_step(d['recovered_step'])}{took}"
        )

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {"open": self.open, "last_end_index": self.last_end_index, "events": [e.to_dict() for e in self.events]}

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.open = state["open"]
        self.last_end_index = state["last_end_index"]
        self.events = [Event.from_dict(e) for e in state["events"]]
