"""Bodies on the wire: JSON or msgpack in, JSON or msgpack out, NaN and ±Inf carried exactly.

JSON cannot spell NaN or infinity, so they travel as the strings "NaN", "Infinity" and
"-Infinity" (holter_server/nonfinite.py; the bare tokens Python's json module writes are accepted
too). msgpack carries them natively.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgpack
import orjson

MSGPACK_TYPES = ("application/msgpack", "application/x-msgpack", "application/vnd.msgpack")


class BodyError(ValueError):
    """The request body could not be decoded; `status` is the HTTP status that says why."""

    status = 400


class UnreadableValueError(BodyError):
    """Well-formed, but it would be read wrong: a key twice in one object (JSON keeps the last,
    dropping the first without a word) or a number no 64-bit float holds (1e400)."""

    status = 422


class TooManyValuesError(BodyError):
    """The body holds more values than its limit allows (refused before or while decoding, so a
    hostile body never becomes millions of Python objects)."""

    status = 413


def is_msgpack(content_type: str | None) -> bool:
    """True when a Content-Type or Accept header asks for msgpack."""
    return bool(content_type) and any(kind in content_type for kind in MSGPACK_TYPES)


def decode_body(body: bytes | bytearray, content_type: str | None, *, max_values: int | None = None) -> Any:
    """Decode a request body by its Content-Type (JSON unless it says msgpack).

    Refused with `BodyError`: a body that is empty or malformed or nested deeper than
    `MAX_DEPTH`; with `UnreadableValueError`: an object holding the same key twice, or a number
    too large for a 64-bit float (`1e400`).
    `max_values`: the most values (numbers, strings, lists, objects, keys) the body may hold;
    a body that holds more gets `TooManyValuesError`, found before decoding (JSON) or as soon
    as the count passes the limit (msgpack).
    """
    if not body:
        raise BodyError("empty request body")
    if is_msgpack(content_type):
        return _decode_msgpack(body, max_values)
    return _decode_json(body, max_values)


MAX_DEPTH = 64  # a batch is four levels deep; anything far deeper is not a batch


def _decode_msgpack(body: bytes | bytearray, max_values: int | None) -> Any:
    counted = 0

    def count_list(items: list[Any]) -> list[Any]:
        nonlocal counted
        counted += len(items)
        if max_values is not None and counted > max_values:
            raise TooManyValuesError(f"the body holds more than {max_values:,} values")
        return items

    def no_duplicates(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
        nonlocal counted
        counted += 2 * len(pairs)
        if max_values is not None and counted > max_values:
            raise TooManyValuesError(f"the body holds more than {max_values:,} values")
        return _unique_keys(pairs)

    limit = max_values if max_values is not None else 2**31 - 1
    try:
        # max_array_len / max_map_len refuse one huge container from its header, before it is built
        decoded = msgpack.unpackb(
            body,
            raw=False,
            list_hook=count_list,
            object_pairs_hook=no_duplicates,
            max_array_len=limit,
            max_map_len=limit,
        )
    except BodyError:
        raise
    except msgpack.StackError:
        raise BodyError(f"msgpack body nested too deeply (at most {MAX_DEPTH} levels)") from None
    except (msgpack.UnpackException, ValueError, TypeError) as exc:
        if "exceeds max_" in str(exc):
            raise TooManyValuesError(f"the body holds more than {max_values:,} values") from None
        raise BodyError(f"malformed msgpack body: {exc}") from exc
    if _depth_exceeds(decoded):
        raise BodyError(f"msgpack body nested too deeply (at most {MAX_DEPTH} levels)")
    return decoded


def _decode_json(body: bytes | bytearray, max_values: int | None) -> Any:
    if max_values is not None:
        _check_json_size(body, max_values)
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):
            raise BodyError(f"JSON body nested too deeply (at most {MAX_DEPTH} levels)") from None
        # the slow path only for bodies orjson refuses, such as bare NaN/Infinity tokens or 1e400
        return _decode_json_slowly(body)
    if _depth_exceeds(decoded) or body.count(b":") != _keys_outside_lists(decoded):
        # A ':' inside a string, an object inside a list, a repeated key or deep nesting: only
        # the slow path can tell which, and it names the problem.
        return _decode_json_slowly(body)
    return decoded


def _check_json_size(body: bytes | bytearray, max_values: int) -> None:
    """Refuse a body with more than `max_values` values before decoding it.

    Every element of a list but the first, and every member of an object but the first, follows
    a comma of its own: commas outside strings count values from below, without decoding. Only
    first elements and members' values go without one, so a body that passes holds at most
    about twice `max_values` values. A comma takes a byte and so does the value after it: a
    body of n bytes holds at most n / 2 commas, and a small body needs no count at all.
    """
    if len(body) // 2 <= max_values:
        return
    commas = body.count(b",")
    if commas > max_values and b'"' in body:
        # commas inside strings (metric names may hold them) are not separators: take those out
        commas -= sum(match.group().count(b",") for match in _JSON_STRING.finditer(body))
    if commas > max_values:
        raise TooManyValuesError(f"the body holds more than {max_values:,} values ({commas + 1:,} at least)")


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def _decode_json_slowly(body: bytes | bytearray) -> Any:
    try:
        decoded = json.loads(body, parse_float=_finite_float, object_pairs_hook=_unique_keys)
    except BodyError:
        raise
    except RecursionError:
        raise BodyError(f"JSON body nested too deeply (at most {MAX_DEPTH} levels)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BodyError(f"malformed JSON body: {exc}") from exc
    if _depth_exceeds(decoded):
        raise BodyError(f"JSON body nested too deeply (at most {MAX_DEPTH} levels)")
    return decoded


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise UnreadableValueError(f"the number {text[:40]} is too large for a 64-bit float")
    return value


def _unique_keys(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    decoded = dict(pairs)
    if len(decoded) != len(pairs):
        seen: set[Any] = set()
        for key, _value in pairs:
            if key in seen:
                raise UnreadableValueError(
                    f"the key {shown(str(key))!r} appears twice in one object; each key may appear once"
                )
            seen.add(key)
    return decoded


def _keys_outside_lists(value: Any) -> int:
    """Keys of the objects reachable from `value` through objects only (a batch has no others)."""
    if not isinstance(value, dict):
        return 0
    return len(value) + sum(_keys_outside_lists(item) for item in value.values() if isinstance(item, dict))


def _depth_exceeds(value: Any, level: int = 1) -> bool:
    """True when containers nest more than MAX_DEPTH levels (`value` is at `level`). Objects are
    walked whole; a list only when its first element is a container: a list of numbers, as in
    every batch, costs nothing, and its other elements cannot hide depth from what reads a batch."""
    if not isinstance(value, (dict, list)):
        return False
    if level > MAX_DEPTH:
        return True
    if isinstance(value, dict):
        return any(_depth_exceeds(item, level + 1) for item in value.values())
    return bool(value) and isinstance(value[0], (dict, list)) and any(_depth_exceeds(item, level + 1) for item in value)


# Characters no store keeps as they are: NUL (Postgres text refuses it) and lone surrogates
# (not encodable as UTF-8 at all). Names, configs, tags and notes may not hold them.
UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")
# What is escaped when text is shown back in an answer: every control character besides.
_NOT_SHOWN = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029]")


# Characters that change how the text around them reads without being seen themselves: the
# bidirectional overrides, embeddings and isolates (`loss\u202egnp.exe` reads "lossexe.png"), the
# direction marks, and the zero-width characters. Wherever a name a client chose is shown to a
# person, they are spelled out instead (issue 47).
_INVISIBLE = re.compile(r"[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def visible(text: str) -> str:
    """`text` with every direction control and zero-width character spelled out (`\u202e`)."""
    return _INVISIBLE.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)


def shown(text: str) -> str:
    """`text` with control characters and lone surrogates escaped (`\\x00`, `\\ud800`): safe to
    print, and to encode as UTF-8 in an answer."""
    return _NOT_SHOWN.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)


def encode_json(payload: Any) -> bytes:
    """Serialise a payload whose floats were already made JSON-safe."""
    return orjson.dumps(payload)


def encode_msgpack(payload: Any) -> bytes:
    """Serialise a payload for an msgpack client (floats as they are)."""
    return msgpack.packb(payload, use_bin_type=True)
