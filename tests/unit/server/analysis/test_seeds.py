"""Seed groups and their bands."""

from __future__ import annotations

import numpy as np
from holter_server.analysis.seeds import RunConfig, group_band, group_of, seed_groups


def test_runs_that_differ_only_in_seed_keys_form_one_group() -> None:
    runs = [
        RunConfig("a", {"lr": 3e-4, "seed": 1, "data": {"data_seed": 7}}),
        RunConfig("b", {"lr": 3e-4, "seed": 2, "data": {"data_seed": 8}}),
        RunConfig("c", {"lr": 3e-4, "init_seed": 5}),
        RunConfig("d", {"lr": 6e-4, "seed": 1}),
    ]
    groups = seed_groups(runs)
    assert [g.run_ids for g in groups] == [["a", "b", "c"], ["d"]]
    assert groups[0].seeds["b"] == {"seed": 2, "data.data_seed": 8} and groups[0].config == {"lr": 3e-4}


def test_a_key_the_project_declares_a_seed_groups_like_one() -> None:
    runs = [RunConfig("a", {"lr": 1, "rng": 1}), RunConfig("b", {"lr": 1, "rng": 2})]
    assert len(seed_groups(runs)) == 2
    assert group_of("a", runs, declared=("rng",)).run_ids == ["a", "b"]  # type: ignore[union-attr]


def test_integer_and_float_spellings_of_one_value_are_one_config() -> None:
    runs = [RunConfig("a", {"batch_size": 32, "seed": 1}), RunConfig("b", {"batch_size": 32.0, "seed": 2})]
    assert len(seed_groups(runs)) == 1


def test_the_band_is_the_median_with_min_max_and_a_robust_spread_on_a_shared_grid() -> None:
    steps = np.arange(0, 100, 10)
    curves = {"a": (steps, np.full(10, 1.0)), "b": (steps + 5, np.full(10, 2.0)), "c": (steps, np.full(10, 4.0))}
    band = group_band(curves)
    assert band.steps.tolist() == sorted(set(steps.tolist()) | set((steps + 5).tolist()))
    inside = (band.steps >= 5) & (band.steps <= 90)
    assert (
        np.allclose(band.median[inside], 2.0)
        and np.allclose(band.low[inside], 1.0)
        and np.allclose(band.high[inside], 4.0)
    )
    assert np.allclose(band.spread[inside], 1.4826)  # MAD of (1, 2, 4) around 2 is 1
    assert band.seeds[0] == 2 and band.seeds[-1] == 1  # b starts late; only b reaches step 95


def test_one_seed_that_spiked_does_not_widen_the_robust_spread() -> None:
    steps = np.arange(50)
    curves = {str(i): (steps, np.full(50, 1.0 + 0.01 * i)) for i in range(4)}
    spiked = curves["3"][1].copy()
    spiked[20] = 50.0
    curves["3"] = (steps, spiked)
    band = group_band(curves)
    assert band.high[20] == 50.0 and band.spread[20] < 0.05


def test_non_finite_points_are_left_out_of_the_band() -> None:
    steps = np.arange(5)
    band = group_band({"a": (steps, np.array([1.0, np.nan, 1.0, 1.0, 1.0])), "b": (steps, np.full(5, 3.0))})
    assert np.all(np.isfinite(band.median)) and band.median[1] == 2.0
