"""Request bodies decode from JSON and msgpack with NaN and ±Inf intact."""

from __future__ import annotations

import math

import msgpack
import pytest

from holter_server.wire import BodyError, decode_body, is_msgpack, json_safe, json_safe_column


def test_json_with_named_non_finite_values_decodes_as_strings_for_pydantic() -> None:
    assert decode_body(b'{"v": [1, "NaN"]}', "application/json") == {"v": [1, "NaN"]}


def test_bare_nan_tokens_decode_to_floats() -> None:
    decoded = decode_body(b'{"v": [NaN, Infinity, -Infinity]}', None)
    assert math.isnan(decoded["v"][0]) and decoded["v"][1:] == [math.inf, -math.inf]


def test_msgpack_is_chosen_by_content_type() -> None:
    body = msgpack.packb({"v": [math.inf]})
    assert decode_body(body, "application/msgpack") == {"v": [math.inf]}
    assert is_msgpack("application/x-msgpack; charset=binary")
    assert not is_msgpack("application/json")


@pytest.mark.parametrize("body,content_type", [(b"", None), (b"{nope", None), (b"\xc1", "application/msgpack")])
def test_undecodable_bodies_raise_body_error(body: bytes, content_type: str | None) -> None:
    with pytest.raises(BodyError):
        decode_body(body, content_type)


def test_json_safe_names_non_finite_values() -> None:
    assert [json_safe(v) for v in (1.5, math.nan, math.inf, -math.inf, None)] == [1.5, "NaN", "Infinity", "-Infinity", None]
    assert json_safe_column([1.0, math.nan]) == [1.0, "NaN"]
