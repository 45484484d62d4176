"""Ablation verdicts: arm B against arm A on a metric, read from the values the runs logged.

An arm is one run or a seed group (one value per seed). Four measures are read on a metric:

* `final` — each run's last logged value;
* `at_step` — every run's value at one step (by default the last step every run reached);
* `at_tokens` — every run's value where its token counter reaches one count (by default the
  smallest count any run reached), when every run logs a token counter: a change that processes
  more tokens looks better even when it is neutral per token;
* `auc` — the area under the curve over a step range divided by its length, i.e. the mean level
  over the range (by default the range every run covers), so it reads in the metric's units.

**The values are the logged values.** A run that logged the step gives that point. One that did
not (evals every 50 steps in one arm and every 40 in the other; a token count reached between two
steps) gives the straight line between its two logged points around the step, and the verdict
says how many runs were read so. Nothing is fitted through neighbouring points: a fit through an
eval every 50 steps spans hundreds of steps and moves a "final" value far from what was logged,
and the band drawn beside the verdict is made of the same logged values.

**The verdict** (the tests, intervals and power are `analysis.inference`'s):

* one measure is **primary**, chosen before anything is read: `at_tokens` when every run logs a
  token counter (the fair comparison, shared/seeds/004 "Controlled ablations"), else `at_step`,
  or the one the caller names. It is tested at α = 0.05;
* the others are **secondary**: a secondary measure is claimed only when the primary found an
  effect and its own p-value survives Holm's correction over the secondary measures (serial
  gatekeeping). Four measures each tested at 0.05 claim an effect of a no-op change far more
  often than 5% of the time; so tested, the chance of any false claim stays at most α;
* `real effect` when the (adjusted) p-value is below α, with the difference, its 95% confidence
  interval, the effect size in seed standard deviations and the test;
* `no detectable difference` when the test ran and found none. That is not "noise": three seeds
  per arm miss a real effect of one seed SD most of the time, and a difference that stays inside
  the seeds' range can still be certain once there are enough seeds. So the verdict says what this
  many seeds could detect (80% power) and how many seeds per arm would detect a difference of the
  size seen;
* `unknown` when nothing can be judged: one run per arm and no measured seed spread to stand in
  (`analysis.inference.StandIn`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from holter_server.analysis.configs import KeyChange, diff
from holter_server.analysis.inference import (
    ALPHA,
    CONFIDENCE,
    MAX_SEEDS,
    POWER,
    STAND_IN,
    WELCH,
    Inference,
    StandIn,
    holm,
    infer,
)
from holter_server.analysis.seeds import finite_curve
from holter_server.detect.events import format_step, format_value
from holter_server.vocabulary.configs import is_learning_rate_key
from holter_server.vocabulary.events import ABLATION_VERDICTS

TOKEN_TOLERANCE = 0.01  # token counts within 1% are the same count
MEASURES = ("final", "at_step", "at_tokens", "auc")
REAL, NOT_DETECTED, UNKNOWN = (v.name for v in ABLATION_VERDICTS)

Curve = tuple[np.ndarray, np.ndarray]


@dataclass
class Arm:
    """One side of an ablation: its label ("run abc", "group of abc (3 seeds)"), each run's curve
    of the metric, each run's token counter when it logs one, and each run's seeds (a canonical
    text of its seed keys: runs of the two arms with the same text ran the same seeds)."""

    label: str
    curves: dict[str, Curve]
    tokens: dict[str, Curve] = field(default_factory=dict)
    seeds: dict[str, str] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.curves)


@dataclass(frozen=True)
class Reading:
    """A run's value at a step: the point it logged there, or the line between the two logged
    points around the step (`interpolated`); NaN when the run's points do not reach the step."""

    value: float
    interpolated: bool = False


