"""A run that leaves its reference's band for long enough has drifted; noise does not count."""

from __future__ import annotations

import numpy as np
from holter_server.postmortem.reference import drifts


def curve(steps: np.ndarray, rng: np.random.Generator, noise: float = 0.02) -> np.ndarray:
    return 2.0 + 8.0 * np.exp(-steps / 3000) + rng.normal(0, noise, len(steps))


def test_a_run_that_tracks_its_reference_does_not_drift() -> None:
    rng = np.random.default_rng(0)
    steps = np.arange(0, 40_000, 200)
    _, found = drifts("eval_loss", steps, curve(steps, rng), steps, curve(steps, rng))
    assert found == []


def test_a_run_that_runs_above_its_reference_from_20k_drifts_there() -> None:
    rng = np.random.default_rng(1)
    steps = np.arange(0, 40_000, 200)
    run = curve(steps, rng) + np.where(steps >= 20_000, 0.12, 0.0)
    _, (drift,) = drifts("eval_loss", steps, curve(steps, rng), steps, run)
    assert drift.direction == "above" and 19_800 <= drift.start_step <= 20_600 and abs(drift.mean_gap - 0.12) < 0.03
    text = drift.summary({"loss": True})
    assert (
        text.startswith("eval_loss ran 0.1")
        and "above the reference from step 2" in text
        and "while loss matches" in text
    )


def test_runs_logged_at_other_steps_are_aligned_by_interpolation() -> None:
    rng = np.random.default_rng(2)
    ref_steps, run_steps = np.arange(0, 10_000, 50), np.arange(25, 10_000, 120)
    _, found = drifts(
        "loss", ref_steps, curve(ref_steps, rng), run_steps, curve(run_steps, rng) - np.where(run_steps > 6000, 0.3, 0)
    )
    assert [d.direction for d in found] == ["below"]


def test_a_few_noisy_points_outside_the_band_are_not_a_drift() -> None:
    rng = np.random.default_rng(3)
    steps = np.arange(0, 10_000, 100)
    run = curve(steps, rng)
    run[[30, 31, 60]] += 1.0
    _, found = drifts("loss", steps, curve(steps, rng), steps, run)
    assert found == []
