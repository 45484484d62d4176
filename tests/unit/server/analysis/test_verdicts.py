"""Ablation verdicts: a real effect, noise, and unknown with one seed; and the confounders."""

from __future__ import annotations

import numpy as np
from holter_server.analysis.verdicts import (
    Arm,
    compare_arms,
    confounders,
    judge,
    seeds_needed,
    step_at_tokens,
    value_at,
)

STEPS = np.arange(0, 10_001, 100)


OFFSETS = (-0.006, 0.001, 0.006)  # three seeds 0.012 apart at every step: a known seed spread


def curve(shift: float, seed: int, offset: float) -> tuple[np.ndarray, np.ndarray]:
    """An eval loss falling to ~2, moved by `shift` and by its seed's `offset`, with point noise."""
    rng = np.random.default_rng(seed)
    return STEPS, 2 + 3 * np.exp(-STEPS / 2000) + shift + offset + rng.normal(0, 0.001, len(STEPS))


def arm(label: str, shift: float, seeds: range, offsets: tuple[float, ...] = OFFSETS) -> Arm:
    return Arm(label, {f"{label}{s}": curve(shift, s, offsets[i % len(offsets)]) for i, s in enumerate(seeds)})


def by_measure(a: Arm, b: Arm, **kw) -> dict:  # type: ignore[no-untyped-def]
    return {v.measure: v for v in compare_arms("eval_loss", a, b, **kw)}


def test_a_difference_well_outside_the_seed_spread_is_a_real_effect() -> None:
    found = by_measure(arm("a", 0.0, range(3)), arm("b", -0.031, range(10, 13)))
    v = found["at_step"]
    assert v.verdict == "real effect" and v.p_value is not None and v.p_value < 0.05
    assert abs(v.difference + 0.031) < 0.012 and v.spread is not None and v.spread < abs(v.difference)
    assert v.sentence.startswith("eval_loss 0.0") and "lower at step 10,000; the seed spread there is" in v.sentence
    assert v.sentence.endswith("over 3 seeds (Welch's t-test p = " + f"{v.p_value:.2g}): a real effect")


def test_a_difference_inside_the_seed_spread_is_noise() -> None:
    found = by_measure(arm("a", 0.0, range(3)), arm("b", -0.002, range(10, 13)))
    assert {v.verdict for v in found.values()} == {"noise"}
    assert "inside the seed spread of" in found["final"].sentence and found["final"].sentence.endswith(": noise")


def test_with_one_run_per_arm_the_spread_is_unknown_and_the_seeds_needed_are_named() -> None:
    found = by_measure(arm("a", 0.0, range(1)), arm("b", -0.031, range(10, 11)))
    v = found["at_step"]
    assert v.verdict == "unknown" and v.spread is None and v.p_value is None
    assert v.seeds_needed is not None and v.seeds_needed >= 2
    assert (
        "with one run per arm: the seed spread is unknown; about" in v.sentence
        and "seeds per arm would settle" in v.sentence
    )


def test_a_run_far_outside_a_groups_seeds_is_a_real_effect_and_one_inside_is_noise() -> None:
    group = arm("g", 0.0, range(4), offsets=(-0.006, -0.002, 0.002, 0.006))
    assert by_measure(group, arm("r", -0.05, range(20, 21), offsets=(0.0,)))["at_step"].verdict == "real effect"
    assert by_measure(group, Arm("r", {"r": group.curves["g1"]}))["at_step"].verdict == "noise"


def test_outside_the_spread_but_not_significant_is_unknown_with_seeds_needed() -> None:
    v = judge("loss", "final", "at the end", [1.0, 1.2], [1.25, 1.5])
    assert v.verdict == "unknown" and v.p_value is not None and v.p_value >= 0.05
    assert v.seeds_needed is not None and v.seeds_needed > 2 and "not settled" in v.sentence


def test_seeds_needed_grows_as_the_difference_shrinks() -> None:
    assert seeds_needed(0.01, 0.05) == 2 and seeds_needed(0.01, 0.01) == 16 and seeds_needed(0.01, 0.001) == 101


def test_matched_tokens_compare_where_each_run_reached_the_same_count() -> None:
    # arm b processes twice the tokens per step: at matched steps it looks better, at matched tokens it is the same
    steps = np.arange(0, 1001, 10)
    loss = lambda tokens: 2 + 3 * np.exp(-tokens / 2e5)
    a = Arm("a", {"a": (steps, loss(steps * 500.0))}, tokens={"a": (steps, steps * 500.0)})
    b = Arm("b", {"b": (steps, loss(steps * 1000.0))}, tokens={"b": (steps, steps * 1000.0)})
    found = by_measure(a, b)
    assert found["at_step"].difference < -0.1
    assert found["at_tokens"].tokens == 500_000 and abs(found["at_tokens"].difference) < 1e-3
    assert found["at_tokens"].where == "at 500k tokens"


def test_the_step_at_a_token_count_follows_the_counter() -> None:
    assert step_at_tokens((np.array([0, 10, 20]), np.array([0.0, 100.0, 300.0])), 200.0) == 15.0
    assert step_at_tokens((np.array([0, 10]), np.array([0.0, 100.0])), 500.0) is None


def test_a_value_at_a_step_is_the_median_of_the_nearest_points() -> None:
    steps = np.arange(10)
    values = np.ones(10)
    values[5] = 100.0
    assert value_at(steps, values, 5) == 1.0


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
    assert any(w.startswith("the learning rate differs (lr 0.0003 → 0.0006)") for w in found.warnings)


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
