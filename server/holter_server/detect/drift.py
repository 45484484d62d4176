"""Drift: a vital sign creeping the wrong way from its best level, named while it is still small.

The failures that cost the most compute are slow: a loss climbing for a thousand steps, an eval
loss turning up, throughput bleeding away, a logprob mismatch drifting off its floor, a gradient
norm growing toward inf. No point is an outlier and no step is abrupt, so the spike, level-shift
and rise detectors stay quiet. This detector reads the series' history at a resolution that
follows its length and asks, in the kind's bad direction (`KindProfile.direction`):

* **how far from the best**: the current level against the best level the series has reached
  (a running best that never forgets the minimum), in noise units and as a share of the best;
* **how persistently**: Mann–Kendall's trend test over the history since the best says the
  series has been rising (a few evals: each one above the best by twice the largest bump on the
  way down), not one step up (a level shift: no single move may make most of the rise), and the
  rise has lasted a tenth of the run's age when it began (fifty steps are a blip at step 10,000);
* **from where**: a signal that should hold a level (throughput, step time, a settled norm, the
  mismatch) drifts away from a level it held; one rising from its first points, or as soon as it
  reached its best, follows the run's schedule (a window or batch-size warm-up, a gradient norm
  growing as the learning rate decays). A loss is judged once it has come down from where it
  started (a warm-up bump is not a drift);
* **whether it goes on**: the event ends when the drift stops (no upward trend over its recent
  bins) or reverses (back near its best); while it still rises it carries the Theil–Sen slope.
  A drift that came back within the run's age was a hump: a `spike` (information) when it came
  back within a few hundred steps, nothing when slower; a new rise must outgrow such humps.

History: points are kept in *bins* of `width` consecutive finite points (means of the raw points
while bins are narrower than a baseline block, then means of the blocks' medians, so a one-point
spike cannot move a bin far); when `MAX_BINS` bins are full, neighbours merge and the width
doubles. An eval loss logged 5-80 times keeps one eval per bin; a series of a million points keeps
128-256 bins of 4,096-8,192. Bins depend only on the points' series-wide indices, never on how they were
batched, so live detection and a batch analysis find the same events. Judging happens when a bin
completes: O(1) per point amortised, O(`MAX_BINS`) per judgement.

Noise is measured where it matters, on the bins themselves: the robust σ of their second
differences (a smooth trend or curve cancels out), floored at half the print quantum. A level
that does not stand clear of zero in those units (an RL loss swinging around 0) has no best to
rise from and is not judged. Thresholds per kind come from the vocabulary's profiles
(`drift_min_rel`: the smallest rise named, as a share of the best; `drift_critical_rel`: the
rise that makes a drift still under way critical).

Pure: numbers in, events out.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import numpy as np

from holter_server.detect.baseline import BLOCK, MAD_TO_SIGMA
from holter_server.detect.ceiling import FLOOR_FACTOR
from holter_server.detect.events import Event, format_step, format_value
from holter_server.detect.spikes import MAX_SPIKE_STEPS
from holter_server.detect.window import Window
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.profiles import KindProfile
from holter_server.vocabulary.severities import Level, rank

# history resolution: between MAX_BINS / 2 and MAX_BINS bins cover the series
MAX_BINS = 256
# judged on at most this many bins since the best (the recent ones)
TREND_BINS = 64
# a drift is judged from this many bins after its best on, from a best with this many bins before
# it: an eval loss (each eval an average already) two evals up after two; a dense series' first
# points are start-up noise and its bins one point each at first, so it needs more
MIN_BINS_AFTER = {"eval_loss": 2}
MIN_BINS_AFTER_DENSE = 6
MIN_POINTS_BEFORE = {"eval_loss": 2}
MIN_POINTS_BEFORE_DENSE = 2 * BLOCK  # the baseline's own cold start
# ... and once it has lasted this share of the run's age at its best (steps from the first point)
AGE_SHARE = 0.1
# ... setting off this far into the series' life at least: a metric climbing from its first points
# on is following a schedule (a sequence-length or window warm-up, a batch-size ramp), not drifting
HISTORY_SHARE = 0.25
# the rise must clear this many noise units (of the current level against the best, both medians
# of bins) and the kind's share of the best
OPEN_NOISE_UNITS = 5.0
# ... fewer for an eval loss: each eval is an average over a whole set, and its few bins since the
# best measure their noise high (a curve's bend counts in three second differences of seven)
OPEN_NOISE_UNITS_BY_KIND = {"eval_loss": 3.0}
# the largest lag-one autocorrelation read from the bins (a smooth trend left in them reads as one)
MAX_WANDER_RHO = 0.5
# σ of a median of n values ≈ this x σ / √n
MEDIAN_EFFICIENCY = 1.25
# Mann–Kendall's Z over the bins since the best (one-sided p ≈ 0.05 at 1.64)
OPEN_TREND_Z = 1.64
# no single move, across this many smoothed bins (one for bins of one point), may make more than
# this share of the rise
STEP_BINS = 2
MAX_STEP_SHARE = 0.6
# the best must stand this many noise units (of one bin) clear of zero
CLEAR_OF_ZERO = 3.0
# still rising: Mann–Kendall's Z over the recent bins at least this, or a new high by this many
# noise units
RISING_Z = 1.0
PEAK_NOISE_UNITS = 2.0
RECENT_MIN_BINS = 5
RECENT_MAX_BINS = 16
# points in the trailing median that smooths the level (at least three bins; evals are averages
# already: one)
SMOOTH_POINTS = 8
SMOOTH_MIN_BINS = 3
# the current level: median of up to this many of the newest bins (or points, while bins are narrow)
LEVEL_BINS = 8
LEVEL_POINTS = 32
# the drift set off at the last bin within this share of the threshold, or this many noise units,
# above the best
ONSET_SHARE = 0.3
ONSET_NOISE_UNITS = 2.0
# up to this many bins since the best (a few evals), every one must be above it instead of a trend
# test, by twice the largest rise between two bins on the way down to the best
SHORT_BINS = 4
SHORT_BUMP_FACTOR = 2.0
# ... and past them, the rise over the median of the best eval and its neighbours at least this share
AROUND_SHARE = 0.5
# ... the level then the lowest of the last this many, all above the best by this share of the rise named
SHORT_LEVEL_BINS = 2
SHORT_FIRST_SHARE = 0.5
# a loss's rise must also be this share of the way it came down from its first level
RANGE_SHARE = 0.005
# a loss is judged once it has come down from its first level by this many times the rise named
DESCENT_FACTOR = 3.0
# kinds expected to fall (a loss); every other kind should hold a level, and a drift leaves a
# level it held for at least this share of the series' life
FALLING_KINDS = frozenset({"loss", "eval_loss"})
HELD_SHARE_LEVEL = 0.25
# a gradient (or activation) norm grows with the learning rate's decay from its peak, soon after
# warm-up, for the whole run: a failure's growth sets off after a longer stable stretch
HELD_SHARE = {"grad_norm": 0.4, "activation_norm": 0.4}
# a drift that came back within this share of the run's age at its onset was a hump; a new rise
# must outgrow the humps of the last `RECENT_HUMPS_SHARE` of the series' life
HUMP_SHARE = 1.0
RECENT_HUMPS_SHARE = 0.25
MAX_HUMPS = 8
# below this share of the threshold again the drift has reversed
REVERSED_SHARE = 0.5
# noise units reported as "over N" beyond this (the noise is then only a floor)
Z_CAP = 1000.0

# what a person should do about a drift of each kind
ADVICE = {
    "loss": "the run is getting worse: its best checkpoint is near step {best_step}; look at the learning rate, "
    "the data and the gradient norm",
    "eval_loss": "the model is getting worse on held-out data (overfitting, or a shift in the data): its best "
    "checkpoint is near step {best_step}",
    "grad_norm": "divergence in slow motion: lower the learning rate or tighten clipping before it blows up",
    "activation_norm": "activations growing without bound overflow ahead: check the learning rate and normalisation",
    "logprob_mismatch": "the rollout engine and the trainer disagree more and more: check the weight sync, kernels "
    "and precision",
    "throughput": "a systems problem (memory fragmentation, a slowing data loader, throttling): every step costs more",
    "step_time": "a systems problem (memory fragmentation, a slowing data loader, throttling): every step costs more",
}


def _median(values: list[float]) -> float:
    """Median of a short list (numpy's per-call overhead is the whole cost of a few values)."""
    ordered = sorted(values)
    count = len(ordered)
    return (ordered[(count - 1) // 2] + ordered[count // 2]) / 2


@cache
def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i < j) of n values (`np.triu_indices` costs more than the test it serves)."""
    return np.triu_indices(n, 1)


def mann_kendall_z(values: np.ndarray) -> float:
    """Mann–Kendall's trend statistic Z (positive: rising), with the tie-free variance; 0 under 3 values."""
    n = len(values)
    if n < 3:
        return 0.0
    i, j = _pairs(n)
    s = float(np.sign(values[j] - values[i]).sum())
    variance = n * (n - 1) * (2 * n + 5) / 18.0
    if s > 0:
        return (s - 1) / math.sqrt(variance)
    if s < 0:
        return (s + 1) / math.sqrt(variance)
    return 0.0


def theil_sen_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Median of the pairwise slopes (robust to outliers); 0 under 2 points."""
    n = len(x)
    if n < 2:
        return 0.0
    i, j = _pairs(n)
    dx = x[j] - x[i]
    ok = dx != 0
    return float(np.median((y[j] - y[i])[ok] / dx[ok])) if ok.any() else 0.0


def _share(value: float, best: float) -> str:
    """' (+18%)': the change from the best as a share of it."""
    return f" ({100 * (value - best) / abs(best):+.0f}%)" if best else ""


def bin_noise(values: np.ndarray) -> float:
    """Robust σ of bin values around their local trend: from second differences (a straight or
    gently curving level cancels out), or first differences with fewer than three bins."""
    if len(values) >= 3:
        d2 = values[2:] - 2 * values[1:-1] + values[:-2]
        return MAD_TO_SIGMA * float(np.median(np.abs(d2))) / math.sqrt(6.0)
    if len(values) >= 2:
        return MAD_TO_SIGMA * float(np.median(np.abs(np.diff(values)))) / math.sqrt(2.0)
    return 0.0


def wander_factor(values: np.ndarray) -> float:
    """How much wider the noise of a mean of consecutive bins is than for independent ones: with
    lag-one autocorrelation ρ, √((1 + ρ) / (1 − ρ)). For AR(1) noise the variance of second
    differences over that of (slope-free) first differences is 3 − ρ; robust σs of both give ρ."""
    if len(values) < 8:
        return 1.0
    d1 = np.diff(values)
    d2 = np.diff(d1)
    s1 = float(np.median(np.abs(d1 - np.median(d1))))
    s2 = float(np.median(np.abs(d2)))
    if s1 <= 0:
        return 1.0
    rho = min(max(3.0 - (s2 / s1) ** 2, 0.0), MAX_WANDER_RHO)
    return math.sqrt((1 + rho) / (1 - rho))


class DriftDetector:
    """A sustained move in the kind's bad direction away from the series' best level."""

    def __init__(self, metric: str, profile: KindProfile) -> None:
        self.metric = metric
        self.profile = profile
        self.enabled = profile.drift_min_rel is not None
        self.sign = profile.direction  # values are read as sign * value: up is bad
        self.min_after = MIN_BINS_AFTER.get(profile.name, MIN_BINS_AFTER_DENSE)
        self.min_before = MIN_POINTS_BEFORE.get(profile.name, MIN_POINTS_BEFORE_DENSE)
        self.width = 1
        self.start_index: int | None = None  # series index of the first point binned
        self.first_step: int | None = None
        # complete bins: value (bad direction up), first and last step
        self.values: list[float] = []
        self.first_steps: list[int] = []
        self.last_steps: list[int] = []
        self.smoothed: list[float] = []
        # the best smoothed level and its bin
        self.best = math.inf
        self.best_bin = -1
        # the bin being filled: its raw points (narrow bins) or block medians (wide bins)
        self.part: list[float] = []
        self.part_first: int | None = None
        self.quantum = 0.0
        self.floor: float | None = None  # given with every call (the healthy ceiling keeps it)
        self.first_level: float | None = None  # the first smoothed level (bad direction up)
        self.humps: list[list[float]] = []  # drifts that came back: [step back, rise]
        self.open: dict[str, Any] | None = None
        self.events: list[Event] = []

    # -- feeding ---------------------------------------------------------------------------

    def process(
        self,
        window: Window,
        first_block: int,
        block_medians: np.ndarray,
        settled_at: int | None = None,
        floor: float | None = None,
    ) -> None:
        """Feed the new points of `window` and the baseline blocks they completed (numbered
        from `first_block`). `settled_at`: for norms, the series index from which the level has
        settled after its growth from initialisation (None: not yet; ignored for other kinds).
        `floor`: for a signal with a healthy ceiling, its route's own floor once measured."""
        if not self.enabled:
            return
        self.floor = floor
        first = window.first_index + window.new_from
        stop = window.end_index
        if self.start_index is None:
            begin = first
            if self.profile.rise_warmup_factor is not None:
                if settled_at is None:
                    return
                begin = max(first, settled_at)
            # aligned on a block, so that wide bins hold whole blocks
            self.start_index = -(-begin // BLOCK) * BLOCK
        quanta = window.quantum
        if len(quanta):
            known = quanta[quanta > 0]
            if len(known):
                self.quantum = float(known.min())
        index = max(first, self.start_index)
        # narrow bins: raw points, a bin's worth at a time (only the first MAX_BINS * BLOCK / 2 points)
        if self.width < BLOCK and index < stop:
            lo = window.position(index)
            raw = (self.sign * window.values[lo:]).tolist()
            raw_steps = window.steps[lo:].tolist()
            i = 0
            while self.width < BLOCK and i < len(raw):
                take = max(self.width - len(self.part), 1)
                self._add_items(raw[i : i + take], raw_steps[i], raw_steps[min(i + take, len(raw)) - 1])
                i += take
            index += i
        if self.width < BLOCK or not len(block_medians):
            return
        # wide bins: the baseline's block medians, each block once, in order (a block completes
        # with all its points in the window)
        skip = max(self.start_index, self._next_index()) // BLOCK - first_block
        if skip >= len(block_medians):
            return
        medians = (self.sign * block_medians[max(skip, 0) :]).tolist()
        starts = (first_block + max(skip, 0) + np.arange(len(medians))) * BLOCK - window.first_index
        first_steps = window.steps[starts].tolist()
        last_steps = window.steps[starts + BLOCK - 1].tolist()
        i = 0
        while i < len(medians):
            take = max(self.width // BLOCK - len(self.part), 1)
            self._add_items(medians[i : i + take], first_steps[i], last_steps[min(i + take, len(medians)) - 1])
            i += take

    @property
    def smooth(self) -> int:
        """Bins in the trailing median that smooths the level: about `SMOOTH_POINTS` points, odd."""
        if self.profile.name == "eval_loss":
            return 1
        return max(SMOOTH_MIN_BINS, SMOOTH_POINTS // self.width + 1)

    def _next_index(self) -> int:
        """Series index of the first point not yet binned."""
        start = self.start_index or 0
        return start + len(self.values) * self.width + len(self.part) * (1 if self.width < BLOCK else BLOCK)

    def _add_items(self, values: list[float], first_step: int, last_step: int) -> None:
        """Put the next raw points (narrow bins) or block medians (wide bins) into the bin being
        filled, at most as many as complete it; judge when it completes."""
        if self.first_step is None:
            self.first_step = first_step
        if not self.part:
            self.part_first = first_step
        self.part.extend(values)
        per_bin = self.width // BLOCK if self.width >= BLOCK else self.width
        if len(self.part) < per_bin:
            return
        # an exact sum: the same bin value however its items were split between calls
        self.values.append(math.fsum(self.part) / len(self.part))
        self.first_steps.append(int(self.part_first if self.part_first is not None else first_step))
        self.last_steps.append(int(last_step))
        self.part, self.part_first = [], None
        self.smoothed.append(_median(self.values[-self.smooth :]))
        if self.first_level is None and len(self.smoothed) >= self.smooth:
            self.first_level = self.smoothed[-1]
        if self.smoothed[-1] < self.best and len(self.smoothed) > self._first_eligible():
            self.best, self.best_bin = self.smoothed[-1], len(self.smoothed) - 1
        self._judge()
        if len(self.values) >= MAX_BINS:
            self._merge()

    def _merge(self) -> None:
        """Neighbouring bins merge (mean of the two), the width doubles."""
        v = np.asarray(self.values)
        self.values = ((v[0::2] + v[1::2]) / 2).tolist()
        self.first_steps = self.first_steps[0::2]
        self.last_steps = self.last_steps[1::2]
        self.width *= 2
        if self.open is not None:
            self.open["best_bin"] //= 2
        self._smooth_all()

    def _smooth_all(self) -> None:
        """The smoothed level of every bin, and the best of them, from the bins."""
        self.smoothed = [_median(self.values[max(0, i - self.smooth + 1) : i + 1]) for i in range(len(self.values))]
        self.best, self.best_bin = math.inf, -1
        for i, value in enumerate(self.smoothed):
            if value < self.best and i >= self._first_eligible():
                self.best, self.best_bin = value, i

    def _min_rel(self) -> float:
        """The smallest rise named, as a share of the best. A mismatch route whose own floor is a
        sizeable share of the tolerance (a native kernel's gap) wanders with the policy within the
        healthy ceiling's band, `FLOOR_FACTOR` times its floor; one near zero must hold it."""
        p = self.profile
        rel = p.drift_min_rel or 0.0
        if self.floor is not None and p.abs_tolerance and abs(self.floor - p.healthy_level) >= p.abs_tolerance / 10:
            rel = max(rel, FLOOR_FACTOR - 1.0)
        return rel

    def _descent_need(self, need: float) -> float:
        """The rise a loss's descent is measured against: an eval loss (no warm-up bump in a few
        evals) against the kind's share of the best alone, not the noise its bend inflates."""
        if self.profile.name == "eval_loss":
            return self._min_rel() * abs(self.best) if math.isfinite(self.best) else need
        return need

    def _first_eligible(self) -> int:
        """The first bin that may hold the best: one with a full smoothing window and history
        before it (a dense series' first points are start-up noise)."""
        return max(self.smooth - 1, -(-self.min_before // self.width))

    # -- judging ---------------------------------------------------------------------------

    def _judge(self) -> None:
        """Judge the series as it stands when a bin completes."""
        s = self.smoothed
        k = len(s) - 1
        best_j, best = self.best_bin, self.best
        open_ = self.open
        if open_ is not None and best_j == k and best < open_["best"] - 1e-12 * abs(open_["best"]):
            self._close(open_, "reversed")  # a new best: the drift is undone
            open_ = None
        m = k - best_j
        if self.floor is not None:
            # a signal with a healthy ceiling (the logprob mismatch): its route's own floor, measured
            # over its first points (ceiling.py), is where it should stay; a lower best is luck
            best = max(best, self.sign * self.floor)
        if open_ is None and (best_j < 0 or m < self.min_after or s[k] - best < self._min_rel() * abs(best)):
            return  # (cheap tests first: most bins of a healthy series stop here)
        if m < SHORT_BINS:
            q = min(max(m, 1), SHORT_LEVEL_BINS)
            level = min(self.values[k - q + 1 :])  # a few evals: the last ones all above
        else:
            q = min(max((m + 1) // 2, self.smooth), max(LEVEL_BINS, LEVEL_POINTS // self.width), m + 1)
            level = _median(self.values[k - q + 1 :])
        rise = level - best
        best_value = self.sign * best  # in the metric's own units
        # the noise of the bins since the best (the descent before it curves, and would count as noise)
        lo = max(best_j, k - TREND_BINS) if m >= 2 else max(0, best_j - 2)
        recent = np.asarray(self.values[lo:])
        spread = max(bin_noise(recent), 0.5 * self.quantum, 1e-6 * abs(best), 1e-300)
        # the noise of the difference between two medians: the current level's (q bins) and the best's;
        # bins whose noise wanders (autocorrelated) are fewer independent ones than they seem
        noise = (
            spread
            * MEDIAN_EFFICIENCY
            * math.sqrt(1 / q + 1 / self.smooth)
            * (1.0 if self.profile.name == "eval_loss" else wander_factor(recent))
        )
        if not (best_value > 0 and abs(best) >= CLEAR_OF_ZERO * spread):
            if open_ is not None:
                self._update(open_, level, rise, noise, rising=False)
            return
        if m < SHORT_BINS:
            # a few evals since the best say little about their noise (a single second difference);
            # the largest rise between two evals on the way down to the best does: the turn must
            # be twice that
            descent = np.asarray(self.values[max(0, best_j - TREND_BINS) : best_j + 1])
            bump = float(np.max(np.diff(descent))) if len(descent) > 1 else 0.0
            need = max(SHORT_BUMP_FACTOR * bump, self._min_rel() * abs(best))
        else:
            need = max(
                OPEN_NOISE_UNITS_BY_KIND.get(self.profile.name, OPEN_NOISE_UNITS) * noise, self._min_rel() * abs(best)
            )
        lately = self.last_steps[k] - RECENT_HUMPS_SHARE * (self.last_steps[k] - (self.first_step or 0))
        humps = [rise for back, rise in self.humps if back >= lately]
        if humps:
            # a rise no larger than the humps it recently came back from is no news (the teeth of a
            # sawtooth, a wobbling level)
            need = max(need, *humps)
        if self.profile.rise_min_range and self.first_level is not None:
            # a loss near zero (memorised) triples on a hump of nothing: the rise must also be a
            # share of the way it came down
            need = max(need, RANGE_SHARE * (self.first_level - best))
        if open_ is None:
            self._maybe_open(best_j, best, level, rise, noise, need)
        else:
            self._follow(open_, level, rise, noise, need)

    def _maybe_open(self, best_j: int, best: float, level: float, rise: float, noise: float, need: float) -> None:
        k = len(self.values) - 1
        onset_j = self._onset(best_j, best, noise, need)
        if self.refusal(best_j, onset_j, best, rise, noise, need) is not None:
            return
        onset_step = self.last_steps[onset_j]
        self.open = {
            "best": best,
            "best_step": self._bin_step(best_j),
            "best_bin": best_j,
            "onset_step": onset_step,
            "detected_step": self.last_steps[k],
            "state": "rising",
            "peak": level,
            "peak_step": self.last_steps[k],
            "severity": Level.INFO,
        }
        event = Event(
            kind=EventKind.DIVERGENCE,
            metric=self.metric,
            start_step=onset_step,
            end_step=self.last_steps[k],
            severity=Level.INFO,
            score=0.0,
            summary="",
            peak_step=self.last_steps[k],
            details={"cause": "drift"},
        )
        self.events.append(event)
        self._update(self.open, level, rise, noise, rising=True)

    def _onset(self, best_j: int, best: float, noise: float, need: float) -> int:
        """Where the drift set off: the last bin still near the best (the best itself may lie far
        back in a flat stretch, where the noise happened to put it)."""
        near = best + min(ONSET_SHARE * need, ONSET_NOISE_UNITS * noise)
        k = len(self.smoothed) - 1
        return next((j for j in range(k, best_j - 1, -1) if self.smoothed[j] <= near), best_j)

    def refusal(self, best_j: int, onset_j: int, best: float, rise: float, noise: float, need: float) -> str | None:
        """Why the rise as it stands is not (yet) a drift, or None when it is one."""
        k = len(self.values) - 1
        if rise < need:
            return "smaller than the noise or the kind's share of the best"
        onset_step = self.last_steps[onset_j]
        first = self.first_step if self.first_step is not None else onset_step
        life = self.last_steps[k] - first
        if onset_step - first < HISTORY_SHARE * life:
            return "climbing from its first points on: a schedule"
        if (
            self.profile.name in FALLING_KINDS
            and self.first_level is not None
            and self.first_level - best < DESCENT_FACTOR * self._descent_need(need)
        ):
            return "not yet come down from where it started: still warming up"
        if self.profile.name not in FALLING_KINDS:
            # a signal that should hold its level (throughput, a settled norm, the mismatch) drifts
            # away from a level it held: one that rises as soon as it reached its best (a gradient
            # norm growing as the learning rate decays, a step time following a window warm-up)
            # follows the run's schedule
            near = best + min(ONSET_SHARE * need, ONSET_NOISE_UNITS * noise)
            entry_j = next(j for j in range(self._first_eligible(), onset_j + 1) if self.smoothed[j] <= near)
            if onset_step - self.first_steps[entry_j] < HELD_SHARE.get(self.profile.name, HELD_SHARE_LEVEL) * life:
                return "rising as soon as it reached its best: a schedule"
        # (a falling kind has been no better since its best; a level kind may sit near its best long
        # before it sets off)
        since_step = self._bin_step(best_j) if self.profile.name in FALLING_KINDS else onset_step
        if self.last_steps[k] - since_step < AGE_SHARE * (since_step - first):
            return "too short for the run's age"
        since = np.asarray(self.values[max(best_j, k - TREND_BINS + 1) :])
        if len(since) <= SHORT_BINS:
            # a few evals: every one since the best above it (the first by a share of the rise
            # named, as a turn sets off slowly), none far below the one before
            if not (np.all(since[1:] - best >= SHORT_FIRST_SHARE * need) and np.all(np.diff(since[1:]) > -need)):
                return "not above its best at every eval since"
        elif mann_kendall_z(since) < OPEN_TREND_Z:
            return "no trend"
        elif self.smooth == 1 and best_j >= 1:
            # evals one by one: the lowest of a flat stretch is its luckiest; the rise must also
            # show against the level around it (the median of it and its neighbours)
            around = _median(self.values[best_j - 1 : best_j + 2])
            if rise - (around - best) < AROUND_SHARE * need:
                return "no rise over the level around its best"
        smoothed = np.asarray(self.smoothed[best_j:])
        if self.profile.name == "eval_loss" and len(smoothed) > SHORT_BINS:
            # one eval off (the best itself a low one, a high one after it) is no move of the level
            smoothed = np.asarray([_median(list(smoothed[max(0, i - 1) : i + 2])) for i in range(len(smoothed))])
        span = 1 if self.width == 1 else STEP_BINS  # a step inside a bin of several points shows in two
        if len(smoothed) > SHORT_BINS and float(np.max(smoothed[span:] - smoothed[:-span])) > MAX_STEP_SHARE * rise:
            return "one move makes most of it: a level shift"
        return None

    def _follow(self, open_: dict[str, Any], level: float, rise: float, noise: float, need: float) -> None:
        """The drift under way (or paused): still rising, stopped, reversed, or rising again."""
        k = len(self.values) - 1
        best_bin = max(0, min(open_["best_bin"], k))
        recent = min(max((k - best_bin) // 2, RECENT_MIN_BINS), RECENT_MAX_BINS)
        trend = mann_kendall_z(np.asarray(self.values[max(best_bin, k - recent + 1) :]))
        if rise < REVERSED_SHARE * need:
            if open_["state"] != "reversed":
                self._close(open_, "reversed")
            return
        if open_["state"] == "rising":
            self._update(
                open_, level, rise, noise, rising=trend >= RISING_Z or level > open_["peak"] + PEAK_NOISE_UNITS * noise
            )
        elif trend >= OPEN_TREND_Z and level > open_["peak"] + PEAK_NOISE_UNITS * noise:
            open_["state"] = "rising"  # paused, now rising again past where it had got to
            self._update(open_, level, rise, noise, rising=True)
        else:
            self._update(open_, level, rise, noise, rising=False)

    def _close(self, open_: dict[str, Any], state: str) -> None:
        open_["state"] = state
        event = self.events[-1]
        event.details["ongoing"] = False
        event.details["state"] = state
        if state == "reversed":
            event.severity = min(open_["severity"], Level.WARNING, key=rank)
            first = self.first_step if self.first_step is not None else open_["onset_step"]
            back = self.last_steps[-1]
            if back - open_["onset_step"] < HUMP_SHARE * (open_["onset_step"] - first):
                # up and back again within the run's age: an excursion that recovered (a warm-up
                # bump, a slow wobble), not the failure that creeps. Back within a few hundred
                # steps it is a spike however wide; a slower wobble is no event at all
                self.humps = [*self.humps, [back, float(open_["peak"] - open_["best"])]][-MAX_HUMPS:]
                if back - open_["onset_step"] > MAX_SPIKE_STEPS:
                    self.events.pop()
                    self.open = None
                    return
                event.kind = EventKind.SPIKE
                event.severity = Level.INFO
                event.details["hump"] = True
                event.details["recovered_step"] = back
        event.summary = self._summary(event)
        if state == "reversed":
            self.open = None

    def _update(self, open_: dict[str, Any], level: float, rise: float, noise: float, rising: bool) -> None:
        k = len(self.values) - 1
        event = self.events[-1]
        step = self.last_steps[k]
        if rising:
            event.end_step = step
            if level >= open_["peak"]:
                open_["peak"], open_["peak_step"] = level, step
        elif open_["state"] == "rising":
            open_["state"] = "stopped"
        best = open_["best"]
        best_value = self.sign * best
        relative = rise / abs(best) if best else 0.0
        z = min(rise / noise, Z_CAP) if noise > 0 else Z_CAP
        p = self.profile
        critical, warn = p.drift_critical_rel, p.drift_warn_rel if p.drift_warn_rel is not None else p.drift_min_rel
        peak_relative = (open_["peak"] - best) / abs(best) if best else 0.0
        if rising and critical is not None and relative >= critical:
            open_["severity"] = Level.CRITICAL
        elif open_["severity"] == Level.INFO and warn is not None and peak_relative >= warn:
            open_["severity"] = Level.WARNING
        event.severity = (
            open_["severity"] if open_["state"] == "rising" else min(open_["severity"], Level.WARNING, key=rank)
        )
        event.peak_step = open_["peak_step"]
        event.score = float(z)
        since = np.asarray(self.values[max(open_["best_bin"], k - TREND_BINS + 1) :])
        steps = np.asarray(self._bin_steps(max(open_["best_bin"], k - TREND_BINS + 1), k + 1), dtype=float)
        recent = min(max(len(since) // 2, RECENT_MIN_BINS), RECENT_MAX_BINS, len(since))
        slope = theil_sen_slope(steps[-recent:], since[-recent:]) if rising else 0.0
        event.details.update(
            {
                "cause": "drift",
                "best": best_value,
                "best_step": open_["best_step"],
                "onset_step": open_["onset_step"],
                "level": self.sign * level,
                "rise": rise,
                "relative": relative,
                "z": float(z),
                "noise": noise,
                "slope_per_step": self.sign * slope,
                "peak": self.sign * open_["peak"],
                "peak_step": open_["peak_step"],
                "last_step": step,
                "detected_step": open_["detected_step"],
                "ongoing": open_["state"] == "rising",
                "state": open_["state"],
            }
        )
        event.summary = self._summary(event)

    def _bin_step(self, j: int) -> int:
        """A bin's step: its middle (the step itself for one point)."""
        return self.first_steps[j] + (self.last_steps[j] - self.first_steps[j]) // 2

    def _bin_steps(self, lo: int, hi: int) -> list[int]:
        return [self._bin_step(j) for j in range(lo, hi)]

    # -- wording ---------------------------------------------------------------------------

    def _summary(self, event: Event) -> str:
        d = event.details
        kind = self.profile.name
        up = self.sign > 0
        best, level, peak = d["best"], d["level"], d["peak"]
        what = self.metric if kind != "eval_loss" or "eval" in self.metric.lower() else f"eval loss {self.metric}"
        z = "over 1,000σ" if d["z"] >= Z_CAP else f"{d['z']:.0f}σ"
        advice = ADVICE.get(kind, "").format(best_step=format_step(d["best_step"]))
        advice = f": {advice}" if advice else ""
        span = d["last_step"] - d["onset_step"]
        if d["onset_step"] - d["best_step"] > 0.1 * span:
            since = f"its best {format_value(best)} (step {format_step(d['best_step'])})"
            over = f"over the {format_step(span)} steps since step {format_step(d['onset_step'])}"
        else:
            since = f"its best {format_value(best)} at step {format_step(d['best_step'])}"
            over = f"over {format_step(span)} steps"
        if d["state"] == "rising":
            unit = 1000 if span >= 20_000 else 100
            rate = abs(d["slope_per_step"]) * unit
            return (
                f"{what} has {'risen' if up else 'fallen'} {format_value(abs(level - best))}{_share(level, best)} "
                f"from {since} {over} ({z}), still {'rising' if up else 'falling'} at {format_value(rate)} "
                f"per {format_step(unit)} steps{advice}"
            )
        head = (
            f"{what} {'rose' if up else 'fell'} {format_value(abs(peak - best))}{_share(peak, best)} from {since} "
            f"to {format_value(peak)} by step {format_step(d['peak_step'])}"
        )
        if d["state"] == "stopped":
            return (
                f"{head}, then stopped {'rising' if up else 'falling'}; {format_value(level)} at step "
                f"{format_step(d['last_step'])} ({z} from its best){advice}"
            )
        if d.get("hump"):
            took = d["recovered_step"] - d["onset_step"]
            return (
                f"{what} {'rose' if up else 'fell'} {format_value(abs(peak - best))}{_share(peak, best)} from "
                f"{format_value(best)} at step {format_step(d['onset_step'])} to {format_value(peak)} by step "
                f"{format_step(d['peak_step'])} and came back by step {format_step(d['recovered_step'])} "
                f"({format_step(took)} steps later): a hump that recovered, not a drift"
            )
        return f"{head}, then came back toward its best ({format_value(level)} at step {format_step(d['last_step'])})"

    # -- state -----------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state, bounded by `MAX_BINS`."""
        return {
            "width": self.width,
            "start_index": self.start_index,
            "first_step": self.first_step,
            "values": self.values,
            "first_steps": self.first_steps,
            "last_steps": self.last_steps,
            "part": self.part,
            "part_first": self.part_first,
            "quantum": self.quantum,
            "first_level": self.first_level,
            "humps": self.humps,
            "open": self.open,
            "events": [e.to_dict() for e in self.events],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.width = int(state["width"])
        self.start_index = state["start_index"]
        self.first_step = state["first_step"]
        self.values = [float(v) for v in state["values"]]
        self.first_steps = [int(s) for s in state["first_steps"]]
        self.last_steps = [int(s) for s in state["last_steps"]]
        self._smooth_all()
        self.part = [float(v) for v in state["part"]]
        self.part_first = state["part_first"]
        self.quantum = float(state["quantum"])
        self.first_level = state["first_level"]
        self.humps = [list(h) for h in state["humps"]]
        self.open = state["open"]
        self.events = [Event.from_dict(e) for e in state["events"]]
