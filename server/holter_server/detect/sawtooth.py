"""Sawtooth: a regular, repeating pattern — spikes every N steps or a zig-zag locked to epochs.

Two kinds of evidence, one event per period:
* a spike train: spikes that fall every P steps (the slow step at every data-shard load, the
  eval pause every `eval_interval` steps, the logprob-mismatch spike every `rollouts_num`). A
  long healthy run has dozens of one-step spikes, and some four of them will look evenly spaced
  by chance, so a period is a claim that must beat chance: walking back from the newest spike by
  P, count how many predicted steps hold a spike (on the logged step itself: data loaders, evals
  and rollouts keep their period to the step; or, as a second try, within `HIT_TOLERANCE` of P)
  against how many random spikes at the series' spike rate would hit there (a binomial tail),
  and multiply by the number of periods and tolerances tried over the run (a Bonferroni
  correction; the beat of the spike that set the period counts for nothing). Only a train whose
  corrected chance is below the kind's `sawtooth_max_chance` (0.001; 0.05 for the logprob
  mismatch, whose every spike is already a fault) is named, with that chance in
  `details["p_value"]`.
  The first three spikes of a series, and only they, evenly spaced to the logged step are a
  train of three cycles when that spacing is unlikely enough by chance: of every way to place
  three spikes on the n points logged so far, the share that are evenly spaced (about 1.5% at
  100 points), against the kind's `sawtooth_max_chance` (so a short periodic glitch of the
  logprob mismatch, 0.05, is one periodic problem, not three spikes; a loss's 0.001 needs more).
  Several trains are tracked at once (an eval pause every N steps and a shard load every M).
  Spikes closer than the spike detector's merge gap form one spike event; when at least
  `MIN_SHORT_TRAIN` of them in a row are evenly spaced (exactly, within `PERIOD_TOLERANCE`) at
  `MIN_SHORT_PERIOD` points or more, they are a sawtooth with that short period, not one
  "spike x N";
* the autocorrelation of the detrended last `ACF_WINDOW` points, checked every `ACF_EARLY_EVERY`
  points from `ACF_FIRST` on while the series is short, then every `ACF_EVERY`: a clear peak after
  the first zero crossing, seen in two consecutive checks, whose periodogram peak stands far above
  the spectrum around it (`details["p_value"]`). The window is detrended with a cubic spline of
  `DETREND_PIECES` pieces, which follows a loss's steep first drop (a quadratic does not, and a
  short run is mostly that drop) while leaving periods of up to a quarter of the window (the
  longest the check looks for: `ACF_MIN_CYCLES`) nearly whole.

  Why `ACF_FIRST` = 128 points (it was 256, and two agreeing checks made 512): the check needs
  `ACF_MIN_CYCLES` periods in the window and a periodogram peak whose chance under noise, over
  the n/2 frequencies looked at, is below `MAX_CHANCE`. A sawtooth of amplitude A over noise σ
  puts a peak of n²A²/4 over a noise median of nσ²·ln 2, so it passes when n·A²/(4σ²) ≥
  ln(1500·n): at 128 points when A ≥ 0.62σ (periods up to 32 points), at 64 points only when
  A ≥ 0.82σ and the period is at most 16. With two agreeing checks 64 points apart, a sawtooth of
  period P is named after max(192, 4P + 64) points: the issue's period-40 zigzag on a 300-step
  run at 256.
The period is reported in steps (points x the median logging interval), because the period is
the clue that points at the cause.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from holter_server.detect.events import Event, format_step, format_value
from holter_server.detect.window import Window
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.profiles import KindProfile

MIN_TRAIN = 4
TRAIN_MEMORY = 64
# predicted steps walked back from the newest spike at most, and misses in a row that end a train
MAX_WALK = 64
MAX_MISSES = 2
HIT_TOLERANCE = 0.015
# the periodogram check of the autocorrelation path
MAX_CHANCE = 1e-3
# a live train takes a spike that lands within this share of its period of the next beat (or
# the one after, when a beat went unseen)
PERIOD_TOLERANCE = 0.1
ACF_WINDOW = 1024
ACF_EVERY = 256
ACF_FIRST = 128  # points before the first check (see the module doc for why)
ACF_EARLY_EVERY = 64  # checks this often while the series is shorter than ACF_WINDOW / 2
DETREND_PIECES = 8
ACF_MIN_PEAK = 0.4
ACF_MAX_TROUGH = -0.15
ACF_MIN_LAG = 4
ACF_MIN_CYCLES = 4
# the periodogram at the autocorrelation's period against the median of the spectrum around it
SPECTRUM_NEIGHBOURS = 16
MIN_SHORT_TRAIN = 5
CLUSTER_MEMORY = 12
MIN_SHORT_PERIOD = 3  # points, and steps


def _agrees(a: float, b: float, slack: float = 0.0) -> bool:
    return abs(a - b) <= PERIOD_TOLERANCE * max(a, b) + slack


def binomial_tail(hits: int, trials: int, chance: float) -> float:
    """P(X >= hits) for X ~ Binomial(trials, chance)."""
    if hits <= 0:
        return 1.0
    if chance <= 0.0:
        return 0.0
    if chance >= 1.0:
        return 1.0
    return float(
        min(1.0, sum(math.comb(trials, k) * chance**k * (1 - chance) ** (trials - k) for k in range(hits, trials + 1)))
    )


class SawtoothDetector:
    """Periodic spikes and periodic zig-zags, reported with their period in steps."""

    def __init__(self, metric: str, profile: KindProfile) -> None:
        self.metric = metric
        self.profile = profile
        self.train: list[int] = []  # start steps of the recent spike events
        self.spike_count = 0
        self.periods_tried = 0
        self.first_step: int | None = None
        self.acf_candidate: tuple[float, int] | None = None  # (period, window start step)
        # start steps of the spikes of the current merged spike event (its first one first)
        self.cluster: list[int] = []
        self.cluster_head: int | None = None
        self.hidden: list[int] = []  # merged spike events a short train stands for
        self.events: list[Event] = []
        self.series_start: int | None = None  # the series' first finite step (the three-cycle chance)

    # -- spike trains -------------------------------------------------------------------------
    def add_spikes(self, spikes: list[Event], step_interval: float) -> None:
        """Consider newly opened spike events as members of a periodic train."""
        for spike in spikes:
            start = int(spike.start_step)
            self.spike_count += 1
            if self.first_step is None:
                self.first_step = start
            if not self._extend_live(start, step_interval) and not self._three_cycles(start, step_interval):
                self._search(start, step_interval)
            self.train = ([*self.train, start])[-TRAIN_MEMORY:]

    def _extend_live(self, start: int, step_interval: float) -> bool:
        best: tuple[float, Event] | None = None
        for event in self.events:
            d = event.details
            if d.get("source") != "spikes" or d.get("short") or not event.period:
                continue
            for beats in (1, 2):
                miss = abs(start - (event.end_step + beats * event.period))
                if miss <= PERIOD_TOLERANCE * event.period + step_interval and (best is None or miss < best[0]):
                    best = (miss, event)
        if best is None:
            return False
        self._extend_train(best[1], start)
        return True

    def _search(self, anchor: int, step_interval: float) -> None:
        """Look for a train that ends at `anchor` among the remembered spikes; open the likeliest
        one that beats chance."""
        if len(self.train) < MIN_TRAIN - 1:
            return
        starts = np.asarray(self.train, dtype=float)
        periods = anchor - starts
        periods = periods[periods >= max(MIN_SHORT_PERIOD * step_interval, MIN_SHORT_PERIOD)]
        if not len(periods):
            return
        self.periods_tried += len(periods)
        lo = starts[0]
        beats = np.arange(1, MAX_WALK + 1)
        predicted = anchor - periods[:, None] * beats[None, :]
        valid = predicted >= lo - 0.5 * step_interval
        idx = np.clip(np.searchsorted(starts, predicted), 1, len(starts) - 1)
        nearest = np.minimum(np.abs(starts[idx - 1] - predicted), np.abs(starts[idx] - predicted))
        rate = self.spike_count / max(anchor - (self.first_step or anchor) + step_interval, step_interval)
        # two readings of "on the beat": to the logged step (a config-driven period), or within
        # `HIT_TOLERANCE` of the period; each is a try, counted in the correction
        levels = (np.full(len(periods), 0.5 * step_interval), np.maximum(HIT_TOLERANCE * periods, step_interval))
        trials = max(self.periods_tried, 1) * len(levels)
        best: dict[str, Any] | None = None
        for tolerance in levels:
            hit = valid & (nearest <= tolerance[:, None])
            # a train ends at the first `MAX_MISSES` misses in a row (or where memory ends)
            missed = ~hit
            run = np.ones((len(periods), MAX_WALK - MAX_MISSES + 1), dtype=bool)
            for k in range(MAX_MISSES):
                run &= missed[:, k : MAX_WALK - MAX_MISSES + 1 + k]
            ended = np.where(run.any(axis=1), np.argmax(run, axis=1), MAX_WALK)
            kept = hit & (beats[None, :] <= ended[:, None])
            hits = kept.sum(axis=1)
            last_beat = np.where(kept.any(axis=1), MAX_WALK - np.argmax(kept[:, ::-1], axis=1), 0)
            for i in np.flatnonzero(hits >= MIN_TRAIN - 1):
                period, span_beats = float(periods[i]), int(last_beat[i])
                first = anchor - span_beats * period
                local = float(np.sum(starts >= first - tolerance[i])) + 1.0
                # the logged points within the tolerance of a beat
                window = (2 * math.floor(float(tolerance[i]) / step_interval + 1e-9) + 1) * step_interval
                chance = 1.0 - math.exp(-max(rate, local / (anchor - first + step_interval)) * window)
                # the beat of the spike that set the period is a hit by construction: not evidence
                p_value = min(1.0, binomial_tail(int(hits[i]) - 1, span_beats - 1, chance) * trials)
                if p_value <= self.profile.sawtooth_max_chance and (best is None or p_value < best["p_value"]):
                    pos = np.flatnonzero(kept[i])
                    members = sorted(
                        {int(starts[int(np.argmin(np.abs(starts - predicted[i, j])))]) for j in pos} | {anchor}
                    )
                    best = {"period": period, "p_value": p_value, "members": members, "chance": chance}
        if best is None or self._explained(best["members"]):
            return
        members = best["members"]
        self._open(
            start=members[0],
            end=members[-1],
            period=_fit_period(members, best["period"]),
            source="spikes",
            members=members,
            p_value=best["p_value"],
            chance=(best["chance"], trials),
        )

    def _three_cycles(self, anchor: int, step_interval: float) -> bool:
        """Open a train on the series' first three spikes when they are evenly spaced to the logged
        step and such spacing is unlikely enough by chance (module doc); True when opened."""
        if self.spike_count != 3 or self.events or len(self.train) != 2:
            return False
        first, second = self.train
        period = second - first
        if period < max(MIN_SHORT_PERIOD * step_interval, MIN_SHORT_PERIOD):
            return False
        if abs((anchor - second) - period) > 0.5 * step_interval:
            return False
        origin = self.series_start if self.series_start is not None else first
        points = round((anchor - origin) / step_interval) + 1
        chance = evenly_spaced_share(points)
        if chance > self.profile.sawtooth_max_chance:
            return False
        self._open(
            start=first,
            end=anchor,
            period=float(period),
            source="spikes",
            members=[first, second, anchor],
            p_value=chance,
            chance=(min(1.0, 3.0 / points), 1),  # a later beat's chance: the spikes' rate per point
        )
        return True

    def _explained(self, members: list[int]) -> bool:
        """Whether a live train already holds most of these spikes (a multiple of its period)."""
        for event in self.events:
            known = set(event.details.get("members", []))
            if known and sum(m in known for m in members) > len(members) // 2:
                return True
        return False

    def _extend_train(self, event: Event, start: int) -> None:
        d = event.details
        d["members"] = d["members"] + [start]
        event.period = _fit_period(d["members"], event.period or float(start - d["members"][0]))
        event.end_step = start
        if "chance" in d:
            # the evidence grows with every beat that lands: the chance of it falls
            beats = max(round((start - d["members"][0]) / event.period), len(d["members"]) - 1)
            d["p_value"] = min(1.0, binomial_tail(len(d["members"]) - 2, beats - 1, d["chance"]) * d["periods_tried"])
        event.summary = self._summary(event)

    def add_parts(self, parts: list[tuple[int, bool]], step_interval: float) -> None:
        """Consider every confirmed spike, (start step, merged into the previous spike event),
        for a train too short-period for separate spike events."""
        for start, merged in parts:
            if not merged:
                self.cluster, self.cluster_head = [start], start
                continue
            self.cluster = ([*self.cluster, start])[-CLUSTER_MEMORY:]
            event = self.events[-1] if self.events else None
            if (
                event is not None
                and event.details.get("short")
                and len(self.cluster) > 1
                and event.end_step == self.cluster[-2]
                and _agrees(self.cluster[-1] - self.cluster[-2], event.period, step_interval)
            ):
                self._extend_train(event, start)
                continue
            if len(self.cluster) < MIN_SHORT_TRAIN:
                continue
            members = self.cluster[-MIN_SHORT_TRAIN:]
            gaps = np.diff(np.asarray(members, dtype=float))
            period = float(np.median(gaps))
            if period < max(MIN_SHORT_PERIOD * step_interval, MIN_SHORT_PERIOD) or not all(
                _agrees(g, period) for g in gaps
            ):
                continue
            self._open(start=members[0], end=members[-1], period=period, source="spikes", members=members, short=True)
            if self.cluster_head is not None and self.cluster_head not in members:
                self.hidden.append(self.cluster_head)

    # -- autocorrelation ----------------------------------------------------------------------
    def process(self, window: Window) -> None:
        """Run the autocorrelation check at each length among the new points that `_checks` names."""
        first = window.first_index + window.new_from
        stop = window.end_index
        for check in _checks(max(first, 1), stop):
            # `check` points seen: the window ends at series index check - 1
            end = window.position(check - 1) + 1
            width = min(check, ACF_WINDOW)
            ceiling = (
                None
                if window.ceiling is None
                else float(window.ceiling[min(max(end - 1 - window.new_from, 0), len(window.ceiling) - 1)])
            )
            self._check(window.steps[end - width : end], window.values[end - width : end], ceiling)

    def _check(self, steps: np.ndarray, values: np.ndarray, ceiling: float | None) -> None:
        found = periodic_lag(values, min_rel=self.profile.sawtooth_min_rel, tolerance=ceiling)
        if found is None:
            self.acf_candidate = None
            return
        lag, p_value = found
        period = float(lag * np.median(np.diff(steps)))
        start = int(steps[0])
        event = next(
            (e for e in reversed(self.events) if int(e.end_step) >= start and _agrees(period, e.period or 0.0)), None
        )
        if event is not None:
            event.end_step = max(int(event.end_step), int(steps[-1]))
            event.details["p_value"] = min(event.details.get("p_value", 1.0), p_value)
            event.summary = self._summary(event)
        elif self.acf_candidate is not None and _agrees(period, self.acf_candidate[0]):
            self._open(
                start=self.acf_candidate[1],
                end=int(steps[-1]),
                period=period,
                source="autocorrelation",
                amplitude=float(np.ptp(values) / 2),
                p_value=p_value,
            )
        self.acf_candidate = (period, start)

    # -- events -------------------------------------------------------------------------------
    def _open(
        self,
        *,
        start: int,
        end: int,
        period: float,
        source: str,
        members: list[int] | None = None,
        amplitude: float | None = None,
        short: bool = False,
        p_value: float | None = None,
        chance: tuple[float, int] | None = None,
    ) -> None:
        same = next(
            (e for e in reversed(self.events) if e.end_step >= start - period and _agrees(period, e.period or 0.0)),
            None,
        )
        if same is not None:
            # the same pattern seen again, or by the other kind of evidence: one event, not two
            same.end_step = max(same.end_step, end)
            if members is not None:
                known = same.details.get("members", [])
                same.details["members"] = sorted(known + [m for m in members if m not in known])
                same.details["source"] = "spikes"
            if p_value is not None:
                same.details["p_value"] = min(same.details.get("p_value", 1.0), p_value)
            same.summary = self._summary(same)
            return
        details: dict[str, Any] = {"source": source}
        if short:
            details["short"] = True
        if members is not None:
            details["members"] = members
        if amplitude is not None:
            details["amplitude"] = amplitude
        if p_value is not None:
            details["p_value"] = p_value
        if chance is not None:
            details["chance"], details["periods_tried"] = chance
        event = Event(
            kind=EventKind.SAWTOOTH,
            metric=self.metric,
            start_step=start,
            end_step=end,
            severity=self.profile.sawtooth_severity,
            score=float(len(members) if members else 0),
            summary="",
            period=period,
            details=details,
        )
        self.events.append(event)
        event.summary = self._summary(event)

    def _summary(self, event: Event) -> str:
        d = event.details
        chance = f" (chance of this regularity p = {d['p_value']:.1g})" if "p_value" in d else ""
        if d["source"] == "spikes":
            event.score = float(len(d["members"]))
            return (
                f"{self.metric} spiked every {format_value(event.period)} steps "
                f"({len(d['members'])} times, steps {format_step(event.start_step)} to "
                f"{format_step(event.end_step)}){chance}; "
                f"a period this regular points at the data loader or a config parameter"
            )
        return (
            f"{self.metric} repeats a zig-zag every {format_value(event.period)} steps "
            f"from step {format_step(event.start_step)} to {format_step(event.end_step)}{chance}; "
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
            "train": self.train,
            "spike_count": self.spike_count,
            "periods_tried": self.periods_tried,
            "first_step": self.first_step,
            "acf_candidate": list(self.acf_candidate) if self.acf_candidate else None,
            "cluster": self.cluster,
            "cluster_head": self.cluster_head,
            "hidden": self.hidden,
            "events": [e.to_dict() for e in self.events],
            "series_start": self.series_start,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.train = [int(s) for s in state["train"]]
        self.spike_count = int(state["spike_count"])
        self.periods_tried = int(state["periods_tried"])
        self.first_step = state["first_step"]
        self.acf_candidate = tuple(state["acf_candidate"]) if state["acf_candidate"] else None
        self.cluster = [int(s) for s in state.get("cluster", [])]
        self.cluster_head = state.get("cluster_head")
        self.hidden = [int(s) for s in state.get("hidden", [])]
        self.events = [Event.from_dict(e) for e in state["events"]]
        self.series_start = state.get("series_start")


def evenly_spaced_share(points: int) -> float:
    """Of every way to place three spikes on `points` logged points, the share evenly spaced: the
    triples (a, a + d, a + 2d), over all choices of three points."""
    if points < 3:
        return 1.0
    evenly = sum(points - 2 * gap for gap in range(1, (points - 1) // 2 + 1))
    return evenly / math.comb(points, 3)


def _checks(first: int, stop: int) -> list[int]:
    """The series lengths in [first, stop] at which the autocorrelation is checked: every
    `ACF_EARLY_EVERY` points from `ACF_FIRST` while shorter than half the window, then every
    `ACF_EVERY` (each check reads up to `ACF_WINDOW` points; the early ones are short and cheap)."""
    early = [c for c in range(ACF_FIRST, ACF_WINDOW // 2, ACF_EARLY_EVERY) if first <= c <= stop]
    late_from = max(first, ACF_WINDOW // 2)
    late = range(((late_from + ACF_EVERY - 1) // ACF_EVERY) * ACF_EVERY, stop + 1, ACF_EVERY)
    return early + list(late)


@lru_cache(maxsize=64)
def _detrend_basis(n: int) -> np.ndarray:
    """Orthonormal basis of cubic splines with `DETREND_PIECES` equal pieces over n points (a
    truncated power basis): projecting on it is a least-squares fit of the trend."""
    t = np.linspace(0.0, 1.0, n)
    knots = np.arange(1, DETREND_PIECES) / DETREND_PIECES
    columns = [np.ones(n), t, t**2, t**3, *(np.clip(t - k, 0.0, None) ** 3 for k in knots)]
    q, _ = np.linalg.qr(np.column_stack(columns))
    return q


def _fit_period(members: list[int], guess: float) -> float:
    """Least-squares period of spike steps that fall on beats of about `guess` (some beats may
    have gone unseen)."""
    steps = np.asarray(members, dtype=float)
    beats = np.round((steps - steps[0]) / guess)
    if beats[-1] <= 0:
        return guess
    if len(set(beats.tolist())) < 2:
        return guess
    slope = float(np.polyfit(beats, steps, 1)[0])
    return round(slope, 6)  # whole steps stay whole: 6, not 5.999999999999998


def periodic_lag(values: np.ndarray, *, min_rel: float, tolerance: float | None) -> tuple[float, float] | None:
    """Lag (in points, sub-point precision) of a clear autocorrelation peak and the chance of
    its periodogram peak under noise, or None.

    The window is detrended with a cubic spline (`_detrend_basis`) so the falling loss does not
    masquerade as a long period; a peak counts when it follows a real trough (a zig-zag, not a drift), the
    window holds at least `ACF_MIN_CYCLES` periods, and the periodogram at that period stands
    so far above the spectrum around it that noise would put a peak there with a chance below
    `MAX_CHANCE` over all the frequencies looked at (a periodogram ordinate of noise is
    exponential; its median is ln 2 times its mean).
    """
    n = len(values)
    if n < ACF_FIRST:
        return None
    basis = _detrend_basis(n)
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
    found = float(lag + shift)
    power = np.abs(np.fft.rfft(residual - residual.mean())) ** 2
    k = round(n / found)
    peak = float(power[max(k - 1, 1) : k + 2].max())
    around = np.concatenate(
        [power[max(k - SPECTRUM_NEIGHBOURS, 1) : max(k - 1, 1)], power[k + 2 : k + 2 + SPECTRUM_NEIGHBOURS]]
    )
    floor = float(np.median(around)) if len(around) else 0.0
    if floor <= 0.0:
        return None if peak <= 0.0 else (found, 0.0)
    p_value = min(1.0, (len(power) - 1) * 3 * math.exp(-math.log(2) * peak / floor))
    return (found, p_value) if p_value <= MAX_CHANCE else None


def without_its_teeth(events: list[Event], sawtooths: list[Event]) -> list[Event]:
    """`events` of one series less those that are a sawtooth's own teeth misread one at a time.

    A loss that dives at each epoch's first batches (the data order: it has seen them) and climbs
    back reads, tooth by tooth, as "too good" (each dive below what the task allows), as a
    divergence (each climb from a dive's minimum) or as a level shift (the climb that stays till
    the next dive). Once the series' sawtooth is found, from one period before it on:
    * a "too good" episode shorter than a period is a dive, not a loss that holds there (a leak
      holds);
    * a rise divergence, or a level shift lasting less than a period, no larger than the
      sawtooth's own swing is a climb back (a real divergence outgrows the swing and is kept).
    A sawtooth without a measured swing (found from a spike train) leaves rises and shifts alone.
    """
    if not sawtooths:
        return events
    kept = []
    for event in events:
        if not any(_is_tooth(event, saw) for saw in sawtooths):
            kept.append(event)
    return kept


def _is_tooth(event: Event, saw: Event) -> bool:
    period = float(saw.period or 0)
    if period <= 0 or event.start_step < saw.start_step - period:
        return False
    swing = saw.details.get("amplitude")
    if event.kind == EventKind.TOO_GOOD:
        return event.end_step - event.start_step < period
    if not isinstance(swing, int | float) or not math.isfinite(swing):
        return False
    if event.kind == EventKind.DIVERGENCE and event.details.get("cause") == "rise":
        return _size(event.details.get("peak"), event.details.get("minimum")) <= swing
    if event.kind == EventKind.LEVEL_SHIFT and event.end_step - event.start_step < period:
        return _size(event.details.get("after"), event.details.get("before")) <= swing
    return False


def _size(a: Any, b: Any) -> float:
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return math.inf
    return abs(float(a) - float(b))
