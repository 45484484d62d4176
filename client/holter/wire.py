"""The JSON wire format shared with the service, and the client's one NaN/±Inf codec.

JSON has no NaN or infinity, so non-finite values travel as the strings "NaN", "Infinity" and
"-Infinity" (the service also accepts msgpack, which carries them natively). Everything the
client writes as JSON (points, config, summaries, tripwire reports) names them here.
"""

from __future__ import annotations

import json
import math
from typing import Any


def name_of(value: float) -> str:
    """The name of a non-finite float: "NaN", "Infinity" or "-Infinity"."""
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def encode_value(value: float) -> float | str:
    """Return `value` as JSON can carry it: itself when finite, else its name."""
    if -math.inf < value < math.inf:
        return value
    return name_of(value)


def encode_values(values: list[float]) -> list[float | str]:
    """Encode a column of floats, leaving the common all-finite case untouched."""
    if all(-math.inf < v < math.inf for v in values):
        return values
    return [encode_value(v) for v in values]


def dumps(payload: Any) -> bytes:
    """Serialise a payload whose floats were already made JSON-safe."""
    return json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()