@dataclass
class Verdict:
    """One measure of the metric, arm A against arm B, and what it means."""

    metric: str
    measure: str
    where: str
    a_values: list[float]
    b_values: list[float]
    difference: float
    spread: float | None  # the range of the seeds of the arm with the wider one (None: one run per arm)
    spread_seeds: int
    p_value: float | None
    verdict: str
    seeds_needed: int | None  # seeds per arm that would detect a difference of this size (80% power)
    sentence: str
    step: int | None = None
    tokens: float | None = None
    step_range: tuple[int, int] | None = None
    a_runs: list[str] = field(default_factory=list)
    b_runs: list[str] = field(default_factory=list)
    inference: Inference | None = None
    primary: bool = False
    p_adjusted: float | None = None  # the p-value compared with α (secondary measures: gatekept, Holm)
    detectable: float | None = None  # the smallest difference this test finds 80% of the time
    power_sentence: str | None = None
    interpolated: list[str] = field(default_factory=list)  # runs whose value lies between two logged points
    secondaries: int = 0  # how many secondary measures Holm's correction ran over

    @property
    def test(self) -> str | None:
        return self.inference.test if self.inference else None

    @property
    def paired(self) -> bool:
        return bool(self.inference and self.inference.paired)

    @property
    def interval(self) -> tuple[float, float] | None:
        """The difference's confidence interval (CONFIDENCE)."""
        return (self.inference.ci_low, self.inference.ci_high) if self.inference else None

    @property
    def effect_size(self) -> float | None:
        return self.inference.effect_size if self.inference else None

    @property
    def sigma(self) -> float | None:
        """The seeds' standard deviation the test measured (or the stand-in's)."""
        return self.inference.sigma if self.inference and math.isfinite(self.inference.sigma) else None

    @property
    def stand_in(self) -> StandIn | None:
        return self.inference.stand_in if self.inference else None


# ---------------------------------------------------------------- reading the logged values


def logged_value(steps: np.ndarray, values: np.ndarray, step: float) -> Reading:
    """The run's value at `step`: its logged point there, or the straight line between the two
    logged finite points around it (`interpolated`); NaN outside the steps it logged."""
    return _value_at(*finite_curve(steps, values), step)


def _value_at(s: np.ndarray, v: np.ndarray, step: float) -> Reading:
    """`logged_value` on a curve's finite points, in step order."""
    if not len(s) or step < s[0] or step > s[-1]:
        return Reading(math.nan)
    i = int(np.searchsorted(s, step))
    if s[i] == step:
        return Reading(float(v[i]))
    lo, hi = float(s[i - 1]), float(s[i])
    return Reading(float(v[i - 1] + (v[i] - v[i - 1]) * (step - lo) / (hi - lo)), interpolated=True)


def mean_level(steps: np.ndarray, values: np.ndarray, lo: int, hi: int) -> float:
    """Area under the logged points from `lo` to `hi` divided by the length: the mean level there
    (the line between logged points, as a chart draws it); NaN outside the steps it logged."""
    return _mean_level(*finite_curve(steps, values), lo, hi)


def _mean_level(s: np.ndarray, v: np.ndarray, lo: int, hi: int) -> float:
    if not len(s) or lo < s[0] or hi > s[-1]:
        return math.nan
    if hi <= lo:
        return _value_at(s, v, lo).value
    inside = (s > lo) & (s < hi)
    grid = np.concatenate([[lo], s[inside], [hi]]).astype(float)
    curve = np.interp(grid, s, v)
    return float(np.trapezoid(curve, grid) / (hi - lo))


def step_at_tokens(tokens: Curve, count: float) -> float | None:
    """The step at which a token counter reached `count` (None if it never did)."""
    s, t = finite_curve(*tokens)
    if not len(s) or t[-1] < count * (1 - TOKEN_TOLERANCE):
        return None
    t = np.maximum.accumulate(t)  # a counter never goes back; a glitch must not fold the map
    return float(np.interp(count, t, s))


def format_count(count: float) -> str:
    """Token counts as people say them: 1.2B, 350M, 12k."""
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(count) >= size:
            return f"{count / size:.3g}{suffix}"
    return f"{count:.0f}"


def signed(value: float) -> str:
    """A difference with its sign: +0.005, -0.077, 0."""
    return ("+" if value > 0 else "-" if value < 0 else "") + format_value(abs(value))


# ---------------------------------------------------------------- the measures


@dataclass
class _Measure:
    """One measure as read: each run's reading, where it was read, and the stand-in group's values
    read the same way (when there is one)."""

    name: str
    where: str
    a: dict[str, Reading]
    b: dict[str, Reading]
    step: int | None = None
    tokens: float | None = None
    step_range: tuple[int, int] | None = None
    spread: list[float] = field(default_factory=list)


