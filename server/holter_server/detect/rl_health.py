"""RL policy health: the signals of a policy-gradient run that go wrong in their own way.

Four rules, each reading one kind of the vocabulary where its profile lists it
(`vocabulary/profiles.py` KINDS: `detectors`, `band_*`, `collapse_*`):

* `kl_band` (kind `kl`, a KL to the old policy per update: PPO's `approx_kl`, verl's
  `actor/ppo_kl`) — the smoothed level held at or above the band PPO fixes (`band_ceiling`, 0.1:
  five times PPO's target of 0.01-0.02) for `band_persist` points: each update moves the policy
  too far. Critical while it has reached `band_critical` (0.5: a blow-up). A KL to the *reference*
  model (GRPO's `kl`, TRL PPO's `objective/kl`) has no band its algorithm fixes: it grows from 0
  (the policy starts as the reference), then by design, per token or summed per sequence, so no
  ceiling fits every run; it is drawn and watched for NaN/±Inf and outliers only (a growth read
  against its own earlier level alarmed on healthy, noisy GRPO runs and was left out).
* `clip_saturation` (kind `clip_fraction`) — held at or above `band_ceiling` (0.3): a large part
  of each update's ratios are clipped away, and with them their gradient.
* `entropy_collapse` (kind `entropy`) — at or below `collapse_share` (a quarter) of its settled
  high (the highest its smoothed level reached) for `band_persist` points, and that far below it
  in noise units; critical at or below `collapse_critical_share` (a tenth). A series that went
  below zero is a differential entropy (a Gaussian policy's), which has no floor at 0: from that
  point on it is not judged, and what it named before stays as information (live, a continuous
  policy's entropy may be named before it crosses zero).
* `reward_collapse` (kind `reward`) — down from its best smoothed level by `collapse_share` (half)
  of what it had gained (its best less the lowest level before it; for a reward that never rose,
  its best's own size) and by `COLLAPSE_NOISE_UNITS` of its level's noise, held for
  `band_persist` points; critical back at or below the low it rose from.

Event kinds. A KL out of its band, a clip fraction saturated and a reward collapsed are
`divergence`s, `details.cause` saying which ("kl_band", "clip_saturation", "reward_collapse") and
the summary naming it: each is a vital sign gone its bad way and held there, as a throughput
bleeding away is, and as divergences they reach chat through the default "divergence and NaN"
rule and fold into one incident with the run's other divergences that set off with them
(analysis/incidents.py). A policy's entropy falling toward 0 has a name of its own,
`entropy_collapse`: nothing runs away, the policy stops exploring, and what a person does about
it (the entropy bonus, the sampling temperature, a higher clip) is not what a divergence asks;
its default rule is "policy entropy collapse" (alerts/rules.py).

Every rule reads the classifier's smoothed level (the median of the last five points,
`baseline.rolling_level`) and noise (the robust σ of `baseline.BlockBaseline`), so one point's
swing never opens an event; `RunTracker` holds the persistence across batches and the running
highs and lows are carried as numbers, so a series fed in any batches gives the same events. An
excursion that came back is a recovered one: a warning at most, information when it lasted
under twice `band_persist` points.

Pure: numbers in, events out.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from holter_server.detect.baseline import BLOCK, LEVEL_POINTS
from holter_server.detect.events import Event, format_step, format_value
from holter_server.detect.runs import RunTracker, RunUpdate
from holter_server.detect.window import Window
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.profiles import KindProfile
from holter_server.vocabulary.severities import Level

# the first points of a series are start-up: no high or low is taken from them
SKIP_POINTS = 2
# every rule judges from the baseline's first block on: the untrained start (a fresh policy's
# first, larger updates, a reward at 0) is no excursion
MIN_POINTS = BLOCK
# a collapse must also clear this many noise units of the smoothed level
COLLAPSE_NOISE_UNITS = 6.0
# σ of the median of `LEVEL_POINTS` points, in units of one point's σ
LEVEL_NOISE = 1.25 / math.sqrt(LEVEL_POINTS)
# the points before an excursion whose median says where it set off from
BEFORE_POINTS = 8
# an excursion back out of the band within this many points of the last is the same one (a KL
# that leaves its band update after update while the learning rate is too high is one problem)
MERGE_POINTS = 4 * BLOCK
# a reward's collapse is a warning once it has also lasted this share of the series' age when it
# set off: per-episode returns dip for a while and come back on healthy runs
REWARD_AGE_SHARE = 0.1

# what a person should do about each
ADVICE = {
    "kl_band": "each update moves the policy too far: lower the learning rate or the update epochs, or set a target KL",
    "clip_saturation": "the clip discards most of each update: lower the learning rate or the update epochs",
    "entropy_collapse": "the policy has turned near-deterministic and stopped exploring: look at the learning "
    "rate, the entropy bonus and the sampling temperature",
    "reward_collapse": "the policy has lost what it learned: look at the KL, the learning rate and the reward "
    "function (a reward that is being gamed, or that changed)",
}


def _start(event: Event) -> int:
    """Where an event of these rules began (they always know: a series' event has steps)."""
    return int(event.start_step or 0)


def _end(event: Event) -> int:
    """Where an event of these rules ended, or the last step it has reached."""
    return int(event.end_step if event.end_step is not None else _start(event))


def _peak(event: Event) -> int:
    """Where an event of these rules was at its worst."""
    return int(event.peak_step if event.peak_step is not None else _end(event))


class _Held:
    """Events where the smoothed level stays out of its band for `band_persist` points."""

    cause = ""
    kind: str = EventKind.DIVERGENCE

    def __init__(self, metric: str, profile: KindProfile) -> None:
        self.metric = metric
        self.profile = profile
        self.persist = profile.band_persist
        self.runs = RunTracker(min_len=self.persist, merge_gap=max(self.persist, MERGE_POINTS))
        self.first_step: int | None = None
        self.events: list[Event] = []

    def out_of_band(self, window: Window, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per new point: whether it is out of the band, and how bad it is (higher is worse)."""
        raise NotImplementedError

    def process(self, window: Window) -> None:
        """Feed the new points of `window`."""
        first = window.first_index + window.new_from
        index = np.arange(first, first + len(window.level))
        if self.first_step is None and len(index):
            self.first_step = window.step_at(first)
        mask, score = self.out_of_band(window, index)
        for update in self.runs.update(mask, first, score=score):
            if update.end < first:  # the excursion ended with the last batch
                self._close(self.events[-1])
                continue
            if update.opened:
                # named where the excursion reached `band_persist` points (in this batch, or it
                # would have opened before): what it is measured against is read there
                named = update.start + self.persist - 1
                self.events.append(self._opened(window, update, named))
                self.record(self.events[-1], window, named - first)
            event = self.events[-1]
            event.end_step = window.step_at(update.end)
            if window.holds(update.peak_index):  # else older than the tail and already recorded
                event.peak_step = window.step_at(update.peak_index)
            d = event.details
            d["peak"] = self.level_of(update.peak_score)
            d["last_level"] = float(window.level[update.end - first])
            d["last_step"] = event.end_step
            d["points"] = update.end - update.start + 1
            d["ongoing"] = update.ongoing
            self.judge(event)
            if not update.ongoing:
                self._close(event)
            else:
                event.summary = self.summary(event)

    def _opened(self, window: Window, update: RunUpdate, named: int) -> Event:
        at = window.position(update.start)
        before = window.values[max(0, at - BEFORE_POINTS) : at]
        return Event(
            kind=self.kind,
            metric=self.metric,
            start_step=window.step_at(update.start),
            end_step=window.step_at(update.end),
            severity=Level.WARNING,
            score=0.0,
            summary="",
            details={
                "cause": self.cause,
                "detected_step": window.step_at(named),
                "before": float(np.median(before)) if len(before) else None,
            },
        )

    def _close(self, event: Event) -> None:
        """An excursion that came back: a warning at most, information when it was short (or a
        reward's: it did not stay down)."""
        d = event.details
        d["ongoing"] = False
        short = int(d.get("points", 0)) < 2 * self.persist
        quiet = short or self.cause == "reward_collapse" or d.get("differential")
        event.severity = Level.INFO if quiet else Level.WARNING
        event.summary = self.summary(event)

    def level_of(self, score: float) -> float:
        """The level a score stands for (scores are levels, or levels negated for a fall)."""
        return float(score)

    def record(self, event: Event, window: Window, position: int) -> None:
        """Keep in the event's details what it is measured against, as it stood at the new point
        at `position`, where it was named."""

    def judge(self, event: Event) -> None:
        """Set the event's severity and score from its details while it is under way."""
        event.severity = Level.WARNING

    def summary(self, event: Event) -> str:
        raise NotImplementedError

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {"runs": self.runs.state(), "first_step": self.first_step, "events": [e.to_dict() for e in self.events]}

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        self.runs.restore(state["runs"])
        self.first_step = state["first_step"]
        self.events = [Event.from_dict(e) for e in state["events"]]


class CeilingBand(_Held):
    """A KL to the old policy per update, or a clip fraction, held at or above the ceiling its
    algorithm fixes (`band_ceiling`); critical while it has reached `band_critical`."""

    def __init__(self, metric: str, profile: KindProfile, cause: str) -> None:
        super().__init__(metric, profile)
        self.cause = cause
        self.ceiling = float(profile.band_ceiling) if profile.band_ceiling is not None else math.inf
        self.early: float | None = None  # the median of the series' first `BLOCK` points

    def out_of_band(self, window: Window, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.early is None and window.end_index >= BLOCK and window.holds(0):
            self.early = float(np.median(window.values[window.position(0) : window.position(BLOCK)]))
        # the untrained start is no excursion: a fresh policy's first updates move it further
        return (window.level >= self.ceiling) & (index >= MIN_POINTS), window.level

    def record(self, event: Event, window: Window, position: int) -> None:
        d = event.details
        d["ceiling"] = self.ceiling
        # the series' first points, once it has had them when the excursion was named
        named = window.first_index + window.new_from + position
        d["early"] = self.early if named >= BLOCK - 1 else None

    def judge(self, event: Event) -> None:
        d = event.details
        critical = self.profile.band_critical
        event.score = float(d["peak"] / self.ceiling) if self.ceiling > 0 else float(d["peak"])
        reached = critical is not None and d["peak"] >= critical
        event.severity = Level.CRITICAL if reached and d["ongoing"] else Level.WARNING

    def summary(self, event: Event) -> str:
        d = event.details
        if d.get("early") is not None:
            before = f"from {format_value(d['early'])} in its first {BLOCK} points "
        elif d.get("before") is not None:
            before = f"from {format_value(d['before'])} "
        else:
            before = ""
        if self.cause == "kl_band":
            what = f"KL to the old policy per update ({self.metric})"
            band = f"above {format_value(self.ceiling)} (PPO keeps it near 0.01-0.02)"
        else:
            what = f"the clip fraction ({self.metric})"
            band = f"above {format_value(self.ceiling)} (a healthy PPO clips a tenth to a fifth)"
        head = f"{what} climbed {before}to {format_value(d['peak'])} by step {format_step(_peak(event))}"
        if d.get("ongoing"):
            return (
                f"{head} and has stayed {band} since step {format_step(_start(event))} "
                f"({format_value(d['last_level'])} at step {format_step(d['last_step'])}): {ADVICE[self.cause]}"
            )
        return (
            f"{head}, {band} from step {format_step(_start(event))}, and came back below by step "
            f"{format_step(_end(event))}"
        )

    def state(self) -> dict[str, Any]:
        return {**super().state(), "early": self.early}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.early = state["early"]


class Collapse(_Held):
    """A fall from the series' settled high that stays: an entropy toward 0, a reward back down.

    The high is the running maximum of the smoothed level (from `SKIP_POINTS` on), and the low the
    lowest level before it, carried as numbers across batches."""

    def __init__(self, metric: str, profile: KindProfile, cause: str) -> None:
        super().__init__(metric, profile)
        self.cause = cause
        self.kind = EventKind.ENTROPY_COLLAPSE if cause == "entropy_collapse" else EventKind.DIVERGENCE
        self.share = float(profile.collapse_share) if profile.collapse_share is not None else 0.0
        self.high = -math.inf
        self.high_step = 0
        self.high_noise = math.inf  # the noise where the high was set: a fall widens its own
        self.low = math.inf
        self.low_at_high = math.inf
        self.negative = False  # an entropy that went below zero is a differential one: not judged
        # per new point of the last batch: the high and the low it was judged against
        self._highs = np.empty(0)
        self._high_steps = np.empty(0, dtype=np.int64)
        self._lows = np.empty(0)

    def out_of_band(self, window: Window, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        level = window.level
        steps = window.steps[window.new_from :]
        eligible = index >= SKIP_POINTS
        highs = np.maximum.accumulate(np.concatenate([[self.high], np.where(eligible, level, -np.inf)]))
        raised = highs[1:] > highs[:-1]
        highs = highs[1:]
        at = np.maximum.accumulate(np.where(raised, np.arange(len(level)), -1))
        high_steps = np.where(at >= 0, steps[np.maximum(at, 0)], self.high_step)
        lows = np.minimum.accumulate(np.concatenate([[self.low], np.where(eligible, level, np.inf)]))[1:]
        low_at_high = np.where(at >= 0, lows[np.maximum(at, 0)], self.low_at_high)
        high_noise = np.where(at >= 0, window.scale[np.maximum(at, 0)], self.high_noise)
        # the noise where the high was set, or now if wider (a level falls from a lucky stretch)
        noise = LEVEL_NOISE * np.maximum(high_noise, window.scale)
        drop = highs - level
        with np.errstate(invalid="ignore"):
            if self.cause == "entropy_collapse":
                values = window.values[window.new_from :]
                negative = np.logical_or.accumulate(np.concatenate([[self.negative], values < 0]))[1:]
                out = ~negative & (highs > 0) & (level <= self.share * highs) & (drop >= COLLAPSE_NOISE_UNITS * noise)
                if len(negative):
                    self.negative = bool(negative[-1])
            else:
                span = np.maximum(highs - low_at_high, np.abs(highs))
                out = (drop >= self.share * span) & (drop >= COLLAPSE_NOISE_UNITS * noise) & (span > 0)
            out &= (index >= MIN_POINTS) & np.isfinite(highs)
        if len(level):
            self.high, self.high_step = float(highs[-1]), int(high_steps[-1])
            self.high_noise = float(high_noise[-1])
            self.low, self.low_at_high = float(lows[-1]), float(low_at_high[-1])
        self._highs, self._high_steps, self._lows = highs, high_steps, low_at_high
        return out, -level

    def level_of(self, score: float) -> float:
        return -float(score)

    def process(self, window: Window) -> None:
        super().process(window)
        if self.negative:
            self._differential()

    def _differential(self) -> None:
        """The entropy went below zero: a Gaussian policy's differential entropy, whose fall
        named before is no collapse toward a floor. Its events are kept, as information."""
        for event in self.events:
            if event.details.get("differential"):
                continue
            event.details["differential"] = True
            event.severity = Level.INFO
            event.summary = self.summary(event)

    def record(self, event: Event, window: Window, position: int) -> None:
        d = event.details  # the high and low it fell from, as they stood when it was named
        d["high"], d["high_step"] = float(self._highs[position]), int(self._high_steps[position])
        d["low"] = float(self._lows[position])

    def judge(self, event: Event) -> None:
        d = event.details
        high, low, lowest = d["high"], d["low"], d["peak"]
        if self.cause == "entropy_collapse":
            critical = self.profile.collapse_critical_share
            d["share_of_high"] = lowest / high if high > 0 else 0.0
            reached = critical is not None and lowest <= critical * high
            event.score = float(high / lowest) if lowest > 0 else float(high)
            if d.get("differential"):
                event.severity = Level.INFO
                return
        else:
            span = max(high - low, abs(high))
            d["share_lost"] = (high - lowest) / span if span > 0 else 0.0
            reached = lowest <= low
            event.score = float(d["share_lost"])
            start = _start(event)
            first = self.first_step if self.first_step is not None else start
            if _end(event) - start < REWARD_AGE_SHARE * (start - first):
                event.severity = Level.INFO  # not yet down long enough to say it stays
                return
        event.severity = Level.CRITICAL if reached and d["ongoing"] else Level.WARNING

    def summary(self, event: Event) -> str:
        d = event.details
        high, lowest, last = d["high"], d["peak"], d["last_level"]
        since = f"since step {format_step(_start(event))}"
        verb = "collapsed" if d.get("ongoing") else "fell"  # one that came back did not collapse
        if self.cause == "entropy_collapse":
            what = f"policy entropy ({self.metric}) {verb}"
            fall = (
                f"from its high {format_value(high)} at step {format_step(d['high_step'])} to "
                f"{format_value(lowest)} ({100 * d.get('share_of_high', 0.0):.0f}% of it) by step "
                f"{format_step(_peak(event))}"
            )
            held = f"has stayed below {100 * self.share:.0f}% of its high {since}"
        else:
            what = f"the reward ({self.metric}) {verb}"
            fall = (
                f"from its best {format_value(high)} at step {format_step(d['high_step'])} to "
                f"{format_value(lowest)} by step {format_step(_peak(event))}, losing "
                f"{100 * d.get('share_lost', 0.0):.0f}% of what it had gained from {format_value(d['low'])}"
            )
            held = f"has stayed down {since}"
        if d.get("ongoing"):
            return (
                f"{what} {fall}, and {held} ({format_value(last)} at step {format_step(d['last_step'])}): "
                f"{ADVICE[self.cause]}"
            )
        if d.get("differential"):
            return (
                f"{what} {fall}; it went below zero later: a differential entropy (a Gaussian policy's), "
                "whose fall is no collapse toward a floor"
            )
        return f"{what} {fall}, and came back by step {format_step(_end(event))}"

    def state(self) -> dict[str, Any]:
        return {
            **super().state(),
            "high": None if self.high == -math.inf else self.high,
            "high_step": self.high_step,
            "high_noise": None if self.high_noise == math.inf else self.high_noise,
            "low": None if self.low == math.inf else self.low,
            "low_at_high": None if self.low_at_high == math.inf else self.low_at_high,
            "negative": self.negative,
        }

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.high = -math.inf if state["high"] is None else float(state["high"])
        self.high_step = int(state["high_step"])
        self.high_noise = math.inf if state["high_noise"] is None else float(state["high_noise"])
        self.low = math.inf if state["low"] is None else float(state["low"])
        self.low_at_high = math.inf if state["low_at_high"] is None else float(state["low_at_high"])
        self.negative = bool(state["negative"])


class PolicyHealth:
    """The RL health rules a profile lists, read together on one series."""

    def __init__(self, metric: str, profile: KindProfile) -> None:
        listed = set(profile.detectors)
        self.rules: dict[str, _Held] = {}
        if "kl_band" in listed and profile.band_ceiling is not None:
            self.rules["kl_band"] = CeilingBand(metric, profile, "kl_band")
        if "clip_saturation" in listed and profile.band_ceiling is not None:
            self.rules["clip_saturation"] = CeilingBand(metric, profile, "clip_saturation")
        for name in ("entropy_collapse", "reward_collapse"):
            if name in listed and profile.collapse_share is not None:
                self.rules[name] = Collapse(metric, profile, name)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def process(self, window: Window) -> None:
        """Feed the new points of `window` to every rule."""
        for rule in self.rules.values():
            rule.process(window)

    @property
    def events(self) -> list[Event]:
        """Every rule's events."""
        return [e for rule in self.rules.values() for e in rule.events]

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state, one entry per rule."""
        return {name: rule.state() for name, rule in self.rules.items()}

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `state()` returned."""
        for name, rule in self.rules.items():
            if name in state:
                rule.restore(state[name])
