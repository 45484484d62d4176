"""Sawtooth: a regular, repeating pattern — spikes every N steps or a zig-zag locked to epochs.

Two kinds of evidence, one event:
* a spike train: at least `MIN_TRAIN` spikes whose spacing agrees within `PERIOD_TOLERANCE`
  (the slow step at every data-shard load, the logprob-mismatch spike every `rollouts_num`);
  the spikes become members of the sawtooth rather than separate events. Spikes closer than
  the spike detector's merge gap form one spike event; when at least `MIN_SHORT_TRAIN` of them
  in a row are evenly spaced (exactly, within `PERIOD_TOLERANCE`) at `MIN_SHORT_PERIOD` points
  or more, they are a sawtooth with that short period, not one "spike x N";
* the autocorrelation of the detrended last `ACF_WINDOW` points, checked every `ACF_EVERY`
  points: a clear peak after the first zero crossing, seen in two consecutive checks.
The period is reported in steps (points x the median logging interval), because the period is
the clue that points at the cause.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from holter_server.detect.events import Event, format_step, format_value
from holter_server.detect.kinds import KindProfile
from holter_server.detect.window import Window

MIN_TRAIN = 4
TRAIN_MEMORY = 12
PERIOD_TOLERANCE = 0.1
ACF_WINDOW = 1024
ACF_EVERY = 256
ACF_MIN_PEAK = 0.4
ACF_MAX_TROUGH = -0.15
ACF_MIN_LAG = 4
ACF_MIN_CYCLES = 4
MIN_SHORT_TRAIN = 5
MIN_SHORT_PERIOD = 3  # points, and steps


def _agrees(a: float, b: float, slack: float = 0.0) -> bool:
    return abs(a - b) <= PERIOD_TOLERANCE * max(a, b) + slack


class SawtoothDetector:
    """Periodic spikes and periodic zig-zags, reported with their period in steps."""

    def __init__(self, metric: str, profile: KindProfile) -> None:
        self.metric = metric
        self.profile = profile
        self.train: list[tuple[int, int]] = []  # (start_step, peak_step) of recent spikes
        self.acf_candidate: tuple[float, int] | None = None  # (period, window start step)
        # start steps of the spikes of the current merged spike event (its first one first)
        self.cluster: list[int] = []
        self.cluster_head: int | None = None
        self.hidden: list[int] = []  # merged spike events a short train stands for
        self.events: list[Event] = []

    # -- spike trains -------------------------------------------------------------------------
    def add_spikes(self, spikes: list[Event], step_interval: float) -> None:
        """Consider newly opened spike events as members of a periodic train."""
        for spike in spikes:
            self.train = (self.train + [(spike.start_step, spike.peak_step or spike.start_step)])[-TRAIN_MEMORY:]
            starts = np.array([s for s, _ in self.train], dtype=float)
            event = self.events[-1] if self.events else None
            slack = step_interval
            if event is not None and event.details.get("source") == "spikes" and event.end_step == self.train[-2][0]:
                gap = starts[-1] - starts[-2]
                if _agrees(gap, event.period, slack):
                    self._extend_train(event, spike)
                    continue
            if len(starts) < MIN_TRAIN:
                continue
            gaps = np.diff(starts[-MIN_TRAIN:])
            period = float(np.median(gaps))
            if period > 0 and all(_agrees(g, period, slack) for g in gaps):
                members = self.train[-MIN_TRAIN:]
                self._open(
                    start=members[0][0], end=members[-1][0], period=period, source="spikes",
                    members=[s for s, _ in members],
                )

    def _extend_train(self, event: Event, spike: Event | int) -> None:
        start = spike if isinstance(spike, int) else spike.start_step
        d = event.details
        d["members"] = d["members"] + [start]
        count = len(d["members"])
        event.period = float((start - d["members"][0]) / (count - 1))
        event.end_step = start
        event.summary = self._summary(event)

    def add_parts(self, parts: list[tuple[int, bool]], step_interval: float) -> None:
        """Consider every confirmed spike, (start step, merged into the previous spike event),
        for a train too short-period for separate spike events."""
        for start, merged in parts:
            if not merged:
                self.cluster, self.cluster_head = [start], start
                continue
            self.cluster = (self.cluster + [start])[-TRAIN_MEMORY:]
            event = self.events[-1] if self.events else None
            if (event is not None and event.details.get("short") and len(self.cluster) > 1
                    and event.end_step == self.cluster[-2]
                    and _agrees(self.cluster[-1] - self.cluster[-2], event.period, step_interval)):
                self._extend_train(event, start)
                continue
            if len(self.cluster) < MIN_SHORT_TRAIN:
                continue
            members = self.cluster[-MIN_SHORT_TRAIN:]
            gaps = np.diff(np.asarray(members, dtype=float))
            period = float(np.median(gaps))
            if period < max(MIN_SHORT_PERIOD * step_interval, MIN_SHORT_PERIOD) or not all(_agrees(g, period) for g in gaps):
                continue
            self._open(start=members[0], end=members[-1], period=period, source="spikes", members=members, short=True)
            if self.cluster_head is not None and self.cluster_head not in members:
                self.hidden.append(self.cluster_head)

    # -- autocorrelation ----------------------------------------------------------------------
    def process(self, window: Window) -> None:
        """Run the autocorrelation check at every `ACF_EVERY`-th point among the new ones."""
        first = window.first_index + window.new_from
        stop = window.end_index
        check = ((first + ACF_EVERY - 1) // ACF_EVERY) * ACF_EVERY
        if check == 0:
            check = ACF_EVERY
        while check <= stop:
            # `check` points seen: the window ends at series index check - 1
            end = window.position(check - 1) + 1
            width = min(check, ACF_WINDOW)
            self._check(window.steps[end - width : end], window.values[end - width : end])
            check += ACF_EVERY

    def _check(self, steps: np.ndarray, values: np.ndarray) -> None:
        found = periodic_lag(values, min_rel=self.profile.sawtooth_min_rel, tolerance=self.profile.abs_tolerance)
        if found is None:
            self.acf_candidate = None
            return
        period = float(found * np.median(np.diff(steps)))
        start = int(steps[0])
        event = self.events[-1] if self.events else None
        if event is not None and int(event.end_step) >= start and _agrees(period, event.period):
            event.end_step = int(steps[-1])
            event.summary = self._summary(event)
        elif self.acf_candidate is not None and _agrees(period, self.acf_candidate[0]):
            self._open(start=self.acf_candidate[1], end=int(steps[-1]), period=period, source="autocorrelation",
                       amplitude=float(np.ptp(values) / 2))
        self.acf_candidate = (period, start)

    # -- events -------------------------------------------------------------------------------
    def _open(self, *, start: int, end: int, period: float, source: str, members: list[int] | None = None,
              amplitude: float | None = None, short: bool = False) -> None:
        last = self.events[-1] if self.events else None
        if last is not None and last.end_step >= start - period and _agrees(period, last.period):
            # the same pattern seen by the other kind of evidence: one event, not two
            last.end_step = max(last.end_step, end)
            if members is not None:
                known = last.details.get("members", [])
                last.details["members"] = known + [m for m in members if m not in known]
                last.details["source"] = "spikes"
            last.summary = self._summary(last)
            return
        details: dict[str, Any] = {"source": source}
        if short:
            details["short"] = True
        if members is not None:
            details["members"] = members
        if amplitude is not None:
            details["amplitude"] = amplitude
        event = Event(
            kind="sawtooth", metric=self.metric, start_step=start, end_step=end,
            severity=self.profile.sawtooth_severity, score=float(len(members) if members else 0), summary="",
            period=period, details=details,
        )
        self.events.append(event)
        event.summary = self._summary(event)

    def _summary(self, event: Event) -> str:
        d = event.details
        if d["source"] == "spikes":
            event.score = float(len(d["members"]))
            return (
                f"{self.metric} spiked every {format_value(event.period)} steps "
                f"({len(d['members'])} times, steps {format_step(event.start_step)} to {format_step(event.end_step)}); "
                f"a period this regular points at the data loader or a config parameter"
            )
        return (
            f"{self.metric} repeats a zig-zag every {format_value(event.period)} steps "
            f"from step {format_step(event.start_step)} to {format_step(event.end_step)}; "
            f"a period this regular points at the data order (epochs, shards)"
        )

    def member_spike_steps(self) -> set[int]:
        """Start steps of spikes that belong to a reported train (hidden as separate events)."""
        out: set[int] = set(self.hidden)
        for event in self.events:
            out.update(event.details.get("members", []))
        return out

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {
            "train": [list(t) for t in self.train],
            "acf_candidate": list(self.acf_candidate) if self.acf_candidate else None,
            "cluster": self.cluster, "cluster_head": self.cluster_head, "hidden": self.hidden,
            "events": [e.to_dict() for e in self.events],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.train = [tuple(t) for t in state["train"]]
        self.acf_candidate = tuple(state["acf_candidate"]) if state["acf_candidate"] else None
        self.cluster = [int(s) for s in state.get("cluster", [])]
        self.cluster_head = state.get("cluster_head")
        self.hidden = [int(s) for s in state.get("hidden", [])]
        self.events = [Event.from_dict(e) for e in state["events"]]


@lru_cache(maxsize=8)
def _quadratic_basis(n: int) -> np.ndarray:
    """Orthonormal basis of quadratics over n points: projecting on it is a least-squares fit."""
    t = np.linspace(-1.0, 1.0, n)
    q, _ = np.linalg.qr(np.vander(t, 3))
    return q


def periodic_lag(values: np.ndarray, *, min_rel: float, tolerance: float | None) -> float | None:
    """Lag (in points, sub-point precision) of a clear autocorrelation peak, or None.

    The window is detrended with a quadratic so the falling loss does not masquerade as a
    long period; a peak counts when it follows a real trough (a zig-zag, not a drift) and the
    window holds at least `ACF_MIN_CYCLES` periods.
    """
    n = len(values)
    if n < ACF_EVERY:
        return None
    basis = _quadratic_basis(n)
    residual = values - basis @ (basis.T @ values)
    amplitude = float(np.std(residual))
    if amplitude <= min_rel * abs(float(np.median(values))) or amplitude == 0.0:
        return None
    if tolerance is not None and float(np.max(values)) < tolerance:
        return None
    spectrum = np.fft.rfft(residual - residual.mean(), 2 * n)
    acf = np.fft.irfft(spectrum * np.conj(spectrum))[:n]
    acf = acf / acf[0]
    max_lag = n // ACF_MIN_CYCLES
    negative = np.flatnonzero(acf[1 : max_lag + 1] < 0)
    if not len(negative):
        return None
    zero = int(negative[0]) + 1
    lag = zero + int(np.argmax(acf[zero : max_lag + 1]))
    if lag < ACF_MIN_LAG or lag >= max_lag or acf[lag] < ACF_MIN_PEAK or acf[1:lag].min() > ACF_MAX_TROUGH:
        return None
    left, mid, right = acf[lag - 1], acf[lag], acf[lag + 1]
    curvature = left - 2 * mid + right
    shift = 0.5 * (left - right) / curvature if curvature < 0 else 0.0
    return float(lag + shift)