def _measures(
    a: Arm,
    b: Arm,
    *,
    at_step: int | None,
    at_tokens: float | None,
    step_range: tuple[int, int] | None,
    stand_in: Arm | None = None,
) -> list[_Measure]:
    finite = {r: finite_curve(*c) for r, c in {**a.curves, **b.curves}.items()}
    if any(not len(s) for s, _ in finite.values()) or not a.curves or not b.curves:
        return []
    others = {r: f for r, c in (stand_in.curves if stand_in else {}).items() if len((f := finite_curve(*c))[0])}

    def read(arm: Arm, at: Mapping[str, float]) -> dict[str, Reading]:
        return {r: _value_at(*finite[r], at[r]) for r in arm.curves}

    def final(arm: Arm) -> dict[str, Reading]:
        return {r: Reading(float(finite[r][1][-1])) for r in arm.curves}

    def spread(values: Mapping[str, float]) -> list[float]:
        return [v for v in values.values() if math.isfinite(v)]

    last = {r: int(s[-1]) for r, (s, _) in finite.items()}
    found = [
        _Measure("final", "at the end", final(a), final(b), spread=spread({r: f[1][-1] for r, f in others.items()}))
    ]
    step = at_step if at_step is not None else min(last.values())
    at = dict.fromkeys(finite, float(step))
    found.append(
        _Measure(
            "at_step",
            f"at step {format_step(step)}",
            read(a, at),
            read(b, at),
            step=step,
            spread=spread({r: _value_at(*f, step).value for r, f in others.items()}),
        )
    )
    counted = {**a.tokens, **b.tokens}
    if set(counted) >= set(finite):
        count = (
            at_tokens if at_tokens is not None else min(float(np.nanmax(finite_curve(*t)[1])) for t in counted.values())
        )
        where = {r: step_at_tokens(counted[r], count) for r in finite}
        if all(w is not None for w in where.values()):
            reached = {r: float(w) for r, w in where.items() if w is not None}
            elsewhere = {
                r: step_at_tokens(stand_in.tokens[r], count) for r in others if stand_in and r in stand_in.tokens
            }
            found.append(
                _Measure(
                    "at_tokens",
                    f"at {format_count(count)} tokens",
                    read(a, reached),
                    read(b, reached),
                    tokens=count,
                    spread=spread({r: _value_at(*others[r], w).value for r, w in elsewhere.items() if w is not None}),
                )
            )
    lo, hi = step_range if step_range is not None else (max(int(s[0]) for s, _ in finite.values()), min(last.values()))
    if hi > lo:
        found.append(
            _Measure(
                "auc",
                f"on average over steps {format_step(lo)}–{format_step(hi)}",
                {r: Reading(_mean_level(*finite[r], lo, hi)) for r in a.curves},
                {r: Reading(_mean_level(*finite[r], lo, hi)) for r in b.curves},
                step_range=(lo, hi),
                spread=spread({r: _mean_level(*f, lo, hi) for r, f in others.items()}),
            )
        )
    return found


def pairs_of(a: Arm, b: Arm, a_runs: list[str], b_runs: list[str]) -> list[tuple[int, int]] | None:
    """(index in A, index in B) of the runs that ran the same seeds, when every run of both arms
    has exactly one partner; None otherwise (then the arms are compared as independent)."""
    seeds_a, seeds_b = [a.seeds.get(r) for r in a_runs], [b.seeds.get(r) for r in b_runs]
    if (
        len(a_runs) < 2
        or len(a_runs) != len(b_runs)
        or None in seeds_a
        or len(set(seeds_a)) != len(seeds_a)
        or set(seeds_a) != set(seeds_b)
    ):
        return None
    partner = {seed: j for j, seed in enumerate(seeds_b)}
    return [(i, partner[seed]) for i, seed in enumerate(seeds_a)]


def _spread(a: list[float], b: list[float]) -> tuple[float | None, int]:
    ranges = [(float(np.ptp(x)), len(x)) for x in (a, b) if len(x) >= 2]
    return max(ranges) if ranges else (None, 0)


