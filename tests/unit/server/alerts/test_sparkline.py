"""Curve pictures keep a one-point spike and show non-finite values."""

from __future__ import annotations

import math
import struct
import zlib

from holter_server.alerts.sparkline import png_sparkline, text_sparkline


def test_a_one_point_spike_survives_resampling() -> None:
    values = [1.0] * 500
    values[337] = 9.0
    line = text_sparkline(values, width=40)
    assert 30 <= len(line) <= 40 and line.count("█") == 1 and set(line) == {"▁", "█"}


def test_non_finite_values_are_marked() -> None:
    assert text_sparkline([1.0, 2.0, math.nan, math.inf]).endswith("××")


def test_the_png_is_a_valid_grayscale_image_of_the_asked_size() -> None:
    png = png_sparkline([1.0, 3.0, 2.0, math.nan, 5.0], width=64, height=20, mark_index=2)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (64, 20)
    idat = png[png.index(b"IDAT") + 4 : png.index(b"IEND") - 8]
    assert len(zlib.decompress(idat)) == (64 + 1) * 20


def _gray_rows(png: bytes) -> list[bytes]:
    """The rows of an 8-bit grayscale PNG written by png_sparkline (filter byte 0 on every row)."""
    import zlib

    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    data = png[png.index(b"IDAT") + 4 :]
    raw = zlib.decompress(data[: int.from_bytes(png[png.index(b"IDAT") - 4 : png.index(b"IDAT")], "big")])
    return [raw[r * (width + 1) + 1 : (r + 1) * (width + 1)] for r in range(height)]


def test_the_picture_shades_the_event_and_draws_the_level_before_it() -> None:
    values = [2.0] * 60 + [2.0 + i * 0.5 for i in range(17)] + [10.0] * 10
    rows = _gray_rows(png_sparkline(values, width=200, height=60, mark_index=60, mark_end=76, level=2.0))
    shaded = [x for x in range(200) if rows[0][x] == 225]
    assert shaded and min(shaded) > 100 and max(shaded) < 190  # the event's span, not the lead-in
    assert any(120 in row for row in rows)  # the dotted level line
    top, bottom = rows[4], rows[-5]
    assert any(v == 30 for v in top[180:]) and any(v == 30 for v in bottom[:100])  # 10 at the end, 2 before
