"""Ablation verdicts: read from the logged values, tested soundly (paired or Welch, an interval, an
effect size, the primary measure at α and the others gatekept and Holm-corrected), a power sentence
instead of "noise", and the confounders."""

from __future__ import annotations

import re

import numpy as np
import pytest
from holter_server.analysis.verdicts import (
    Arm,
    compare_arms,
    confounders,
    judge,
    logged_value,
    step_at_tokens,
)
from scipy import stats

STEPS = np.arange(0, 10_001, 100)
OFFSETS = (-0.006, 0.001, 0.006)  # three seeds 0.012 apart at every step


def curve(shift: float, seed: int, offset: float, steps: np.ndarray = STEPS) -> tuple[np.ndarray, np.ndarray]:
    """An eval loss falling to ~2, moved by `shift` and by its seed's `offset`, with point noise."""
    rng = np.random.default_rng(seed)
    return steps, 2 + 3 * np.exp(-steps / 2000) + shift + offset + rng.normal(0, 0.001, len(steps))


def arm(label: str, shift: float, seeds: range, offsets: tuple[float, ...] = OFFSETS) -> Arm:
    return Arm(label, {f"{label}{s}": curve(shift, s, offsets[i % len(offsets)]) for i, s in enumerate(seeds)})


def by_measure(a: Arm, b: Arm, **kw) -> dict:  # type: ignore[no-untyped-def]
    return {v.measure: v for v in compare_arms("eval_loss", a, b, **kw)}


def normal_scores(n: int) -> np.ndarray:
    """n values with mean 0 and sample standard deviation 1, spread as a normal sample is."""
    z = stats.norm.ppf((np.arange(n) + 0.5) / n)
    return z / z.std(ddof=1)


def test_the_issues_eight_seed_small_effect_is_a_real_effect_with_its_interval() -> None:
    # 8 seeds per arm, seed SD 0.032, a difference of -0.077 at Welch p = 0.00025: every value of
    # each arm lies inside the other arm's range, which the old rule called "noise"
    sd = 0.077 / (stats.t.ppf(1 - 0.00025 / 2, 14) * 0.5)
    a = list(2.0 + sd * normal_scores(8))
    b = list(2.0 - 0.077 + sd * normal_scores(8))
    assert np.ptp(a) > 0.077
    v = judge("eval_loss", "at_step", "at step 300", a, b)
    assert v.verdict == "real effect" and v.test == "Welch's t-test" and abs(v.p_value - 0.00025) < 1e-6
    low, high = v.interval
    assert low < -0.077 < high < 0 and abs((low + high) / 2 + 0.077) < 1e-9
    assert v.sentence == (
        "eval_loss 0.077 lower at step 300 (95% CI -0.1109 to -0.04306; 2.4 seed SDs; Welch's t-test, "
        "8 seeds per arm, p = 0.00025): a real effect"
    )


def test_no_difference_found_is_never_called_noise_and_says_what_more_seeds_would_find() -> None:
    found = by_measure(arm("a", 0.0, range(3)), arm("b", -0.002, range(10, 13)))
    assert {v.verdict for v in found.values()} == {"no detectable difference"}
    v = found["at_step"]
    assert "noise" not in v.sentence and v.power_sentence is not None
    assert v.power_sentence.startswith("no detectable difference at 3 seeds per arm; a difference of ")
    assert "or more would be found 80% of the time" in v.power_sentence
    assert v.detectable is not None and v.detectable > abs(v.difference)
    assert v.seeds_needed is not None and v.seeds_needed > 3
    assert re.search(r"\(95% CI -0\.0\d+ to \+0\.0\d+; ", v.sentence), v.sentence