def _verdict(metric: str, measure: _Measure, a: Arm, b: Arm, stand_in: Arm | None) -> Verdict | None:
    """The measure tested (its verdict and sentence are settled with the other measures')."""
    a_runs = [r for r, x in measure.a.items() if math.isfinite(x.value)]
    b_runs = [r for r, x in measure.b.items() if math.isfinite(x.value)]
    if not a_runs or not b_runs:
        return None
    a_values = [measure.a[r].value for r in a_runs]
    b_values = [measure.b[r].value for r in b_runs]
    spread_of = (
        StandIn(float(np.std(measure.spread, ddof=1)), len(measure.spread), stand_in.label)
        if stand_in is not None and len(measure.spread) >= 2
        else None
    )
    found = infer(a_values, b_values, pairs=pairs_of(a, b, a_runs, b_runs), stand_in=spread_of)
    spread, spread_seeds = _spread(a_values, b_values)
    reading = {**measure.a, **measure.b}
    return Verdict(
        metric=metric,
        measure=measure.name,
        where=measure.where,
        a_values=a_values,
        b_values=b_values,
        difference=float(np.mean(b_values) - np.mean(a_values)),
        spread=spread,
        spread_seeds=spread_seeds,
        p_value=found.p_value if found else None,
        verdict=UNKNOWN,
        seeds_needed=None,
        sentence="",
        step=measure.step,
        tokens=measure.tokens,
        step_range=measure.step_range,
        a_runs=a_runs,
        b_runs=b_runs,
        inference=found,
        interpolated=[r for r in [*a_runs, *b_runs] if reading[r].interpolated],
    )


def compare_arms(
    metric: str,
    a: Arm,
    b: Arm,
    *,
    at_step: int | None = None,
    at_tokens: float | None = None,
    step_range: tuple[int, int] | None = None,
    primary: str | None = None,
    stand_in: Arm | None = None,
) -> list[Verdict]:
    """Every measure that can be read for both arms, A against B, each with its verdict (see the
    module's docstring). `primary`: the measure chosen up front (default `at_tokens` when every
    run counts tokens, else `at_step`); a ValueError says when it cannot be read. `stand_in`: a
    seed group measured elsewhere (its label names it in the verdict), read the same way as the
    arms on each measure; its seeds' spread stands in when both arms are one run."""
    read = _measures(a, b, at_step=at_step, at_tokens=at_tokens, step_range=step_range, stand_in=stand_in)
    verdicts = [v for m in read if (v := _verdict(metric, m, a, b, stand_in)) is not None]
    if not verdicts:
        return []
    names = [v.measure for v in verdicts]
    chosen = primary or ("at_tokens" if "at_tokens" in names else "at_step")
    if chosen not in names:
        why = "not every run logs a token counter" if chosen == "at_tokens" else "the runs' points do not reach it"
        raise ValueError(f"the primary measure {chosen!r} cannot be read for both arms: {why}")
    settle(verdicts, chosen)
    return verdicts


def judge(
    metric: str,
    measure: str,
    where: str,
    a: list[float],
    b: list[float],
    *,
    pairs: list[tuple[int, int]] | None = None,
    stand_in: StandIn | None = None,
) -> Verdict:
    """The verdict on one measure alone (it is its own primary) from the arms' values, one per seed."""
    found = infer(a, b, pairs=pairs, stand_in=stand_in)
    spread, spread_seeds = _spread(a, b)
    verdict = Verdict(
        metric=metric,
        measure=measure,
        where=where,
        a_values=list(a),
        b_values=list(b),
        difference=float(np.mean(b) - np.mean(a)),
        spread=spread,
        spread_seeds=spread_seeds,
        p_value=found.p_value if found else None,
        verdict=UNKNOWN,
        seeds_needed=None,
        sentence="",
        inference=found,
    )
    settle([verdict], measure)
    return verdict


# ---------------------------------------------------------------- settling the verdicts


def settle(verdicts: list[Verdict], primary: str) -> None:
    """Give each measure its adjusted p-value, verdict and sentence: the primary at α, the
    others only after it and with Holm's correction among them (see the module's docstring)."""
    lead = next(v for v in verdicts if v.measure == primary)
    lead.primary = True
    lead.p_adjusted = lead.p_value
    others = [v for v in verdicts if v is not lead and v.p_value is not None]
    gate = lead.p_value if lead.p_value is not None else 1.0
    for verdict, adjusted in zip(others, holm([v.p_value for v in others if v.p_value is not None])):
        verdict.p_adjusted = max(gate, adjusted)
        verdict.secondaries = len(others)
    for verdict in verdicts:
        _conclude(verdict, lead)


def _seeds_text(v: Verdict) -> str:
    found = v.inference
    assert found is not None
    if found.paired:
        return f"{found.seeds} paired seeds"
    if found.test == WELCH:
        sizes = sorted({len(v.a_values), len(v.b_values)})
        return f"{sizes[0]} seeds per arm" if len(sizes) == 1 else f"{sizes[0]} and {sizes[1]} seeds"
    if found.test == STAND_IN:
        return "one run per arm"
    return f"one run against {max(len(v.a_values), len(v.b_values))} seeds"


