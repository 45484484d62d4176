"""Small pictures of an event's course: a text sparkline for every channel, and a PNG for
channels that show images. Pure: numbers in, text or bytes out (what to draw, the event with the
level before it, is `services/alerting.event_course`)."""

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


def png_sparkline(
    values: Sequence[float],
    width: int = 480,
    height: int = 120,
    mark_index: int | None = None,
    mark_end: int | None = None,
    level: float | None = None,
) -> bytes:
    """A PNG line chart of the values: a dark line on white, the event's span (`mark_index` to
    `mark_end`, or the one point at `mark_index`) shaded, and the level before it (`level`) as a
    dotted line, so a climb from 2 to 10 reads as one. Non-finite values leave a gap, with a
    mark at the top of the picture."""
    pixels = [[255] * width for _ in range(height)]
    finite = [(i, v) for i, v in enumerate(values) if math.isfinite(v)]
    last = max(len(values) - 1, 1)

    def x_of(i: int) -> int:
        return round(i / last * (width - 1))

    if mark_index is not None and 0 <= mark_index < len(values):
        x0 = x_of(mark_index)
        x1 = x_of(min(mark_end, len(values) - 1)) if mark_end is not None and mark_end >= mark_index else x0
        for x in range(x0, max(x1, x0 + 1) + 1 if x1 > x0 else x0 + 1):
            for y in range(height):
                pixels[y][min(x, width - 1)] = 225 if x1 > x0 else 150
    if finite:
        low = min(v for _, v in finite)
        high = max(v for _, v in finite)
        if level is not None and math.isfinite(level):
            low, high = min(low, level), max(high, level)
        span = high - low or 1.0

        def y_of(v: float) -> int:
            return round((1 - (v - low) / span) * (height - 9)) + 4

        if level is not None and math.isfinite(level):
            y = y_of(level)
            for x in range(0, width, 6):
                for dx in range(3):
                    if x + dx < width:
                        pixels[y][x + dx] = 120
        points = [(x_of(i), y_of(v), i) for i, v in finite]
        for (x0, y0, i0), (x1, y1, i1) in zip(points, points[1:]):
            if i1 - i0 > 1 and not all(math.isfinite(v) for v in values[i0 + 1 : i1]):
                continue  # a NaN or ±Inf between: a gap, not a line across it
            steps = max(abs(x1 - x0), abs(y1 - y0), 1)
            for t in range(steps + 1):
                f = t / steps
                x, y = round(x0 + f * (x1 - x0)), round(y0 + f * (y1 - y0))
                for dy in (0, 1):  # two pixels thick: legible when a chat service shrinks the picture
                    pixels[min(y + dy, height - 1)][x] = 30
    for i, v in enumerate(values):
        if not math.isfinite(v):
            x = x_of(i)
            for dy in range(4):
                for dx in (-1, 0, 1):
                    if 0 <= x + dx < width:
                        pixels[dy][x + dx] = 0
    return _encode_png(pixels)


def _encode_png(gray_rows: list[list[int]]) -> bytes:
    height, width = len(gray_rows), len(gray_rows[0])
    raw = b"".join(b"\x00" + bytes(row) for row in gray_rows)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit grayscale
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
