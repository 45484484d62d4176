"""The bucket arithmetic behind the rollups: summaries match a brute-force count, and merging
fine buckets gives exactly the coarse ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
from holter_server.store.rollup_buckets import (
    LEVELS,
    NO_STEP,
    bucket_points,
    concat_buckets,
    first_stored_bucket,
    levels_of,
    merge_buckets,
)


def noisy_series(seed: int, n: int = 5000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    steps = np.unique(rng.integers(0, 40_000, n))
    values = rng.normal(size=len(steps)).round(1)  # rounding makes ties between extremes common
    for bad in (math.nan, math.inf, -math.inf):
        values[rng.integers(0, len(values), 30)] = bad
    values[rng.integers(0, len(values), 1)[0] :][:40] = math.nan  # a bucket or two with nothing finite
    return steps, values


def brute_force(steps: np.ndarray, values: np.ndarray, shift: int) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for step, value in zip(steps.tolist(), values.tolist()):
        b = out.setdefault(
            step >> shift,
            {
                "count": 0,
                "sum": 0.0,
                "min": None,
                "max": None,
                "nan": 0,
                "posinf": 0,
                "neginf": 0,
                "first": step,
                "last": step,
            },
        )
        b["count"] += 1
        b["last"] = step
        if math.isnan(value):
            b["nan"] += 1
        elif value == math.inf:
            b["posinf"] += 1
        elif value == -math.inf:
            b["neginf"] += 1
        else:
            b["sum"] += value
            if b["min"] is None or value < b["min"][0]:
                b["min"] = (value, step)
            if b["max"] is None or value > b["max"][0]:
                b["max"] = (value, step)
    return out


@pytest.mark.parametrize("shift", [0, 4, 7])
def test_bucket_summaries_match_a_brute_force_count(shift: int) -> None:
    steps, values = noisy_series(seed=shift)
    buckets = bucket_points(steps, values, shift)
    expected = brute_force(steps, values, shift)
    assert buckets.bucket.tolist() == sorted(expected)
    for i, number in enumerate(buckets.bucket.tolist()):
        want = expected[number]
        assert (buckets.count[i], buckets.nan_count[i], buckets.posinf_count[i], buckets.neginf_count[i]) == (
            want["count"],
            want["nan"],
            want["posinf"],
            want["neginf"],
        )
        assert (buckets.first_step[i], buckets.last_step[i]) == (want["first"], want["last"])
        assert buckets.finite_sum[i] == pytest.approx(want["sum"])
        if want["min"] is None:
            assert (
                buckets.min_step[i] == NO_STEP and buckets.max_step[i] == NO_STEP and math.isnan(buckets.min_value[i])
            )
        else:
            assert (buckets.min_value[i], buckets.min_step[i]) == want["min"]
            assert (buckets.max_value[i], buckets.max_step[i]) == want["max"]


def test_merging_fine_buckets_gives_the_coarse_ones_exactly() -> None:
    steps, values = noisy_series(seed=11)
    merged = merge_buckets(bucket_points(steps, values, 4), 4)
    direct = bucket_points(steps, values, 8)
    for name in (
        "bucket",
        "count",
        "min_step",
        "max_step",
        "first_step",
        "last_step",
        "nan_count",
        "posinf_count",
        "neginf_count",
    ):
        assert getattr(merged, name).tolist() == getattr(direct, name).tolist(), name
    np.testing.assert_allclose(merged.finite_sum, direct.finite_sum, atol=1e-9)


def test_every_level_summarises_the_points_of_its_stored_buckets() -> None:
    steps, values = noisy_series(seed=5)
    for level, buckets in levels_of(steps, values):
        inside = steps >= first_stored_bucket(level) << level
        assert buckets.count.sum() == inside.sum()
        if not inside.any():
            continue
        assert np.nanmax(buckets.max_value) == values[inside & np.isfinite(values)].max(), level


def test_bucket_0_is_stored_at_the_finest_level_only() -> None:
    steps = np.arange(0, 40_000, 7)
    stored = dict(levels_of(steps, np.ones(len(steps))))
    assert stored[LEVELS[0]].bucket[0] == 0
    assert all(0 not in buckets.bucket.tolist() for level, buckets in stored.items() if level != LEVELS[0])
    assert [level for level, buckets in stored.items() if len(buckets)] == [6, 10, 14]  # 40,000 < 2**18


def test_summaries_of_disjoint_ranges_merge_into_one_bucket() -> None:
    steps, values = noisy_series(seed=3)
    left, right = steps < 20_000, steps >= 20_000
    parts = concat_buckets([bucket_points(steps[right], values[right], 4), bucket_points(steps[left], values[left], 4)])
    together = merge_buckets(merge_buckets(parts, 0), 20)
    assert together.count.tolist() == [len(steps)]
    assert together.first_step.tolist() == [steps[0]] and together.last_step.tolist() == [steps[-1]]