def _seeds(n: int) -> str:
    return f"more than {MAX_SEEDS} seeds" if n > MAX_SEEDS else f"about {n} seeds"


def _power_sentence(v: Verdict) -> str:
    """'no detectable difference at 3 seeds per arm; a difference of 0.015 (2.6 seed SDs) or more
    would be found 80% of the time, and about 40 seeds per arm would find one of this size'."""
    found = v.inference
    assert found is not None
    at = f"no detectable difference at {_seeds_text(v)}"
    if found.scale == 0:
        return f"{at}: every seed of both arms logged the same value"
    parts = []
    if v.detectable is not None:
        sds = f" ({v.detectable / found.sigma:.1f} seed SDs)" if found.sigma > 0 else ""
        parts.append(
            f"a difference of {format_value(v.detectable)}{sds} or more would be found {POWER:.0%} of the time"
        )
    if v.seeds_needed is not None:
        size = format_value(abs(v.difference))
        parts.append(
            f"{_seeds(v.seeds_needed)} per arm would be needed to find one of this size ({size})"
            if v.seeds_needed > MAX_SEEDS
            else f"{_seeds(v.seeds_needed)} per arm would find one of this size ({size}) as often"
        )
    return f"{at}; " + ", and ".join(parts) if parts else at


def _conclude(v: Verdict, lead: Verdict) -> None:
    gap = v.difference
    size, direction = format_value(abs(gap)), "lower" if gap < 0 else "higher"
    head = f"{v.metric} {size} {direction} {v.where}" if gap else f"{v.metric} the same {v.where}"
    found = v.inference
    notes = []
    if v.interpolated:
        runs = len(v.a_values) + len(v.b_values)
        notes.append(
            f"{len(v.interpolated)} of the {runs} runs logged no point there: their values lie on the line "
            "between the logged points around it"
        )
    if found is None:
        v.verdict = UNKNOWN
        v.sentence = (
            f"{head} with one run per arm: it cannot be judged, since nothing measures how far seeds of these configs "
            f"scatter on {v.metric}; run each arm with 2 more seeds (or give either arm a seed group that logs it)"
        )
        v.sentence += _notes(notes)
        return
    low, high = found.ci_low, found.ci_high
    stats = [f"{CONFIDENCE:.0%} CI {signed(low)} to {signed(high)}"]
    if found.effect_size is not None and gap:
        stats.append(f"{abs(found.effect_size):.1f} seed SDs")
    test = f"{found.test}, {_seeds_text(v)}, p = {found.p_value:.2g}"
    if not v.primary:
        test += f", adjusted {v.p_adjusted:.2g} (secondary to {lead.where}; Holm over {v.secondaries})"
    stats.append(test)
    if found.stand_in is not None:
        stand_in = found.stand_in
        notes.append(
            f"the seed spread of {stand_in.source} (SD {format_value(stand_in.sigma)} over {stand_in.seeds} seeds) "
            "stands in for the arms' own"
        )
    if v.p_adjusted is not None and v.p_adjusted < ALPHA:
        v.verdict = REAL
        conclusion = "a real effect"
    else:
        v.verdict = NOT_DETECTED
        v.detectable = found.detectable()
        v.seeds_needed = found.seeds_needed(gap) if gap else None
        v.power_sentence = _power_sentence(v)
        conclusion = v.power_sentence
    v.sentence = f"{head} ({'; '.join(stats)}): {conclusion}{_notes(notes)}"


def _notes(notes: list[str]) -> str:
    """Notes after the verdict, as one more sentence."""
    text = "; ".join(notes)
    return f". {text[0].upper()}{text[1:]}" if text else ""


# ---------------------------------------------------------------- bit-identical arms


@dataclass
class Identity:
    """Runs of the two arms (seed for seed) that logged exactly the same values: a change that did
    nothing, or was never applied (a flag read nowhere, a config key the code ignores)."""

    metric: str
    pairs: list[tuple[str, str]]  # (run of A, run of B) compared: the same seeds, or the one run of each
    identical: list[tuple[str, str]]
    points: int  # points compared over the identical pairs
    sentence: str

    @property
    def all_identical(self) -> bool:
        return bool(self.pairs) and len(self.identical) == len(self.pairs)


