"""NaN and ±Inf as the service writes and reads them where a float cannot go as itself.

JSON, CSV and the event details stored as JSON cannot spell NaN or infinity, so they travel as
the names "NaN", "Infinity" and "-Infinity" (the names JavaScript and the client use too). This
is the one place on the server that knows those names; msgpack, Parquet and the database carry
the floats as they are.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

NAN, POSINF, NEGINF = "NaN", "Infinity", "-Infinity"
NAMES: dict[str, float] = {NAN: math.nan, POSINF: math.inf, NEGINF: -math.inf}


def name_of(value: float) -> str:
    """The name of a non-finite float."""
    if math.isnan(value):
        return NAN
    return POSINF if value > 0 else NEGINF


def json_safe(value: float | None) -> float | str | None:
    """A float as JSON can carry it: itself when finite, else its name."""
    if value is None or math.isfinite(value):
        return value
    return name_of(value)


def json_safe_column(values: list[float]) -> list[float | str]:
    """A column of floats made JSON-safe, leaving the common all-finite case untouched."""
    if all(math.isfinite(v) for v in values):
        return values  # type: ignore[return-value]
    return [json_safe(v) for v in values]  # type: ignore[misc]


def json_safe_tree(value: Any) -> Any:
    """Nested dicts and lists as JSON can store them: numpy scalars to Python, non-finite floats
    to their names (an event's details)."""
    if isinstance(value, dict):
        return {str(k): json_safe_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe_tree(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return name_of(value)
    return value


def nonfinite_named(document: Any) -> Any:
    """A JSON document (dicts, lists, scalars) with every non-finite float replaced by its name,
    in place, without recursion (a deep document must not overflow the stack): bare `NaN`,
    `Infinity` or `1e400` in a client's config or summary, which Python's JSON reads but no
    Postgres JSON column stores."""
    if isinstance(document, float):
        return document if math.isfinite(document) else name_of(document)
    stack = [document]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in list(items):
            if isinstance(value, float) and not math.isfinite(value):
                node[key] = name_of(value)
            elif isinstance(value, dict | list):
                stack.append(value)
    return document


def csv_text(value: float) -> str:
    """A float as a CSV cell: `repr` when finite (it reads back exactly), else its name."""
    return repr(value) if math.isfinite(value) else name_of(value)


def from_name(text: str) -> float | None:
    """The float a name stands for, or None when `text` is no such name."""
    return NAMES.get(text)
