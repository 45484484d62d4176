"""The statistics behind a verdict: the tests agree with scipy.stats', power with the noncentral t,
Holm's correction, and the seeds a difference needs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from holter_server.analysis.inference import (
    StandIn,
    detectable_difference,
    holm,
    infer,
    power,
    seeds_needed,
)
from scipy import stats


@pytest.mark.parametrize("sizes", [(3, 3), (4, 7), (10, 10)])
def test_welch_agrees_with_scipys_ttest_ind(sizes: tuple[int, int]) -> None:
    rng = np.random.default_rng(sum(sizes))
    a, b = rng.normal(0, 1, sizes[0]), rng.normal(0.7, 2, sizes[1])
    found = infer(a, b)
    expected = stats.ttest_ind(b, a, equal_var=False)
    interval = expected.confidence_interval(0.95)
    assert found is not None and found.test == "Welch's t-test"
    assert found.p_value == pytest.approx(expected.pvalue, rel=1e-9) and found.df == pytest.approx(expected.df)
    assert (found.ci_low, found.ci_high) == pytest.approx((interval.low, interval.high), rel=1e-9)


def test_the_paired_test_agrees_with_scipys_ttest_rel_in_any_pairing_order() -> None:
    rng = np.random.default_rng(5)
    a = rng.normal(0, 1, 6)
    b = a + 0.3 + rng.normal(0, 0.1, 6)
    order = [3, 0, 5, 1, 4, 2]  # arm B's runs listed in another order: the pairs say who goes with whom
    found = infer(a, b[order], pairs=[(i, order.index(i)) for i in range(6)])
    expected = stats.ttest_rel(b, a)
    interval = expected.confidence_interval(0.95)
    assert found is not None and found.paired and found.p_value == pytest.approx(expected.pvalue, rel=1e-9)
    assert (found.ci_low, found.ci_high) == pytest.approx((interval.low, interval.high), rel=1e-9)


def test_a_run_against_a_group_is_a_prediction_t_test() -> None:
    found = infer([1.0, 1.2, 0.9, 1.1], [1.6])
    s = np.std([1.0, 1.2, 0.9, 1.1], ddof=1)
    t = (1.6 - 1.05) / (s * math.sqrt(1 + 1 / 4))
    assert found is not None and found.p_value == pytest.approx(2 * stats.t.sf(t, 3))
    assert found.ci_low == pytest.approx(0.55 - stats.t.ppf(0.975, 3) * s * math.sqrt(1.25))


def test_one_run_per_arm_is_judged_only_on_a_stand_in_spread() -> None:
    assert infer([2.0], [2.1]) is None
    found = infer([2.0], [2.1], stand_in=StandIn(0.02, 5, "group g"))
    assert found is not None and found.p_value == pytest.approx(2 * stats.t.sf(0.1 / (0.02 * math.sqrt(2)), 4))


def test_identical_seeds_give_an_exact_answer() -> None:
    same = infer([1.0, 1.0], [1.0, 1.0])
    assert same is not None and same.p_value == 1.0 and (same.ci_low, same.ci_high) == (0.0, 0.0)
    moved = infer([1.0, 1.0], [1.5, 1.5])
    assert moved is not None and moved.p_value == 0.0 and moved.ci_low == moved.ci_high == 0.5


def test_power_is_the_noncentral_t_s() -> None:
    # G*Power, t-test of two independent means, d = 2, n = 10 per group, α = 0.05 two-tailed: 0.9882
    assert power(2.0, math.sqrt(2 / 10), 18) == pytest.approx(0.9882, abs=1e-4)
    # d = 0.5, n = 64 per group: 0.8015
    assert power(0.5, math.sqrt(2 / 64), 126) == pytest.approx(0.8015, abs=1e-3)


def test_the_detectable_difference_is_found_with_the_wanted_power() -> None:
    scale, df = math.sqrt(2 / 3), 4
    found = detectable_difference(scale, df)
    assert found is not None and power(found, scale, df) == pytest.approx(0.8, abs=1e-6)


def test_seeds_needed_grows_as_the_difference_shrinks() -> None:
    # 64 per group detect d = 0.5 at 80% (Cohen's table), 17 detect d = 1
    assert seeds_needed(0.5, 1.0) == 64 and seeds_needed(1.0, 1.0) == 17 and seeds_needed(0.01, 1.0) == 101
    assert [seeds_needed(d, 1.0) for d in (2.0, 1.0, 0.7, 0.5)] == sorted(
        seeds_needed(d, 1.0) for d in (2.0, 1.0, 0.7, 0.5)
    )


def test_holm_adjusts_step_down() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5]