def _same(x: Curve, y: Curve) -> bool:
    return np.array_equal(np.asarray(x[0]), np.asarray(y[0])) and np.array_equal(
        np.asarray(x[1], dtype=float), np.asarray(y[1], dtype=float), equal_nan=True
    )


def identical_pairs(metric: str, a: Arm, b: Arm) -> Identity | None:
    """Which runs of B logged bit-for-bit the values of their partner in A on `metric` (every step,
    every value, NaN where NaN): partners ran the same seeds, or are the arms' one run each. None
    when no pair is identical (the usual case) or no runs pair up."""
    if len(a.curves) == 1 and len(b.curves) == 1:
        pairs = [(next(iter(a.curves)), next(iter(b.curves)))]
    else:
        by_seed = {a.seeds[r]: r for r in a.curves if r in a.seeds}
        if len(by_seed) != len(a.curves):  # seeds that do not tell the runs apart pair nothing
            return None
        pairs = [(by_seed[b.seeds[r]], r) for r in b.curves if b.seeds.get(r) in by_seed]
    pairs = [(x, y) for x, y in pairs if x != y]  # a run is trivially identical to itself
    same = [(x, y) for x, y in pairs if _same(a.curves[x], b.curves[y])]
    if not same:
        return None
    points = sum(len(a.curves[x][0]) for x, _ in same)
    if len(pairs) == 1:
        x, y = same[0]
        text = (
            f"runs {x} and {y} logged bit-identical {metric} at all {points:,} steps: the change did nothing to "
            f"{metric}, or was never applied"
        )
    elif len(same) == len(pairs):
        text = (
            f"every one of the {len(pairs)} seed pairs logged bit-identical {metric} ({points:,} points): the change "
            f"did nothing to {metric}, or was never applied"
        )
    else:
        text = (
            f"{len(same)} of the {len(pairs)} seed pairs logged bit-identical {metric} "
            f"({', '.join(f'{x} = {y}' for x, y in same[:3])}{'…' if len(same) > 3 else ''}): in those runs the "
            "change did nothing"
        )
    return Identity(metric, pairs, same, points, text)


# ---------------------------------------------------------------- confounders


@dataclass
class Confounders:
    """What else differs between the arms than the thing meant to be tested."""

    changes: list[KeyChange]
    warnings: list[str]


def _keys(changes: list[KeyChange]) -> str:
    names = [c.key for c in changes[:4]]
    more = f" and {len(changes) - 4} more" if len(changes) > 4 else ""
    return (", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]) + more


def confounders(
    config_a: dict[str, Any],
    config_b: dict[str, Any],
    *,
    tokens_a: float | None = None,
    tokens_b: float | None = None,
    last_step_a: int | None = None,
    last_step_b: int | None = None,
) -> Confounders:
    """The non-seed config keys that differ between the arms (flat configs, seed keys already left
    out), with a warning for each of the chapter's classic confounders ("Controlled ablations"):
    more than one key changed, a different token count, a learning rate changed along with something
    else (an ablation whose only change is the learning rate meant to change it: no warning)."""
    changes = diff(config_a, config_b)
    warnings = []
    if len(changes) > 1:
        warnings.append(f"this ablation changed {_keys(changes)}: a difference cannot be put on any one of them")
    lr = [c for c in changes if is_learning_rate_key(c.key)]
    if lr and len(lr) < len(changes):  # an ablation of the learning rate alone means to change it
        others = [c for c in changes if c not in lr]
        warnings.append(
            f"the learning rate differs ({'; '.join(c.describe() for c in lr)}) along with {_keys(others)}: many "
            "changes are an LR change in disguise; re-tune the LR on both arms before crediting the change"
        )
    if tokens_a is not None and tokens_b is not None:
        if abs(tokens_a - tokens_b) > TOKEN_TOLERANCE * max(abs(tokens_a), abs(tokens_b)):
            warnings.append(
                f"the arms saw different token counts ({format_count(tokens_a)} vs {format_count(tokens_b)}): "
                "read the comparison at matched tokens"
            )
    elif last_step_a is not None and last_step_b is not None and last_step_a != last_step_b:
        warnings.append(
            f"the arms ran to different steps ({format_step(last_step_a)} vs {format_step(last_step_b)}) and log no "
            "token counter: the final values compare different amounts of training; log one (num_tokens) to "
            "compare at matched tokens"
        )
    return Confounders(changes, warnings)
