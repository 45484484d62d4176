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


def test_a_run_far_above_its_seeds_is_a_real_difference_with_the_numbers() -> None:
    found = standing("eval_loss", curve(0.031, 9), SEEDS)
    assert found is not None and found.verdict.verdict == "real effect" and found.step == 5_000
    ends = re.match(
        r"eval_loss ends ([0-9.]+) above its 3-seed group's mean \(at step 5,000, its last: this run 2\.0",
        found.sentence,
    )
    assert ends and 0.028 < float(ends.group(1)) < 0.034, found.sentence
    assert "the seeds' standard deviation there is 0.005" in found.sentence
    assert re.search(
        r": a real difference \(95% CI \+0\.00\d+ to \+0\.0\d+; t-test against the 3 seeds p = 0\.0", found.sentence
    )
    assert (
        found.clause.startswith("eval_loss ends 0.0")
        and "above its 3-seed group's mean, a real difference (seed SD 0.005" in found.clause
    )


def test_a_run_among_its_seeds_is_no_detectable_difference_and_says_what_would_be() -> None:
    found = standing("eval_loss", curve(0.002, 9), SEEDS)
    assert found is not None and found.verdict.verdict == "no detectable difference"
    assert "no detectable difference from its seeds (t-test against the 3 seeds p = " in found.sentence
    assert found.sentence.endswith("or more would be found 80% of the time") and "noise" not in found.sentence
    assert found.clause.endswith(
        "no detectable difference (seed SD " + found.sentence.split("deviation there is ")[1].split(":")[0] + ")"
    )


def test_the_run_and_its_seeds_are_read_at_their_logged_points() -> None:
    found = standing("eval_loss", curve(0.0, 9), SEEDS)
    assert found is not None and found.run_value == curve(0.0, 9)[1][-1]
    assert found.seed_values == [c[1][-1] for c in SEEDS.values()]


def test_one_sibling_gives_no_standing() -> None:
    assert standing("eval_loss", curve(0.0, 9), {"s0": SEEDS["s0"]}) is None


def test_a_run_that_went_further_is_read_where_its_seeds_all_still_are() -> None:
    found = standing("eval_loss", curve(0.0, 9, np.arange(0, 8_001, 50)), SEEDS)
    assert found is not None and found.step == 5_000 and not found.at_run_end
    assert "the last step all its seeds reached (it ran to 8,000)" in found.sentence
