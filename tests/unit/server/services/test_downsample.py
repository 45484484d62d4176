"""Downsampling: bucket widths, the cover of a range by rollup levels, and the points drawn."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from holter_server.services.downsample import choose_shift, cover, minmax_points
from holter_server.services.reads import natural_key
from holter_server.store.rollup_buckets import (
    LEVELS,
    bucket_points,
    concat_buckets,
    first_stored_bucket,
    levels_of,
    merge_buckets,
)


@pytest.mark.parametrize(
    "start,end,max_buckets", [(0, 9_999_999, 1000), (123, 456_789, 50), (7, 7, 1), (5, 1_000_004, 999)]
)
def test_bucket_width_is_the_narrowest_power_of_two_that_fits(start: int, end: int, max_buckets: int) -> None:
    shift = choose_shift(start=start, end=end, max_buckets=max_buckets)
    assert (end >> shift) - (start >> shift) + 1 <= max_buckets
    assert shift == 0 or (end >> (shift - 1)) - (start >> (shift - 1)) + 1 > max_buckets


@pytest.mark.parametrize(
    "start,end,shift", [(0, 9_999_999, 14), (12_345, 987_654, 9), (3, 20, 2), (17, 1 << 30, 21), (0, 15, 40)]
)
def test_cover_tiles_the_range_exactly_with_levels_no_wider_than_the_buckets(start: int, end: int, shift: int) -> None:
    pieces, raw = cover(start=start, end=end, shift=shift)
    spans = [(lo << level, ((hi + 1) << level) - 1) for level, lo, hi in pieces] + raw
    spans.sort()
    assert spans[0][0] == start and spans[-1][1] == end
    assert all(a[1] + 1 == b[0] for a, b in zip(spans, spans[1:]))  # no gap, no overlap
    assert all(level <= shift and level in LEVELS for level, _, _ in pieces)
    assert all(lo >= first_stored_bucket(level) for level, lo, _ in pieces)  # only buckets the store keeps
    assert sum(last - first + 1 for first, last in raw) < 2 * (1 << LEVELS[0])


@pytest.mark.parametrize("start", [0, 1, 5_000_000])
def test_cover_reads_a_bounded_number_of_rollup_rows(start: int) -> None:
    shift = choose_shift(start=start, end=10_000_000, max_buckets=1000)
    pieces, _raw = cover(start=start, end=10_000_000, shift=shift)
    rows = sum(hi - lo + 1 for _, lo, hi in pieces)
    assert rows <= 16 * 1000 + 2 * 15 * len(LEVELS)


@pytest.mark.parametrize("offset", [0, 3_000, 10**9])
@pytest.mark.parametrize("shift", [6, 9, 10, 13, 17, 30, 40])
def test_the_stored_buckets_and_points_a_cover_names_summarise_the_range_exactly(offset: int, shift: int) -> None:
    rng = np.random.default_rng(shift)
    steps = offset + np.unique(rng.integers(0, 300_000, 20_000))
    values = rng.normal(size=len(steps))
    values[rng.integers(0, len(steps), 50)] = rng.choice([math.nan, math.inf, -math.inf, 1e9], 50)
    stored = dict(levels_of(steps, values))
    for start, end in [(0, int(steps[-1])), (int(steps[5]), int(steps[-7])), (offset + 1_000, offset + 70_000)]:
        pieces, raw = cover(start=start, end=end, shift=shift)
        parts = []
        for level, lo, hi in pieces:
            rows = stored[level].take((stored[level].bucket >= lo) & (stored[level].bucket <= hi))
            parts.append(replace(rows, bucket=rows.bucket >> (shift - level)))
        for first, last in raw:
            inside = (steps >= first) & (steps <= last)
            parts.append(bucket_points(steps[inside], values[inside], shift))
        got = merge_buckets(concat_buckets(parts), 0)
        inside = (steps >= start) & (steps <= end)
        want = bucket_points(steps[inside], values[inside], shift)
        for name in ("bucket", "count", "min_step", "max_step", "first_step", "last_step", "nan_count", "posinf_count"):
            assert getattr(got, name).tolist() == getattr(want, name).tolist(), (start, end, name)
        np.testing.assert_array_equal(got.min_value, want.min_value)
        np.testing.assert_array_equal(got.max_value, want.max_value)
        np.testing.assert_array_equal(got.last_value, want.last_value)
        np.testing.assert_allclose(got.finite_sum, want.finite_sum, rtol=1e-12, atol=1e-6)


def test_a_single_step_spike_is_drawn_at_its_height_and_step() -> None:
    steps = np.arange(100_000)
    values = np.sin(steps / 1000.0)
    values[54_321] = 1e6
    drawn_steps, drawn_values = minmax_points(bucket_points(steps, values, 10))
    assert 1e6 in drawn_values.tolist()
    assert drawn_steps[drawn_values.tolist().index(1e6)] == 54_321


def test_each_bucket_gives_at_most_two_points_in_step_order() -> None:
    steps = np.arange(10_000)
    values = np.random.default_rng(1).normal(size=10_000)
    buckets = bucket_points(steps, values, 6)
    drawn_steps, _ = minmax_points(buckets)
    assert len(drawn_steps) <= 2 * len(buckets)
    assert np.all(np.diff(drawn_steps) > 0)


def test_a_bucket_with_nothing_finite_draws_its_first_value() -> None:
    steps = np.arange(64)
    values = np.r_[np.ones(32), np.full(32, math.nan)]
    values[40] = math.inf
    drawn_steps, drawn_values = minmax_points(bucket_points(steps, values, 5))
    assert drawn_steps.tolist()[-1] == 32 and math.isnan(drawn_values[-1])


def test_family_members_sort_by_layer_number() -> None:
    names = ["act_norm/layer.10", "act_norm/layer.2", "act_norm/layer.1"]
    assert sorted(names, key=natural_key) == ["act_norm/layer.1", "act_norm/layer.2", "act_norm/layer.10"]
