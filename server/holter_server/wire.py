"""Bodies on the wire: JSON or msgpack in, JSON or msgpack out, NaN and ±Inf carried exactly.

JSON cannot spell NaN or infinity, so they travel as the strings "NaN", "Infinity" and
"-Infinity" (the bare tokens Python's json module writes are accepted too). msgpack carries
them natively.
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgpack
import orjson

MSGPACK_TYPES = ("application/msgpack", "application/x-msgpack", "application/vnd.msgpack")


class BodyError(ValueError):
    """The request body could not be decoded."""


def is_msgpack(content_type: str | None) -> bool:
    """True when a Content-Type or Accept header asks for msgpack."""
    return bool(content_type) and any(kind in content_type for kind in MSGPACK_TYPES)


def decode_body(body: bytes, content_type: str | None) -> Any:
    """Decode a request body by its Content-Type (JSON unless it says msgpack)."""
    if not body:
        raise BodyError("empty request body")
    if is_msgpack(content_type):
        try:
            return msgpack.unpackb(body, raw=False)
        except (msgpack.UnpackException, ValueError, TypeError) as exc:
            raise BodyError(f"malformed msgpack body: {exc}") from exc
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    try:  # the slow path only for bodies orjson refuses, such as bare NaN/Infinity tokens
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BodyError(f"malformed JSON body: {exc}") from exc


def json_safe(value: float | None) -> float | str | None:
    """A float as JSON can carry it: itself when finite, else its name."""
    if value is None or math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def json_safe_column(values: list[float]) -> list[float | str]:
    """A column of floats made JSON-safe, leaving the common all-finite case untouched."""
    if all(math.isfinite(v) for v in values):
        return values
    return [json_safe(v) for v in values]  # type: ignore[misc]


def encode_json(payload: Any) -> bytes:
    """Serialise a payload whose floats were already made JSON-safe."""
    return orjson.dumps(payload)


def encode_msgpack(payload: Any) -> bytes:
    """Serialise a payload for an msgpack client (floats as they are)."""
    return msgpack.packb(payload, use_bin_type=True)
