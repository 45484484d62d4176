"""Non-finite values travel as names in JSON."""

from __future__ import annotations

import json
import math

from holter.wire import dumps, encode_values


def test_finite_columns_pass_through_unchanged() -> None:
    values = [1.0, 2.5, -3.0]
    assert encode_values(values) is values


def test_non_finite_values_become_their_names() -> None:
    assert encode_values([1.0, math.nan, math.inf, -math.inf]) == [1.0, "NaN", "Infinity", "-Infinity"]


def test_dumps_refuses_bare_nan_so_nothing_non_standard_is_sent() -> None:
    assert json.loads(dumps({"v": encode_values([math.nan])})) == {"v": ["NaN"]}
    try:
        dumps({"v": [math.nan]})
    except ValueError:
        return
    raise AssertionError("bare NaN was serialised")
