"""The statistics behind an ablation verdict: a test of arm B against arm A with an effect size
and a confidence interval, Holm's correction for the measures after the primary one, and power
(what a test at this many seeds can detect, and how many seeds would detect a given difference).

Values are one per seed (a measure of a run). The test depends on what the arms hold:

* both arms ran the same seeds (every run has a partner with the same seed keys in the other
  arm): a **paired t-test** on the per-seed differences (as `scipy.stats.ttest_rel`). A shared
  seed shares its initialisation and data order, so what the seed does cancels in the
  difference and a small effect shows at few seeds;
* two or more seeds per arm otherwise: **Welch's t-test** (unequal variances, as
  `scipy.stats.ttest_ind(equal_var=False)`), its interval on the Welch–Satterthwaite degrees of
  freedom;
* one run against a group: a **prediction t-test**, the run's distance from the group's mean in
  units of s·√(1 + 1/n) on n − 1 degrees of freedom (the run is taken to scatter as the seeds do);
* one run per arm: nothing in the arms measures how far seeds scatter. With a **stand-in** seed
  spread measured elsewhere (a seed group of either arm's config, or of the project, on the same
  metric), the difference of two single runs has a standard deviation σ√2, tested on that
  group's degrees of freedom, and said to rest on it; without one the difference cannot be judged.

Every result carries the difference (mean of B − mean of A), its confidence interval, the seeds'
standard deviation σ (pooled over the arms: the unit of the effect size, "2.1 seed SDs") and the
p-value. Power is the two-sided t-test's, from the noncentral t distribution (exact for normal
seeds; no large-sample approximation at 3 seeds per arm).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

ALPHA = 0.05
POWER = 0.8
CONFIDENCE = 0.95
MAX_SEEDS = 100  # seeds per arm past which "would detect" is said as "more than 100"

PAIRED, WELCH, AGAINST_GROUP, STAND_IN = (
    "paired t-test",
    "Welch's t-test",
    "t-test against the group's seeds",
    "t-test on a stand-in seed spread",
)


@dataclass(frozen=True)
class StandIn:
    """A seed spread measured elsewhere, standing in for arms of one run each: the seeds' standard
    deviation, how many seeds measured it, and where (said in the verdict)."""

    sigma: float
    seeds: int
    source: str


@dataclass(frozen=True)
class Inference:
    """Arm B against arm A on one measure: the test, the difference (mean of B − mean of A) with
    its confidence interval, the p-value, and what the test's power follows from: the standard
    error of the difference (`scale`) on `df` degrees of freedom."""

    test: str
    difference: float
    p_value: float
    ci_low: float
    ci_high: float
    sigma: float  # the seeds' standard deviation, pooled over the arms (or the stand-in's)
    seeds: int  # seeds per arm (the smaller arm's; pairs when paired; 1 for a single run)
    scale: float  # the standard error of the difference
    df: float
    paired: bool = False
    sigma_of_pairs: float | None = None  # paired: the standard deviation of the per-seed differences
    stand_in: StandIn | None = None

    @property
    def effect_size(self) -> float | None:
        """The difference in seed standard deviations (Cohen's d); None when the seeds do not vary."""
        return self.difference / self.sigma if self.sigma > 0 else None

    def detectable(self, alpha: float = ALPHA, wanted: float = POWER) -> float | None:
        """The smallest difference this test, at these seeds, finds with probability `wanted`."""
        return detectable_difference(self.scale, self.df, alpha=alpha, wanted=wanted)

    def seeds_needed(self, difference: float, alpha: float = ALPHA, wanted: float = POWER) -> int | None:
        """Seeds per arm at which the arms' test (paired when these are) finds `difference`."""
        if self.paired:
            return seeds_needed(difference, self.sigma_of_pairs or 0.0, paired=True, alpha=alpha, wanted=wanted)
        return seeds_needed(difference, self.sigma, alpha=alpha, wanted=wanted)


def _p(value: float) -> float:
    return value if math.isfinite(value) else 1.0


def _t_test(
    test: str, difference: float, scale: float, df: float, sigma: float, seeds: int, confidence: float, **kw: object
) -> Inference:
    """A t-test of `difference` with standard error `scale` on `df` degrees of freedom, and its
    confidence interval. The t distribution is scipy.special's (`stdtr`, `stdtrit`): the same
    numbers as `scipy.stats.ttest_ind(equal_var=False)` and `ttest_rel` give (the tests check
    it), at a fiftieth of the cost, which the simulations of the verdict's error rates need."""
    from scipy import special  # ~1 s to import scipy: paid by the first comparison, not by every service start

    if scale == 0:  # every seed gave the same value: any difference at all is exact
        p, half = (0.0 if difference else 1.0), 0.0
    else:
        half = float(special.stdtrit(df, 0.5 + confidence / 2)) * scale
        p = _p(float(2 * special.stdtr(df, -abs(difference) / scale)))
    low, high = difference - half, difference + half
    return Inference(test, difference, p, low, high, sigma, seeds, scale, df, **kw)  # type: ignore[arg-type]


def infer(
    a: Sequence[float],
    b: Sequence[float],
    *,
    pairs: Sequence[tuple[int, int]] | None = None,
    stand_in: StandIn | None = None,
    confidence: float = CONFIDENCE,
) -> Inference | None:
    """Arm B against arm A (one value per seed) by the test the arms allow (see the module doc);
    `pairs` (index in A, index in B) when the arms ran the same seeds, every run of both arms in
    one. None when nothing can be judged (one run per arm and no stand-in)."""
    av, bv = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not len(av) or not len(bv):
        return None
    difference = float(np.mean(bv) - np.mean(av))
    variances = [float(np.var(x, ddof=1)) for x in (av, bv) if len(x) >= 2]
    sigma = math.sqrt(sum(variances) / len(variances)) if variances else math.nan
    if pairs is not None and len(pairs) >= 2 and len(pairs) == len(av) == len(bv):
        gaps = np.array([bv[j] - av[i] for i, j in pairs])
        spread, n = float(np.std(gaps, ddof=1)), len(gaps)
        return _t_test(
            PAIRED, difference, spread / math.sqrt(n), n - 1, sigma, n, confidence, paired=True, sigma_of_pairs=spread
        )
    if len(av) >= 2 and len(bv) >= 2:
        # Welch: each arm's own variance, the Welch–Satterthwaite degrees of freedom
        va, vb = float(np.var(av, ddof=1)) / len(av), float(np.var(bv, ddof=1)) / len(bv)
        total = va + vb
        df = total**2 / (va**2 / (len(av) - 1) + vb**2 / (len(bv) - 1)) if total else len(av) + len(bv) - 2.0
        return _t_test(WELCH, difference, math.sqrt(total), df, sigma, min(len(av), len(bv)), confidence)
    if len(av) >= 2 or len(bv) >= 2:
        group = av if len(av) >= 2 else bv
        scale = sigma * math.sqrt(1 + 1 / len(group))
        return _t_test(AGAINST_GROUP, difference, scale, len(group) - 1, sigma, 1, confidence)
    if stand_in is None or not math.isfinite(stand_in.sigma) or stand_in.seeds < 2:
        return None
    scale = stand_in.sigma * math.sqrt(2)
    return _t_test(STAND_IN, difference, scale, stand_in.seeds - 1, stand_in.sigma, 1, confidence, stand_in=stand_in)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (each compared with α keeps the family-wise error at α)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def power(difference: float, scale: float, df: float, *, alpha: float = ALPHA) -> float:
    """The chance that a two-sided t-test at `alpha` finds a true `difference` whose estimate has
    standard error `scale` on `df` degrees of freedom: the noncentral t distribution's tails beyond
    the critical values (scipy.special's `nctdtr`, the function behind `scipy.stats.nct`, called
    directly: the distribution object costs ~50x more per call, and a verdict calls it dozens of
    times while it solves for a detectable difference)."""
    from scipy import special

    if not scale > 0 or not df > 0:
        return math.nan
    shift = abs(difference) / scale
    critical = float(special.stdtrit(df, 1 - alpha / 2))
    found = float(1 - special.nctdtr(df, shift, critical) + special.nctdtr(df, shift, -critical))
    return min(1.0, found) if math.isfinite(found) else 1.0


def _design(sigma: float, seeds: int, paired: bool) -> tuple[float, float]:
    """(standard error, degrees of freedom) of a test with `seeds` per arm: two independent arms
    of standard deviation `sigma`, or pairs whose differences have it."""
    if paired:
        return sigma / math.sqrt(seeds), seeds - 1
    return sigma * math.sqrt(2 / seeds), 2 * seeds - 2


def detectable_difference(scale: float, df: float, *, alpha: float = ALPHA, wanted: float = POWER) -> float | None:
    """The smallest difference a test of standard error `scale` on `df` degrees of freedom finds
    with probability `wanted`."""
    from scipy import optimize, special

    if not scale > 0 or not df > 0 or not math.isfinite(scale):
        return None
    high = scale * (float(special.stdtrit(df, 1 - alpha / 2)) + 3)
    while power(high, scale, df, alpha=alpha) < wanted:
        high *= 2
    return float(optimize.brentq(lambda d: power(d, scale, df, alpha=alpha) - wanted, 0.0, high, xtol=1e-6 * scale))


def seeds_needed(
    difference: float, sigma: float, *, paired: bool = False, alpha: float = ALPHA, wanted: float = POWER
) -> int | None:
    """Seeds per arm at which a test finds `difference` with probability `wanted` (`sigma`: the
    seeds' standard deviation, or the pairs' differences' when `paired`); MAX_SEEDS + 1 when more
    than MAX_SEEDS are needed, None when nothing is known of the spread or the difference is 0."""
    if not math.isfinite(sigma) or not math.isfinite(difference) or difference == 0 or sigma < 0:
        return None
    if sigma == 0:
        return 2
    if power(difference, *_design(sigma, MAX_SEEDS, paired), alpha=alpha) < wanted:
        return MAX_SEEDS + 1
    low, high = 2, MAX_SEEDS  # power grows with the seeds: the first n that reaches it, by bisection
    while low < high:
        middle = (low + high) // 2
        if power(difference, *_design(sigma, middle, paired), alpha=alpha) >= wanted:
            high = middle
        else:
            low = middle + 1
    return low
