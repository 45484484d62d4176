"""The protocol buffers wire format, as far as reading TensorBoard's messages needs it.

A message is a run of fields, each a key (field number << 3 | wire type, a varint) and a value:
a varint (0), 8 bytes (1), a length-delimited run of bytes (2: strings, bytes, sub-messages,
packed repeated numbers) or 4 bytes (5). Groups (3, 4) are long deprecated and refused.
(protobuf.dev/programming-guides/encoding)
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from holter_readers.points import FormatError

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
_DOUBLE = struct.Struct("<d")
_FLOAT = struct.Struct("<f")


def varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it."""
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    result = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        byte = data[pos]
        result |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise FormatError("malformed varint")


def signed64(value: int) -> int:
    """An int64 read as a varint (negative numbers are sent as their 64-bit two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def fields(data: bytes) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of each field: an int for varints, the raw 8 or 4 bytes
    for fixed fields, the bytes for length-delimited ones. Raises FormatError on malformed data."""
    pos, end = 0, len(data)
    try:
        while pos < end:
            key, pos = varint(data, pos)
            number, wire = key >> 3, key & 7
            if wire == VARINT:
                value, pos = varint(data, pos)
                yield number, wire, value
            elif wire == LENGTH:
                length, pos = varint(data, pos)
                if pos + length > end:
                    raise FormatError("a field runs past the end of its message")
                yield number, wire, data[pos : pos + length]
                pos += length
            elif wire == FIXED64:
                if pos + 8 > end:
                    raise FormatError("a field runs past the end of its message")
                yield number, wire, data[pos : pos + 8]
                pos += 8
            elif wire == FIXED32:
                if pos + 4 > end:
                    raise FormatError("a field runs past the end of its message")
                yield number, wire, data[pos : pos + 4]
                pos += 4
            else:
                raise FormatError(f"unsupported wire type {wire}")
    except IndexError:
        raise FormatError("a message ends inside a field") from None


def double(raw: object) -> float:
    """A `double` field's value."""
    return float(_DOUBLE.unpack(raw)[0])  # type: ignore[arg-type]  # a fixed64 field is bytes


def single(raw: object) -> float:
    """A `float` field's value."""
    return float(_FLOAT.unpack(raw)[0])  # type: ignore[arg-type]  # a fixed32 field is bytes


def text(raw: object) -> str:
    """A `string` field's value (undecodable bytes replaced, never an error)."""
    return bytes(raw).decode("utf-8", "replace")  # type: ignore[call-overload,no-any-return]  # a string field is bytes


def first_varint(wire: int, raw: object) -> int | None:
    """The first element of a repeated varint field, packed (wire type 2) or not."""
    if wire == VARINT:
        return raw  # type: ignore[return-value]
    if wire == LENGTH and raw:
        return varint(raw, 0)[0]  # type: ignore[arg-type]
    return None


def first_fixed(wire: int, raw: object, size: int) -> bytes | None:
    """The first element's bytes of a repeated fixed-size field (float: 4, double: 8), packed or not."""
    if wire in (FIXED32, FIXED64):
        return raw  # type: ignore[return-value]
    if wire == LENGTH and len(raw) >= size:  # type: ignore[arg-type]
        return bytes(raw[:size])  # type: ignore[index]  # a length-delimited field is bytes
    return None