def test_a_difference_well_outside_the_seed_spread_is_a_real_effect() -> None:
    v = by_measure(arm("a", 0.0, range(3)), arm("b", -0.031, range(10, 13)))["at_step"]
    assert v.verdict == "real effect" and v.p_value < 0.05 and v.primary
    assert abs(v.difference + 0.031) < 0.006 and v.interval[1] < 0
    assert v.sentence.startswith("eval_loss 0.0") and " lower at step 10,000 (95% CI -0.0" in v.sentence
    assert v.sentence.endswith(f"Welch's t-test, 3 seeds per arm, p = {v.p_value:.2g}): a real effect")


def test_arms_that_ran_the_same_seeds_are_compared_pair_by_pair() -> None:
    # each seed moves the loss by far more than the change does, the same way in both arms
    seed_effects = (-0.05, -0.02, 0.0, 0.03, 0.06)

    def arms(shared: bool) -> tuple[Arm, Arm]:
        def one(label: str, shift: float) -> Arm:
            curves = {f"{label}{i}": curve(shift, 100 * i + len(label), e) for i, e in enumerate(seed_effects)}
            seeds = {f"{label}{i}": f"seed={i}" for i in range(len(seed_effects))} if shared else {}
            return Arm(label, curves, seeds=seeds)

        return one("a", 0.0), one("bb", -0.004)

    paired = by_measure(*arms(shared=True))["at_step"]
    assert paired.test == "paired t-test" and paired.paired and paired.verdict == "real effect"
    assert "paired t-test, 5 paired seeds" in paired.sentence
    unpaired = by_measure(*arms(shared=False))["at_step"]
    assert unpaired.test == "Welch's t-test" and unpaired.verdict == "no detectable difference"


def test_the_final_value_is_the_one_logged_at_the_last_step_not_a_fit() -> None:
    # an eval every 50 steps ending at 299, its last point above the line through the points before
    steps = np.array([0, 50, 100, 150, 200, 250, 299])
    values = np.array([3.0, 2.6, 2.4, 2.3, 2.2, 2.1, 2.15])
    a = Arm("a", {f"a{i}": (steps, values + d) for i, d in enumerate((-0.004, 0.0, 0.004))})
    b = Arm("b", {f"b{i}": (steps, values + 0.01 + d) for i, d in enumerate((-0.004, 0.0, 0.004))})
    v = by_measure(a, b)["final"]
    assert v.a_values == pytest.approx([2.146, 2.15, 2.154]) and v.interpolated == []
    assert v.spread == pytest.approx(0.008)


def test_values_between_logged_steps_are_interpolated_and_the_verdict_says_so() -> None:
    every_50, every_40 = np.arange(0, 401, 50), np.arange(0, 401, 40)
    line = lambda s: 3 - s / 400  # noqa: E731
    a = Arm("a", {f"a{i}": (every_50, line(every_50) + d) for i, d in enumerate((-0.01, 0.0, 0.01))})
    b = Arm("b", {f"b{i}": (every_40, line(every_40) + d) for i, d in enumerate((-0.01, 0.0, 0.01))})
    v = by_measure(a, b, at_step=100)["at_step"]
    assert v.interpolated == ["b0", "b1", "b2"] and v.b_values == pytest.approx([2.74, 2.75, 2.76])
    assert "3 of the 6 runs logged no point there: their values lie on the line between the logged points" in v.sentence
    assert logged_value(every_40, line(every_40), 80).interpolated is False


def test_matched_tokens_compare_where_each_run_reached_the_same_count() -> None:
    # arm b processes twice the tokens per step: at matched steps it looks better, at matched tokens it is the same
    steps = np.arange(0, 1001, 10)
    loss = lambda tokens: 2 + 3 * np.exp(-tokens / 2e5)  # noqa: E731
    a = Arm("a", {"a": (steps, loss(steps * 500.0))}, tokens={"a": (steps, steps * 500.0)})
    b = Arm("b", {"b": (steps, loss(steps * 1000.0))}, tokens={"b": (steps, steps * 1000.0)})
    found = by_measure(a, b)
    assert found["at_step"].difference < -0.1
    assert found["at_tokens"].tokens == 500_000 and abs(found["at_tokens"].difference) < 1e-3
    assert found["at_tokens"].where == "at 500k tokens" and found["at_tokens"].primary


