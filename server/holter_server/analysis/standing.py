"""Where a run ends relative to its seed group, on a metric, in words with the numbers. Pure.

The post-mortem asks the seed question of one run: is where it ended something its config does
(the other seeds end there too) or something this seed did? The run is one arm and its seed
siblings (the run itself left out, so it is not measured against itself) the other; the
judgement is `analysis.verdicts.judge`'s: the difference is the run's value less the seeds'
mean, `noise` when that is inside the seeds' range, else a prediction t-test of the run against
the seeds says whether it is a real difference or not settled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from holter_server.analysis.seeds import finite_curve
from holter_server.analysis.verdicts import NOISE, REAL, Curve, Verdict, judge, value_at
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


def _verdict_text(verdict: Verdict, seeds: int, spread_said: bool) -> str:
    """The judgement in words; `spread_said`: the sentence gave the spread already."""
    of = "" if spread_said else f" of {format_value(verdict.spread or 0.0)}"
    if verdict.verdict == NOISE:
        return f"inside the seed spread{of}: noise"
    p = f"t-test against the {seeds} seeds p = {verdict.p_value:.2g}" if verdict.p_value is not None else "no test"
    if verdict.verdict == REAL:
        return f"outside the spread{of}, a real difference ({p})"
    needed = f"; about {verdict.seeds_needed} seeds per arm would settle it" if verdict.seeds_needed else ""
    return f"outside the spread{of} but not settled ({p}){needed}"


def standing(metric: str, run_curve: Curve, seed_curves: Mapping[str, Curve]) -> Standing | None:
    """The run's standing among `seed_curves` (sibling id → curve) on `metric`; None when the run
    or fewer than MIN_SEEDS siblings have a finite point."""
    run_steps, _ = finite_curve(*run_curve)
    seeds = {r: c for r, c in seed_curves.items() if len(finite_curve(*c)[0])}
    if not len(run_steps) or len(seeds) < MIN_SEEDS:
        return None
    end = int(run_steps[-1])
    step = min(end, min(int(finite_curve(*c)[0][-1]) for c in seeds.values()))
    seed_values = [value_at(*c, step) for c in seeds.values()]
    run_value = value_at(*run_curve, step)
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
    spread = f"the seed spread there is {format_value(verdict.spread or 0.0)}"
    sentence = f"{metric} {place} ({numbers}); {spread}: {_verdict_text(verdict, n, spread_said=True)}"
    clause = f"{metric} {place}, {_verdict_text(verdict, n, spread_said=False)}"
    return Standing(metric, step, at_end, run_value, seed_values, verdict, sentence, clause)
