"""The JSON wire format shared with the service.

JSON has no NaN or infinity, so non-finite values travel as the strings "NaN", "Infinity" and
"-Infinity" (the service also accepts msgpack, which carries them natively).
"""

from __future__ import annotations

import json
import math
from typing import Any

NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def encode_value(value: float) -> float | str:
    """Return `value` as JSON can carry it: itself when finite, else its name."""
    if value != value:
        return "NaN"
    if value == math.inf:
        return "Infinity"
    if value == -math.inf:
        return "-Infinity"
    return value


def encode_values(values: list[float]) -> list[float | str]:
    """Encode a column of floats, leaving the common all-finite case untouched."""
    if all(-math.inf < v < math.inf for v in values):
        return values
    return [encode_value(v) for v in values]


def dumps(payload: Any) -> bytes:
    """Serialise a payload whose floats were already made JSON-safe."""
    return json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()