def test_the_matched_token_value_is_the_logged_point_when_the_count_falls_on_a_logged_step() -> None:
    evals = np.arange(0, 301, 50)
    logged = np.array([4.0, 3.0, 2.6, 2.5, 2.45, 2.4, 2.6])  # the last eval went up: a fit would smooth it away
    counter = (np.arange(0, 301), np.arange(0, 301) * 1000.0)
    a = Arm(
        "a", {f"a{i}": (evals, logged + d) for i, d in enumerate((0.0, 0.01))}, {f"a{i}": counter for i in range(2)}
    )
    b = Arm(
        "b", {f"b{i}": (evals, logged + d) for i, d in enumerate((0.0, 0.01))}, {f"b{i}": counter for i in range(2)}
    )
    v = by_measure(a, b)["at_tokens"]
    assert v.a_values == [2.6, 2.61] and v.difference == 0 and v.interpolated == []


def test_the_step_at_a_token_count_follows_the_counter() -> None:
    assert step_at_tokens((np.array([0, 10, 20]), np.array([0.0, 100.0, 300.0])), 200.0) == 15.0
    assert step_at_tokens((np.array([0, 10]), np.array([0.0, 100.0])), 500.0) is None


def test_a_secondary_measure_is_not_claimed_when_the_primary_found_nothing() -> None:
    # the arms are the same at the end (the primary) and differ early on: only the area sees it
    steps = np.arange(0, 101)
    early = lambda shift: np.where(steps < 50, 2.0 + shift, 1.0)  # noqa: E731
    a = Arm("a", {f"a{i}": (steps, early(0.0) + d) for i, d in enumerate((-0.01, 0.0, 0.01))})
    b = Arm("b", {f"b{i}": (steps, early(0.1) + d) for i, d in enumerate((-0.01, 0.0, 0.01))})
    found = by_measure(a, b)
    assert found["at_step"].primary and found["at_step"].p_value == 1.0
    area = found["auc"]
    assert area.p_value < 0.05 and area.p_adjusted == 1.0 and area.verdict == "no detectable difference"
    assert "adjusted 1 (secondary to at step 100; Holm over 2)" in area.sentence


def test_secondary_measures_are_holm_corrected_after_the_primary() -> None:
    found = by_measure(arm("a", 0.0, range(3)), arm("b", -0.031, range(10, 13)))
    lead = found["at_step"]
    others = [found["final"], found["auc"]]
    assert lead.p_adjusted == lead.p_value
    smaller, larger = sorted(others, key=lambda v: v.p_value)
    assert smaller.p_adjusted == pytest.approx(max(lead.p_value, 2 * smaller.p_value))
    assert larger.p_adjusted == pytest.approx(max(lead.p_value, smaller.p_adjusted, larger.p_value))


def test_the_primary_measure_can_be_chosen_up_front() -> None:
    found = by_measure(arm("a", 0.0, range(3)), arm("b", -0.031, range(10, 13)), primary="auc")
    assert [v.measure for v in found.values() if v.primary] == ["auc"]
    with pytest.raises(ValueError, match="the primary measure 'at_tokens' cannot be read for both arms"):
        by_measure(arm("a", 0.0, range(3)), arm("b", -0.031, range(10, 13)), primary="at_tokens")


def test_with_one_run_per_arm_and_nothing_to_stand_in_it_cannot_be_judged() -> None:
    v = by_measure(arm("a", 0.0, range(1)), arm("b", -0.031, range(10, 11)))["at_step"]
    assert v.verdict == "unknown" and v.p_value is None and v.seeds_needed is None
    assert "with one run per arm: it cannot be judged, since nothing measures how far seeds" in v.sentence


