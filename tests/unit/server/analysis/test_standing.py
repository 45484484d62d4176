"""Where a run ends against its seed siblings: the numbers, and the verdicts' judgement."""

from __future__ import annotations

import re

import numpy as np
from holter_server.analysis.standing import standing

STEPS = np.arange(0, 5_001, 50)
OFFSETS = (-0.006, 0.001, 0.006)  # three seeds 0.012 apart


def curve(shift: float, seed: int, steps: np.ndarray = STEPS) -> tuple[np.ndarray, np.ndarray]:
    noise = np.random.default_rng(seed).normal(0, 0.0005, len(steps))
    return steps, 2 + 3 * np.exp(-steps / 1000) + shift + noise


SEEDS = {f"s{i}": curve(offset, i) for i, offset in enumerate(OFFSETS)}


def test_a_run_far_above_its_seeds_is_outside_the_spread_with_the_numbers() -> None:
    found = standing("eval_loss", curve(0.031, 9), SEEDS)
    assert found is not None and found.verdict.verdict == "real effect" and found.step == 5_000
    ends = re.match(
        r"eval_loss ends ([0-9.]+) above its 3-seed group's mean \(at step 5,000, its last: this run 2\.0",
        found.sentence,
    )
    assert ends and 0.028 < float(ends.group(1)) < 0.034, found.sentence
    assert (
        "the seed spread there is 0.01" in found.sentence
        and ": outside the spread, a real difference" in found.sentence
    )
    assert (
        found.clause.startswith("eval_loss ends 0.0")
        and "above its 3-seed group's mean, outside the spread of 0.01" in found.clause
    )


def test_a_run_among_its_seeds_is_noise() -> None:
    found = standing("eval_loss", curve(0.002, 9), SEEDS)
    assert found is not None and found.verdict.verdict == "noise"
    assert found.sentence.endswith("inside the seed spread: noise")
    assert found.clause.endswith(
        "inside the seed spread of " + found.sentence.split("the seed spread there is ")[1].split(":")[0] + ": noise"
    )


def test_one_sibling_gives_no_standing() -> None:
    assert standing("eval_loss", curve(0.0, 9), {"s0": SEEDS["s0"]}) is None


def test_a_run_that_went_further_is_read_where_its_seeds_all_still_are() -> None:
    found = standing("eval_loss", curve(0.0, 9, np.arange(0, 8_001, 50)), SEEDS)
    assert found is not None and found.step == 5_000 and not found.at_run_end
    assert "the last step all its seeds reached (it ran to 8,000)" in found.sentence
