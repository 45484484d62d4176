"""Small pictures of a curve around an event: a text sparkline for every channel, and a PNG for
channels that show images. Pure: numbers in, text or bytes out."""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence

BARS = "▁▂▃▄▅▆▇█"


def text_sparkline(values: Sequence[float], width: int = 40) -> str:
    """Unicode bars for the values (resampled to at most `width`); non-finite values show as ×."""
    if not values:
        return ""
    step = max(1, math.ceil(len(values) / width))
    # Keep each bucket's extreme so a one-point spike survives the resampling.
    buckets = [values[i : i + step] for i in range(0, len(values), step)]
    picked: list[float] = []
    for bucket in buckets:
        finite = [v for v in bucket if math.isfinite(v)]
        picked.append(max(finite, key=abs) if len(finite) == len(bucket) else math.nan)
    finite = [v for v in picked if math.isfinite(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    span = high - low or 1.0
    return "".join("×" if not math.isfinite(v) else BARS[min(7, int((v - low) / span * 7.999))] for v in picked)


def png_sparkline(values: Sequence[float], width: int = 320, height: int = 80, mark_index: int | None = None) -> bytes:
    """A PNG line chart of the values (dark line on white, red marker at `mark_index`)."""
    pixels = [[255] * width for _ in range(height)]
    finite = [(i, v) for i, v in enumerate(values) if math.isfinite(v)]
    if finite:
        low = min(v for _, v in finite)
        high = max(v for _, v in finite)
        span = high - low or 1.0
        last = max(len(values) - 1, 1)

        def xy(i: int, v: float) -> tuple[int, int]:
            return round(i / last * (width - 1)), round((1 - (v - low) / span) * (height - 7)) + 3

        points = [xy(i, v) for i, v in finite]
        for (x0, y0), (x1, y1) in zip(points, points[1:]):
            for t in range(max(abs(x1 - x0), abs(y1 - y0), 1) + 1):
                f = t / max(abs(x1 - x0), abs(y1 - y0), 1)
                pixels[round(y0 + f * (y1 - y0))][round(x0 + f * (x1 - x0))] = 40
        if mark_index is not None and 0 <= mark_index < len(values):
            x = round(mark_index / last * (width - 1))
            for y in range(height):
                if pixels[y][x] == 255:
                    pixels[y][x] = 150
    return _encode_png(pixels)


def _encode_png(gray_rows: list[list[int]]) -> bytes:
    height, width = len(gray_rows), len(gray_rows[0])
    raw = b"".join(b"\x00" + bytes(row) for row in gray_rows)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit grayscale
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
