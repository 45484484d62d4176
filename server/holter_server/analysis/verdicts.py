"""Ablation verdicts: is the difference between two arms larger than the seed-to-seed spread?

An arm is one run or a seed group (each seed one value). On a metric, four measures are read:

* `final` — each run's value at its own last step;
* `at_step` — every run's value at one step (by default the last step every run reached);
* `at_tokens` — every run's value where its token counter reaches one count (by default the
  smallest count any run reached), when every run logs a token counter: a change that processes
  more tokens looks better even when it is neutral per token;
* `auc` — the area under the curve over a step range divided by its length, i.e. the mean level
  over the range (by default the range every run covers), so it reads in the metric's units.

A run's value at a step is read off a robust line through its `NEAREST_POINTS` finite points
nearest that step (`value_at`), so one noisy logged point does not stand for the run.

The rule (shared/seeds/004, "Reproducibility and determinism": "if a change moves the loss by
less than the seed-to-seed spread, you have measured noise, not signal"):

* the difference is mean(B) − mean(A); the seed spread is the range (max − min) of the seeds
  of an arm with two or more, the wider arm's when both have them;
* `noise` when |difference| ≤ the seed spread;
* otherwise `real effect` when a test says the difference is unlikely by chance (p < `ALPHA`):
  Welch's t-test (scipy.stats.ttest_ind, unequal variances) with ≥2 seeds per arm; with one run
  against a group, the run's distance from the group's mean in units of the prediction standard
  error s·√(1 + 1/n), on a t distribution with n − 1 degrees of freedom (the run is taken to
  scatter as the group's seeds do);
* `unknown` when it is outside the spread but the test does not settle it (few seeds), and
  always with one run per arm: then there is no seed spread at all. Either way the verdict says
  how many seeds per arm would settle a difference of this size: n = 2((z₁₋α/₂ + z_power) σ / Δ)²
  (two-sample power at α = 0.05, power 0.8), with σ the seeds' pooled standard deviation, or,
  with one run per arm, the curves' own point-to-point noise there as a stand-in (a lower bound:
  seeds usually scatter more than consecutive points do).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from holter_server.analysis.configs import KeyChange, diff
from holter_server.analysis.seeds import MAD_TO_SIGMA, finite_curve
from holter_server.detect.events import format_step, format_value
from holter_server.vocabulary.configs import is_learning_rate_key
from holter_server.vocabulary.events import ABLATION_VERDICTS

ALPHA = 0.05
POWER = 0.8
NEAREST_POINTS = 5
NOISE_POINTS = 50  # points before the measured step whose scatter stands in for an unknown seed spread
MAX_SEEDS_NEEDED = 100
TOKEN_TOLERANCE = 0.01  # token counts within 1% are the same count
REAL, NOISE, UNKNOWN = (v.name for v in ABLATION_VERDICTS)

Curve = tuple[np.ndarray, np.ndarray]


@dataclass
class Arm:
    """One side of an ablation: its label ("run abc", "group of abc (3 seeds)"), each run's curve
    of the metric, and each run's token counter when it logs one."""

    label: str
    curves: dict[str, Curve]
    tokens: dict[str, Curve] = field(default_factory=dict)

    @property
    def seeds(self) -> int:
        return len(self.curves)


@dataclass
class Verdict:
    """One measure of the metric, arm A against arm B, and what it means."""

    metric: str
    measure: str
    where: str
    a_values: list[float]
    b_values: list[float]
    difference: float
    spread: float | None
    spread_seeds: int
    p_value: float | None
    verdict: str
    seeds_needed: int | None
    sentence: str
    step: int | None = None
    tokens: float | None = None
    step_range: tuple[int, int] | None = None


def value_at(steps: np.ndarray, values: np.ndarray, step: float) -> float:
    """The run's level at `step`: a robust line (Theil–Sen) through its `NEAREST_POINTS` finite
    points nearest the step, read at the step. One noisy point does not stand for the run, and
    at the end of a falling curve the level is not dragged up to the points before it."""
    s, v = finite_curve(steps, values)
    if not len(s):
        return math.nan
    nearest = np.sort(np.argsort(np.abs(s - step), kind="stable")[:NEAREST_POINTS])
    x, y = s[nearest].astype(float), v[nearest]
    if len(x) < 3 or np.ptp(x) == 0:
        return float(np.median(y))
    from scipy import stats  # ~1 s to import: paid by the first comparison, not by every service start

    slope = float(stats.theilslopes(y, x).slope)
    return float(np.median(y - slope * (x - step)))


