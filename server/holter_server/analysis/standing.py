"""Where a run ends relative to its seed group, on a metric, in words with the numbers. Pure.

The post-mortem asks the seed question of one run: is where it ended something its config does
(the other seeds end there too) or something this seed did? The run is one arm and its seed
siblings (the run itself left out, so it is not measured against itself) the other; the
judgement is `analysis.verdicts.judge`'s: the difference is the run's logged value less the
seeds' mean, and a prediction t-test of the run against the seeds says whether it is a real
difference (with its confidence interval) or none that these seeds can detect (with what they
could).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from holter_server.analysis.seeds import finite_curve
from holter_server.analysis.verdicts import REAL, Curve, Verdict, judge, logged_value, signed
from holter_server.detect.events import format_step, format_value

MIN_SEEDS = 2  # siblings needed for a seed spread: with one there is no spread to be inside


@dataclass
class Standing:
    """The run against its seeds on one metric at `step` (the run's last step, or the last step
    every seed reached when the run went further): the values read, the verdict, and the words."""

    metric: str
    step: int
    at_run_end: bool
    run_value: float
    seed_values: list[float]
    verdict: Verdict
    sentence: str  # the report's: every number
    clause: str  # the post-mortem summary's: the gist

    @property
    def seeds(self) -> int:
        return len(self.seed_values)


def _verdict_text(verdict: Verdict, seeds: int) -> str:
    """The judgement in words, with the test's numbers."""
    found = verdict.inference
    if found is None:
        return "not judged"
    test = f"t-test against the {seeds} seeds p = {found.p_value:.2g}"
    if verdict.verdict == REAL:
        return f"a real difference (95% CI {signed(found.ci_low)} to {signed(found.ci_high)}; {test})"
    could = (
        f"; a difference of {format_value(verdict.detectable)} or more would be found 80% of the time"
        if verdict.detectable is not None
        else ""
    )
    return f"no detectable difference from its seeds ({test}){could}"


def _sd(verdict: Verdict) -> str:
    return format_value(verdict.sigma) if verdict.sigma is not None else "unknown"


def standing(metric: str, run_curve: Curve, seed_curves: Mapping[str, Curve]) -> Standing | None:
    """The run's standing among `seed_curves` (sibling id → curve) on `metric`; None when the run
    or fewer than MIN_SEEDS siblings have a finite point."""
    run_steps, _ = finite_curve(*run_curve)
    seeds = {r: c for r, c in seed_curves.items() if len(finite_curve(*c)[0])}
    if not len(run_steps) or len(seeds) < MIN_SEEDS:
        return None
    end = int(run_steps[-1])
    step = min(end, *(int(finite_curve(*c)[0][-1]) for c in seeds.values()))
    seed_values = [logged_value(*c, step).value for c in seeds.values()]
    run_value = logged_value(*run_curve, step).value
    at_end = step == end
    where = "at the end" if at_end else f"at step {format_step(step)}"
    verdict = judge(metric, "at_step", where, seed_values, [run_value])
    verdict.step = step
    gap = verdict.difference
    n = len(seed_values)
    place = (
        f"ends level with its {n}-seed group's mean"
        if gap == 0
        else f"ends {format_value(abs(gap))} {'above' if gap > 0 else 'below'} its {n}-seed group's mean"
    )
    when = (
        f"at step {format_step(step)}, its last"
        if at_end
        else f"at step {format_step(step)}, the last step all its seeds reached (it ran to {format_step(end)})"
    )
    numbers = (
        f"{when}: this run {format_value(run_value)}, the seeds' median {format_value(float(np.median(seed_values)))}, "
        f"range {format_value(min(seed_values))}–{format_value(max(seed_values))}"
    )
    sentence = (
        f"{metric} {place} ({numbers}); the seeds' standard deviation there is {_sd(verdict)}: "
        f"{_verdict_text(verdict, n)}"
    )
    judged = "a real difference" if verdict.verdict == REAL else "no detectable difference"
    clause = f"{metric} {place}, {judged} (seed SD {_sd(verdict)})"
    return Standing(metric, step, at_end, run_value, seed_values, verdict, sentence, clause)
