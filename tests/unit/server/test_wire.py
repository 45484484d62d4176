"""Request bodies decode from JSON and msgpack with NaN and ±Inf intact, and what would be read
wrong (a key twice, 1e400), nest too deeply or hold too many values is refused."""

from __future__ import annotations

import math

import msgpack
import orjson
import pytest
from holter_server.wire import (
    BodyError,
    TooManyValuesError,
    UnreadableValueError,
    decode_body,
    is_msgpack,
)


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


def test_a_key_twice_is_refused_on_the_fast_and_the_slow_path() -> None:
    with pytest.raises(UnreadableValueError, match="'loss' appears twice"):
        decode_body(b'{"metrics": {"loss": 1, "loss": 2}}', None)
    with pytest.raises(UnreadableValueError, match="'loss' appears twice"):  # NaN sends it down the slow path
        decode_body(b'{"metrics": {"loss": NaN, "loss": 2}}', None)
    with pytest.raises(UnreadableValueError, match="'a' appears twice"):  # msgpack: a map written by hand
        decode_body(b"\x82" + msgpack.packb("a") + b"\x01" + msgpack.packb("a") + b"\x02", "application/msgpack")


def test_colons_inside_names_are_not_mistaken_for_a_repeated_key() -> None:
    body = b'{"metrics": {"train:loss": {"steps": [1], "values": [1]}, "eval:loss": {"steps": [1], "values": [2]}}}'
    assert set(decode_body(body, None)["metrics"]) == {"train:loss", "eval:loss"}


def test_a_number_no_float_holds_is_refused() -> None:
    for body in (b"[1e400]", b"[-1e400]", b"[NaN, 1e999]"):
        with pytest.raises(UnreadableValueError, match="too large for a 64-bit float"):
            decode_body(body, None)


@pytest.mark.parametrize("depth", [65, 2_000, 200_000])
def test_deep_nesting_is_refused(depth: int) -> None:
    with pytest.raises(BodyError, match="nested too deeply"):
        decode_body(b"[" * depth + b"]" * depth, None)
    with pytest.raises(BodyError, match="nested too deeply"):
        decode_body(b'{"a": ' * depth + b"1" + b"}" * depth, None)


@pytest.mark.parametrize("depth", [65, 100_000])
def test_deep_msgpack_is_refused(depth: int) -> None:
    with pytest.raises(BodyError, match="nested too deeply"):
        decode_body(b"\x91" * depth + b"\x00", "application/msgpack")


def test_a_body_with_too_many_values_is_refused_before_it_is_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_decoding(*args: object) -> None:
        raise AssertionError("decoded a body that was already too large")

    monkeypatch.setattr(orjson, "loads", no_decoding)
    with pytest.raises(TooManyValuesError, match=r"more than 1,000 values [(]1,000,001 at least[)]"):
        decode_body(b"[" + b"0," * 1_000_000 + b"0]", None, max_values=1_000)


def test_separators_inside_strings_do_not_count_as_values() -> None:
    name = "a," * 1_000  # a legitimate name full of commas
    body = orjson.dumps({"metrics": {name: {"steps": [1], "values": [1.0]}}})
    assert name in decode_body(body, None, max_values=100)["metrics"]


def test_a_msgpack_body_past_its_value_budget_is_refused_while_decoding() -> None:
    with pytest.raises(TooManyValuesError):
        decode_body(msgpack.packb([[0] * 600, [0] * 600]), "application/msgpack", max_values=1_000)
    with pytest.raises(TooManyValuesError):  # one array whose header alone says too many
        decode_body(msgpack.packb([0] * 5_000), "application/msgpack", max_values=1_000)
