"""The array literals a small batch's points and rollups go to Postgres as (the statements'
`%s::float8[]` casts parse them there)."""

from __future__ import annotations

import math

from holter_server.store.backends.postgres import array_text


def test_floats_are_written_in_the_shortest_form_that_reads_back_as_the_same_double() -> None:
    values = [0.1 + 0.2, 5e-324, math.nan, math.inf, -math.inf, 2.0]
    assert array_text(values, "float8") == "{0.30000000000000004,5e-324,nan,inf,-inf,2.0}"
    assert [float(text) for text in array_text(values, "float8")[1:-1].split(",")][:2] == values[:2]


def test_a_missing_value_is_null_and_integers_are_plain() -> None:
    assert array_text([1.5, None], "float8") == "{1.5,NULL}"
    assert array_text([3, 2**40, -1]) == "{3,1099511627776,-1}"
    assert array_text([]) == "{}"


def test_a_binary_array_is_postgres_binary_array_format() -> None:
    """One dimension, no NULLs, the element type's oid, then each value as a 4-byte length and its big-endian bytes."""
    import struct

    import numpy as np
    from holter_server.store.backends.postgres import binary_array

    data = binary_array(np.array([1.5, math.nan, -math.inf]), "float8")
    assert struct.unpack(">iiiii", data[:20]) == (1, 0, 701, 3, 1)
    rows = np.frombuffer(data[20:], dtype=[("length", ">i4"), ("value", ">f8")])
    assert rows["length"].tolist() == [8, 8, 8] and [float.hex(v) for v in rows["value"]] == [
        float.hex(v) for v in (1.5, math.nan, -math.inf)
    ]
    assert struct.unpack(">iii", binary_array(np.array([], dtype=np.int64), "int8")) == (0, 0, 20)
