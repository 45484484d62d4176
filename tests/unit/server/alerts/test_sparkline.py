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
