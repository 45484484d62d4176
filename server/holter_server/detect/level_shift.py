"""Level shift: a sustained step change in the bad direction.

Throughput dropping and staying down, a gradient norm moving to a new regime. Two windows of
two blocks (16 points) are compared across a one-block gap where the change happens; the shift
must clear `shift_min_rel` of the earlier level and six robust σ, and both later blocks must
agree. For norms the change must also be abrupt (each window flat): a gradient norm drifting up
by half over a few hundred steps, or an activation norm growing from its initialisation, is not
a new regime. For kinds with a healthy ceiling (logprob mismatch ≈ 0) the question is simpler: has the
level stayed above the tolerance?
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from holter_server.detect.baseline import BLOCK, MAD_TO_SIGMA, RELATIVE_NOISE_FLOOR, SCALAR_MAX_BLOCKS, bounded
from holter_server.detect.events import Event, format_step, format_value
from holter_server.detect.runs import RunTracker
from holter_server.detect.window import Window
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.profiles import KindProfile

SHIFT_NOISE_UNITS = 6.0
HISTORY = 5  # blocks: two before, the gap, two after
TOLERANCE_PERSIST = 5
# `shift_abrupt` kinds (norms): within each window the two blocks differ by at most this share of
# the shift (a linear drift across the five blocks moves each window by a third of it), and the
# windows start after the first `ABRUPT_SKIP_BLOCKS` blocks (the growth from initialisation)
ABRUPT_MAX_WITHIN = 0.25
ABRUPT_SKIP_BLOCKS = 6
# ... and the new level must hold for this many blocks after the later window before it is
# reported: a hump (a gradient norm rising for a hundred steps, then easing back) is not a regime
ABRUPT_CONFIRM_BLOCKS = 2


class LevelShiftDetector:
    """Step changes between block medians, or a level held above the healthy ceiling."""

    def __init__(self, metric: str, profile: KindProfile) -> None:
        self.metric = metric
        self.profile = profile
        self.medians: list[float] = []
        self.mads: list[float] = []
        self.open: dict[str, Any] | None = None
        self.tolerance_runs = RunTracker(min_len=TOLERANCE_PERSIST, merge_gap=2 * TOLERANCE_PERSIST)
        self.events: list[Event] = []

    def process(self, window: Window, first_block: int, medians: np.ndarray, mads: np.ndarray) -> None:
        """Feed the new points and the blocks they completed (numbered from `first_block`)."""
        if window.ceiling is not None:
            self._above_tolerance(window)
            return
        if not len(medians):
            return
        d = self.profile.direction
        known = len(self.medians)
        n = len(medians)
        judged = self._judge_few(first_block, medians, mads) if n <= SCALAR_MAX_BLOCKS else None
        m: list[float] | np.ndarray
        if judged is not None:
            m, before, ok, noise_of = judged
        else:
            m, before, ok, noise_of = self._judge(first_block, medians, mads)
        i = 0
        while i < n:
            if self.open is not None:
                stays = d * (medians[i:] - self.open["before"]) >= 0.5 * self.open["shift"]
                failed = np.flatnonzero(~stays)
                last_staying = n - 1 if not len(failed) else i + int(failed[0]) - 1
                if last_staying >= i and self.open.get("pending"):
                    pending = self.open["pending"]
                    self.open["pending"] -= last_staying - i + 1
                    if self.open["pending"] <= 0:
                        self.open.pop("pending")
                        confirmed = Event.from_dict(self.open.pop("event"))
                        confirmed.details["detected_step"] = window.step_at((first_block + i + pending) * BLOCK - 1)
                        self.events.append(confirmed)
                if last_staying >= i and not self.open.get("pending"):
                    event = self.events[-1]
                    event.end_step = window.step_at((first_block + last_staying + 1) * BLOCK - 1)
                    event.summary = self._summary(event)
                if not len(failed):
                    break
                self.open = None
                i = last_staying + 2
                continue
            hits = np.flatnonzero(ok[i:])
            if not len(hits):
                break
            j = i + int(hits[0])
            self._open_shift(
                window,
                first_block + j,
                float(before[j]),
                float(m[known + j - 1] + m[known + j]) / 2,
                float(noise_of[j]),
            )
            i = j + 1
        self.medians = [float(v) for v in m[-(HISTORY - 1) :]]
        self.mads = [float(v) for v in (self.mads + mads.tolist())[-(HISTORY - 1) :]]

    def _judge(
        self, first_block: int, medians: np.ndarray, mads: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per new block: the level before, whether it opens a shift, and the noise; with the
        block medians known so far (the kept ones, then the new)."""
        d = self.profile.direction
        known = len(self.medians)
        m = np.concatenate([np.asarray(self.medians, dtype=float), medians])
        s = np.concatenate([np.asarray(self.mads, dtype=float), mads])
        # per new block j (position known + j in m): two blocks before, a gap, two after
        n = len(medians)
        full = np.arange(known, known + n) >= HISTORY - 1
        idx = np.arange(known, known + n)[full]
        before = np.full(n, np.nan)
        ok = np.zeros(n, dtype=bool)
        noise_of = np.full(n, np.nan)
        if len(idx):
            b = (m[idx - 4] + m[idx - 3]) / 2
            a = (m[idx - 1] + m[idx]) / 2
            noise = np.maximum.reduce(
                [
                    MAD_TO_SIGMA * (s[idx - 4] + s[idx - 3]) / 2,
                    RELATIVE_NOISE_FLOOR * np.abs(b),
                    np.full(len(idx), self.profile.abs_floor),
                ]
            )
            need = np.maximum(self.profile.shift_min_rel * np.abs(b), SHIFT_NOISE_UNITS * noise)
            shift = d * (a - b)
            both = np.minimum(d * (m[idx - 1] - b), d * (m[idx] - b))
            before[full] = b
            ok[full] = (shift >= need) & (both >= 0.7 * need)
            if self.profile.shift_abrupt:
                within = np.maximum(np.abs(m[idx] - m[idx - 1]), np.abs(m[idx - 3] - m[idx - 4]))
                block_number = first_block + np.arange(n)[full]
                ok[full] &= (within <= ABRUPT_MAX_WITHIN * shift) & (block_number - 4 >= ABRUPT_SKIP_BLOCKS)
            noise_of[full] = noise
        return m, before, ok, noise_of

    def _judge_few(
        self, first_block: int, medians: np.ndarray, mads: np.ndarray
    ) -> tuple[list[float], np.ndarray, np.ndarray, np.ndarray] | None:
        """`_judge` block by block in plain Python, for the block or two a small batch completes
        (numpy's per-call overhead was the whole cost); the same IEEE operations in the same
        order. None where a NaN could arise (np.maximum and max() treat it differently)."""
        m = self.medians + medians.tolist()
        s = self.mads + mads.tolist()
        if not (bounded(m) and bounded(s)):
            return None
        p = self.profile
        d = p.direction
        known = len(self.medians)
        n = len(medians)
        before = [math.nan] * n
        ok = [False] * n
        noise_of = [math.nan] * n
        for j in range(n):
            i = known + j
            if i < HISTORY - 1:
                continue
            b = (m[i - 4] + m[i - 3]) / 2
            a = (m[i - 1] + m[i]) / 2
            noise = max(MAD_TO_SIGMA * (s[i - 4] + s[i - 3]) / 2, RELATIVE_NOISE_FLOOR * abs(b), float(p.abs_floor))
            need = max(p.shift_min_rel * abs(b), SHIFT_NOISE_UNITS * noise)
            shift = d * (a - b)
            both = min(d * (m[i - 1] - b), d * (m[i] - b))
            before[j] = b
            ok[j] = shift >= need and both >= 0.7 * need
            if p.shift_abrupt:
                within = max(abs(m[i] - m[i - 1]), abs(m[i - 3] - m[i - 4]))
                ok[j] = ok[j] and within <= ABRUPT_MAX_WITHIN * shift and first_block + j - 4 >= ABRUPT_SKIP_BLOCKS
            noise_of[j] = noise
        return m, np.array(before), np.array(ok, dtype=bool), np.array(noise_of)

    def _open_shift(self, window: Window, block: int, before: float, after: float, noise: float) -> None:
        d = self.profile.direction
        shift = d * (after - before)
        # the change point: first point of the gap block or the one after that is half-way there
        lo = (block - 2) * BLOCK
        values = window.values[window.position(lo) : window.position(lo + 2 * BLOCK)]
        moved = np.flatnonzero(d * (values - before) >= 0.5 * shift)
        start_index = lo + int(moved[0]) if len(moved) else lo
        self.open = {"before": before, "shift": shift}
        event = Event(
            kind=EventKind.LEVEL_SHIFT,
            metric=self.metric,
            start_step=window.step_at(start_index),
            end_step=window.step_at((block + 1) * BLOCK - 1),
            severity=self.profile.shift_severity,
            score=float(shift / noise),
            summary="",
            details={
                "before": before,
                "after": after,
                "relative": shift / abs(before) if before else None,
                "detected_step": window.step_at((block + 1) * BLOCK - 1),
            },
        )
        event.summary = self._summary(event)
        if self.profile.shift_abrupt:
            # reported once the new level has held `ABRUPT_CONFIRM_BLOCKS` more blocks
            self.open.update(pending=ABRUPT_CONFIRM_BLOCKS, event=event.to_dict())
        else:
            self.events.append(event)

    def _summary(self, event: Event) -> str:
        d = event.details
        verb = "rose" if d["after"] > d["before"] else "dropped"
        rel = f" ({100 * (d['after'] - d['before']) / abs(d['before']):+.0f}%)" if d["before"] else ""
        return (
            f"{self.metric} {verb} from {format_value(d['before'])} to {format_value(d['after'])}{rel} "
            f"at step {format_step(event.start_step)} and stayed there through step {format_step(event.end_step)}"
        )

    def _above_tolerance(self, window: Window) -> None:
        ceiling = window.ceiling if window.ceiling is not None else np.zeros(len(window.level))
        first = window.first_index + window.new_from
        above = window.level >= ceiling
        for update in self.tolerance_runs.update(above, first, score=window.level):
            if update.opened:
                at = max(update.start - first, 0)
                event = Event(
                    kind=EventKind.LEVEL_SHIFT,
                    metric=self.metric,
                    start_step=window.step_at(update.start),
                    end_step=0,
                    severity=self.profile.shift_severity,
                    score=0.0,
                    summary="",
                    details={"tolerance": float(ceiling[at]) if len(ceiling) else 0.0},
                )
                self.events.append(event)
            event = self.events[-1]
            tolerance = float(event.details["tolerance"])
            event.end_step = window.step_at(update.end)
            if window.holds(update.peak_index):  # else the peak is older than the tail and already recorded
                event.peak_step = window.step_at(update.peak_index)
            event.score = float(update.peak_score / tolerance) if tolerance else update.peak_score
            event.details["peak"] = update.peak_score
            event.summary = (
                f"{self.metric} stayed above its tolerance {format_value(tolerance)} from step "
                f"{format_step(event.start_step)} to step {format_step(event.end_step)}, up to "
                f"{format_value(update.peak_score)} at step {format_step(event.peak_step)} (healthy is ≈ 0)"
            )

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {
            "medians": self.medians,
            "mads": self.mads,
            "open": self.open,
            "tolerance_runs": self.tolerance_runs.state(),
            "events": [e.to_dict() for e in self.events],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.medians = list(state["medians"])
        self.mads = list(state["mads"])
        self.open = state["open"]
        self.tolerance_runs.restore(state["tolerance_runs"])
        self.events = [Event.from_dict(e) for e in state["events"]]
