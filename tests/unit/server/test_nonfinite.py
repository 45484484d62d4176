"""The server's one NaN/±Inf codec (holter_server/nonfinite.py)."""

from __future__ import annotations

import math

import numpy as np
from holter_server.nonfinite import csv_text, from_name, json_safe, json_safe_column, json_safe_tree


def test_json_safe_names_non_finite_values() -> None:
    assert [json_safe(v) for v in (1.5, math.nan, math.inf, -math.inf, None)] == [
        1.5,
        "NaN",
        "Infinity",
        "-Infinity",
        None,
    ]
    assert json_safe_column([1.0, math.nan]) == [1.0, "NaN"]


def test_event_details_keep_their_shape_with_non_finite_values_named() -> None:
    details = {"peak": np.float64(math.inf), "steps": (1, np.int64(2)), "inner": {"v": math.nan}}
    assert json_safe_tree(details) == {"peak": "Infinity", "steps": [1, 2], "inner": {"v": "NaN"}}


def test_csv_cells_read_back_exactly() -> None:
    assert [csv_text(v) for v in (0.1, math.nan, -math.inf)] == ["0.1", "NaN", "-Infinity"]
    assert float(csv_text(0.1)) == 0.1


def test_names_read_back_as_the_floats_they_stand_for() -> None:
    assert math.isnan(from_name("NaN")) and from_name("Infinity") == math.inf and from_name("-Infinity") == -math.inf
    assert from_name("nan") is None and from_name("1.0") is None


def test_a_documents_non_finite_numbers_are_named_at_any_depth_without_recursion() -> None:
    from holter_server.nonfinite import nonfinite_named

    deep: dict = {"x": float("nan")}
    for _ in range(10_000):
        deep = {"a": [deep, float("inf")]}
    named = nonfinite_named(deep)
    for _ in range(10_000):
        assert named["a"][1] == "Infinity"
        named = named["a"][0]
    assert named == {"x": "NaN"}
    assert nonfinite_named(float("-inf")) == "-Infinity" and nonfinite_named(1.5) == 1.5
