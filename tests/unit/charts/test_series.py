"""The dashboard's one decoding of API values, smoothing, and the x axis."""

from __future__ import annotations

import math

from holter_charts.series import Series, decode_values, ema, wall_clock


def test_values_from_the_api_keep_nan_and_infinities() -> None:
    values = decode_values([1.5, "NaN", "Infinity", "-Infinity", None])
    assert (
        values[0] == 1.5
        and math.isnan(values[1])
        and values[2] == math.inf
        and values[3] == -math.inf
        and math.isnan(values[4])
    )


def test_ema_skips_non_finite_values_and_continues_from_its_state() -> None:
    whole, _ = ema([1.0, 2.0, math.nan, 3.0, 4.0], 0.5)
    first, state = ema([1.0, 2.0, math.nan], 0.5)
    rest, _ = ema([3.0, 4.0], 0.5, state)
    assert first + rest == whole
    assert whole[0] == 1.0  # debiased: starts at the first value, not at zero
    assert whole[2] == whole[1]


def test_a_wall_clock_keeps_first_and_last_of_the_first_series_with_times() -> None:
    series = Series(list(range(0, 10_000, 2)), [1.0] * 5000, [100.0 + step for step in range(0, 10_000, 2)])
    clock = wall_clock([Series([1], [1.0], [None]), series], most=100)  # the first series has no times
    assert len(clock) <= 101 and clock[0] == [0, 100_000.0] and clock[-1] == [9998, 10_098_000.0]
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(clock, clock[1:]))