def test_with_one_run_per_arm_a_measured_seed_spread_stands_in_and_is_named() -> None:
    group = arm("g", 0.0, range(30, 34), offsets=(-0.006, -0.002, 0.002, 0.006))
    group.label = "run a0's seed group (4 seeds)"
    v = by_measure(arm("a", 0.0, range(1)), arm("b", -0.031, range(10, 11)), stand_in=group)["at_step"]
    assert v.verdict == "real effect" and v.test == "t-test on a stand-in seed spread"
    assert v.stand_in is not None and v.stand_in.seeds == 4 and 0.004 < v.stand_in.sigma < 0.007
    assert "The seed spread of run a0's seed group (4 seeds) (SD 0.00" in v.sentence and "stands in" in v.sentence
    small = by_measure(arm("a", 0.0, range(1)), arm("b", 0.0, range(10, 11)), stand_in=group)["at_step"]
    assert small.verdict == "no detectable difference" and small.power_sentence.startswith(
        "no detectable difference at one run per arm"
    )


def test_a_run_far_outside_a_groups_seeds_is_a_real_effect_and_one_inside_is_not_detected() -> None:
    group = arm("g", 0.0, range(4), offsets=(-0.006, -0.002, 0.002, 0.006))
    far = by_measure(group, arm("r", -0.05, range(20, 21), offsets=(0.0,)))["at_step"]
    assert far.verdict == "real effect" and far.test == "t-test against the group's seeds"
    assert "one run against 4 seeds" in far.sentence
    assert by_measure(group, Arm("r", {"r": group.curves["g1"]}))["at_step"].verdict == "no detectable difference"


def test_the_area_measure_reads_the_mean_level_over_the_range() -> None:
    steps = np.arange(0, 101)
    a, b = Arm("a", {"a": (steps, np.full(101, 1.0))}), Arm("b", {"b": (steps, np.where(steps < 50, 2.0, 1.0))})
    v = by_measure(a, b, step_range=(0, 100))["auc"]
    assert abs(v.difference - 0.5) < 0.02 and v.step_range == (0, 100) and "over steps 0–100" in v.where


def test_a_confounded_ablation_names_every_changed_key_and_the_learning_rate() -> None:
    found = confounders(
        {"lr": 3e-4, "batch_size": 32, "model": "small"}, {"lr": 6e-4, "batch_size": 64, "model": "small"}
    )
    assert [c.key for c in found.changes] == ["batch_size", "lr"]
    assert any(w.startswith("this ablation changed batch_size and lr") for w in found.warnings)
    assert any(
        w.startswith("the learning rate differs (lr 0.0003 → 0.0006) along with batch_size") for w in found.warnings
    )


def test_an_ablation_of_the_learning_rate_alone_is_not_told_to_re_tune_it() -> None:
    found = confounders({"lr": 3e-4, "norm": "rms"}, {"lr": 6e-4, "norm": "rms"})
    assert [c.describe() for c in found.changes] == ["lr 0.0003 → 0.0006"] and found.warnings == []
    nested = confounders({"optim.lr": 3e-4}, {"optim.lr": 1e-3})
    assert nested.warnings == []


def test_a_clean_ablation_raises_no_warning() -> None:
    found = confounders({"lr": 3e-4, "norm": "layer"}, {"lr": 3e-4, "norm": "rms"}, tokens_a=1e9, tokens_b=1.005e9)
    assert [c.describe() for c in found.changes] == ["norm layer → rms"] and found.warnings == []


def test_different_token_counts_are_flagged() -> None:
    found = confounders({"x": 1}, {"x": 2}, tokens_a=1.2e9, tokens_b=1.5e9)
    assert found.warnings == [
        "the arms saw different token counts (1.2B vs 1.5B): read the comparison at matched tokens"
    ]


def test_without_a_token_counter_different_lengths_are_flagged() -> None:
    found = confounders({"x": 1}, {"x": 2}, last_step_a=10_000, last_step_b=12_000)
    assert len(found.warnings) == 1 and "different steps (10,000 vs 12,000)" in found.warnings[0]
