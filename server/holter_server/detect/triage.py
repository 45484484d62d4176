"""Triage: whether a metric's new points can wait for a later read by its detector.

A detector's cost is per call, not per point: it works over its tail however few points are
new. With a lab's worth of metrics, reading each one every second with a second's points costs
more than the machine has. Points that are all finite and close to the level the detector last
described, or to the line through its last two points (a smooth trend, a counter), cannot open
a spike, a NaN event or a level shift now, nor make a divergence sudden; whatever slower
pattern they continue (a plateau, a sawtooth, a curve too good to be true) is found as well a
few seconds later, from more points in one call: the detectors give the same events however
the points are batched. So such points wait (up to a few seconds, `services/detection.py`), and
anything outside that band is read at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from holter_server.detect.classify import Detector
from holter_server.detect.incremental import IncrementalDetector

# Well inside the narrowest outlier threshold of any kind (8 noise units): a point this far from
# the level is read at once, whatever it turns out to be.
WAIT_NOISE_UNITS = 3.0


def can_wait(detector: Detector, steps: Sequence[int], values: Sequence[float]) -> bool:
    """Whether these points of the metric, not yet read, can wait for the detector's next call."""
    if not isinstance(detector, IncrementalDetector) or not len(values) or len(steps) != len(values):
        return False  # the GPU vitals' detectors are cheap, and read every time
    described = detector.baseline.last_level()
    if described is None:
        return False  # a detector just rebuilt, or still in its first blocks
    if len(values) <= PLAIN_POINTS:
        return _can_wait_plain(detector, described, steps, values)
    base, scale = described
    new = np.asarray(values, dtype=float)
    if not np.isfinite(new).all():
        return False
    allowed = WAIT_NOISE_UNITS * scale
    if np.abs(new - base).max() <= allowed:
        return True
    # a trend the block level lags behind: compare with the line through the last two points read
    tail_steps, tail_values = detector.tail_steps, detector.tail_values
    if len(tail_steps) < 2 or tail_steps[-1] == tail_steps[-2]:
        return False
    slope = (tail_values[-1] - tail_values[-2]) / float(tail_steps[-1] - tail_steps[-2])
    predicted = tail_values[-1] + slope * (np.asarray(steps, dtype=float) - float(tail_steps[-1]))
    return bool(np.abs(new - predicted).max() <= allowed)


# Up to this many points `can_wait` takes them as plain floats, one by one: a second's points of
# a metric are a handful, and numpy's calls on arrays that small cost ten times as much (asked of
# every waiting metric in every pass).
PLAIN_POINTS = 64


def _can_wait_plain(
    detector: IncrementalDetector, described: tuple[float, float], steps: Sequence[int], values: Sequence[float]
) -> bool:
    """`can_wait`'s test on plain floats: each difference, product and comparison is the same
    IEEE operation on the same doubles as numpy's, so the answer is the same. (Every distance
    within `allowed` is numpy's max of them within it, a NaN distance included: it is neither.)"""
    new = [math.nan if v is None else float(v) for v in values]  # as numpy reads None
    if not all(math.isfinite(v) for v in new):
        return False
    base, allowed = float(described[0]), float(WAIT_NOISE_UNITS * described[1])
    if all(abs(v - base) <= allowed for v in new):
        return True
    tail_steps, tail_values = detector.tail_steps, detector.tail_values
    if len(tail_steps) < 2 or tail_steps[-1] == tail_steps[-2]:
        return False
    slope = float((tail_values[-1] - tail_values[-2]) / float(tail_steps[-1] - tail_steps[-2]))
    last_step, last_value = float(tail_steps[-1]), float(tail_values[-1])
    return all(
        abs(v - (last_value + slope * (float(step) - last_step))) <= allowed for v, step in zip(new, steps, strict=True)
    )