def mean_level(steps: np.ndarray, values: np.ndarray, lo: int, hi: int) -> float:
    """Area under the curve from `lo` to `hi` divided by the length: the mean level there."""
    s, v = finite_curve(steps, values)
    if not len(s) or hi <= lo:
        return value_at(steps, values, lo) if len(s) else math.nan
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


def local_noise(steps: np.ndarray, values: np.ndarray, step: float) -> float:
    """The curve's own point-to-point scatter just before `step` (robust: 1.4826 × MAD of the
    differences / √2), the stand-in for a seed spread nobody measured."""
    s, v = finite_curve(steps, values)
    v = v[s <= step][-NOISE_POINTS:]
    if len(v) < 3:
        return math.nan
    d = np.diff(v)
    return float(MAD_TO_SIGMA * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def format_count(count: float) -> str:
    """Token counts as people say them: 1.2B, 350M, 12k."""
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(count) >= size:
            return f"{count / size:.3g}{suffix}"
    return f"{count:.0f}"


def seeds_needed(sigma: float, difference: float) -> int | None:
    """Seeds per arm for a two-sample test to tell `difference` apart at α, with POWER."""
    if not math.isfinite(sigma) or difference == 0:
        return None
    if sigma == 0:
        return 2
    from scipy import stats

    z = stats.norm.ppf(1 - ALPHA / 2) + stats.norm.ppf(POWER)
    return max(2, min(MAX_SEEDS_NEEDED + 1, math.ceil(2 * (z * sigma / abs(difference)) ** 2)))


def _test(a: np.ndarray, b: np.ndarray) -> tuple[float | None, float]:
    """(p-value, pooled standard deviation of the seeds) for the arms' values."""
    from scipy import stats

    many = [x for x in (a, b) if len(x) >= 2]
    if not many:
        return None, math.nan
    sds = [float(np.std(x, ddof=1)) for x in many]
    pooled = math.sqrt(sum(s * s for s in sds) / len(sds))
    gap = float(np.mean(b) - np.mean(a))
    if pooled == 0:
        return (0.0 if gap else 1.0), 0.0
    if len(a) >= 2 and len(b) >= 2:
        result = stats.ttest_ind(b, a, equal_var=False)
        p = float(result.pvalue)
        return (p if math.isfinite(p) else 1.0), pooled
    group = many[0]
    single = float((b if len(a) >= 2 else a)[0])
    t = (single - float(np.mean(group))) / (sds[0] * math.sqrt(1 + 1 / len(group)))
    return float(2 * stats.t.sf(abs(t), df=len(group) - 1)), pooled


def judge(metric: str, measure: str, where: str, a: list[float], b: list[float], noise: float = math.nan) -> Verdict:
    """The verdict on one measure from the arms' values (one per seed), by the rule above.

    `noise` is the curves' own scatter at the measure, the stand-in for the seed spread when
    neither arm has two seeds.
    """
    av, bv = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    gap = float(np.mean(bv) - np.mean(av))
    size, direction = format_value(abs(gap)), "lower" if gap < 0 else "higher"
    ranges = [(float(np.ptp(x)), len(x)) for x in (av, bv) if len(x) >= 2]
    spread, spread_seeds = max(ranges) if ranges else (None, 0)
    p, pooled = _test(av, bv)
    head = f"{metric} {size} {direction} {where}" if gap else f"{metric} the same {where}"
    if spread is None:
        needed = seeds_needed(noise, gap)
        tail = (
            f"; about {_seeds(needed)} per arm would settle a difference of this size (taking the seed spread to be "
            f"like the curves' own noise there, {format_value(noise)})"
            if needed
            else ""
        )
        return Verdict(
            metric,
            measure,
            where,
            list(a),
            list(b),
            gap,
            None,
            0,
            None,
            UNKNOWN,
            needed,
            f"{head} with one run per arm: the seed spread is unknown{tail}",
        )
    spread_text = f"the seed spread there is {format_value(spread)} over {spread_seeds} seeds"
    if abs(gap) <= spread:
        return Verdict(
            metric,
            measure,
            where,
            list(a),
            list(b),
            gap,
            spread,
            spread_seeds,
            p,
            NOISE,
            None,
            f"{head}, inside the seed spread of {format_value(spread)} over {spread_seeds} seeds: noise",
        )
    test = "Welch's t-test" if len(av) >= 2 and len(bv) >= 2 else "t-test against the group's seeds"
    if p is not None and p < ALPHA:
        return Verdict(
            metric,
            measure,
            where,
            list(a),
            list(b),
            gap,
            spread,
            spread_seeds,
            p,
            REAL,
            None,
            f"{head}; {spread_text} ({test} p = {p:.2g}): a real effect",
        )
    needed = seeds_needed(pooled, gap)
    return Verdict(
        metric,
        measure,
        where,
        list(a),
        list(b),
        gap,
        spread,
        spread_seeds,
        p,
        UNKNOWN,
        needed,
        f"{head}, outside {spread_text} but not settled ({test} p = {p:.2g}); "
        f"about {_seeds(needed)} per arm would settle it",
    )


def _seeds(n: int | None) -> str:
    return f"more than {MAX_SEEDS_NEEDED} seeds" if n is not None and n > MAX_SEEDS_NEEDED else f"{n} seeds"


def _noise(arms: tuple[Arm, Arm], steps: Mapping[str, float]) -> float:
    found = [local_noise(*curve, steps[run_id]) for arm in arms for run_id, curve in arm.curves.items()]
    found = [n for n in found if math.isfinite(n)]
    return max(found) if found else math.nan


def compare_arms(
    metric: str,
    a: Arm,
    b: Arm,
    *,
    at_step: int | None = None,
    at_tokens: float | None = None,
    step_range: tuple[int, int] | None = None,
) -> list[Verdict]:
    """Every measure that can be read for both arms, A against B (see the module's docstring)."""
    runs = {**a.curves, **b.curves}
    spans = {r: finite_curve(*c)[0] for r, c in runs.items()}
    if any(not len(s) for s in spans.values()) or not a.curves or not b.curves:
        return []
    verdicts = []
    last = {r: int(s[-1]) for r, s in spans.items()}
    verdicts.append(
        judge(
            metric,
            "final",
            "at the end",
            [value_at(*c, last[r]) for r, c in a.curves.items()],
            [value_at(*c, last[r]) for r, c in b.curves.items()],
            _noise((a, b), last),
        )
    )
    step = at_step if at_step is not None else min(last.values())
    at = {r: float(step) for r in runs}
    verdicts.append(
        judge(
            metric,
            "at_step",
            f"at step {format_step(step)}",
            [value_at(*c, step) for c in a.curves.values()],
            [value_at(*c, step) for c in b.curves.values()],
            _noise((a, b), at),
        )
    )
    verdicts[-1].step = step
    counted = {**a.tokens, **b.tokens}
    if set(counted) >= set(runs):
        count = (
            at_tokens if at_tokens is not None else min(float(np.nanmax(finite_curve(*t)[1])) for t in counted.values())
        )
        where = {r: step_at_tokens(counted[r], count) for r in runs}
        if all(w is not None for w in where.values()):
            reached = {r: float(w) for r, w in where.items() if w is not None}
            verdicts.append(
                judge(
                    metric,
                    "at_tokens",
                    f"at {format_count(count)} tokens",
                    [value_at(*c, reached[r]) for r, c in a.curves.items()],
                    [value_at(*c, reached[r]) for r, c in b.curves.items()],
                    _noise((a, b), reached),
                )
            )
            verdicts[-1].tokens = count
    lo, hi = step_range if step_range is not None else (max(int(s[0]) for s in spans.values()), min(last.values()))
    if hi > lo:
        ends = {r: float(hi) for r in runs}
        verdicts.append(
            judge(
                metric,
                "auc",
                f"on average over steps {format_step(lo)}–{format_step(hi)}",
                [mean_level(*c, lo, hi) for c in a.curves.values()],
                [mean_level(*c, lo, hi) for c in b.curves.values()],
                _noise((a, b), ends),
            )
        )
        verdicts[-1].step_range = (lo, hi)
    return verdicts


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
    config_a: dict,
    config_b: dict,
    *,
    tokens_a: float | None = None,
    tokens_b: float | None = None,
    last_step_a: int | None = None,
    last_step_b: int | None = None,
) -> Confounders:
    """The non-seed config keys that differ between the arms (flat configs, seed keys already left
    out), with a warning for each of the chapter's classic confounders ("Controlled ablations"):
    more than one key changed, a different token count, a different learning rate."""
    changes = diff(config_a, config_b)
    warnings = []
    if len(changes) > 1:
        warnings.append(f"this ablation changed {_keys(changes)}: a difference cannot be put on any one of them")
    lr = [c for c in changes if is_learning_rate_key(c.key)]
    if lr:
        warnings.append(
            f"the learning rate differs ({'; '.join(c.describe() for c in lr)}): many changes are an LR change in "
            "disguise; re-tune the LR on both arms before crediting the change"
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
