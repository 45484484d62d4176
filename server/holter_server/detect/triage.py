"""Triage: whether a metric's new points can wait for a later read by its detector.

A detector's cost is per call, not per point: it works over its tail however few points are
new. With a lab's worth of metrics, reading each one every second with a second's points costs
more than the machine has. Points that are all finite and close to the level the detector last
described cannot open a spike, a NaN event, a divergence or a level shift now; whatever slower
pattern they continue (a plateau, a sawtooth, a curve too good to be true) is found as well a
few seconds later, from more points in one call: the detectors give the same events however
the points are batched. So such points wait (up to a few seconds, `services/detection.py`), and
anything outside that band is read at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from holter_server.detect.baseline import MAD_TO_SIGMA, noise_floor
from holter_server.detect.classify import Detector
from holter_server.detect.incremental import IncrementalDetector

# Well inside the narrowest outlier threshold of any kind (8 noise units): a point this far from
# the level is read at once, whatever it turns out to be.
WAIT_NOISE_UNITS = 3.0


def can_wait(detector: Detector, values: Sequence[float]) -> bool:
    """Whether `values`, the metric's points not yet read, can wait for the detector's next call."""
    if not isinstance(detector, IncrementalDetector) or not len(values):
        return False  # the GPU vitals' detectors are cheap, and read every time
    described = detector.baseline.cached  # the level and noise of the last block the detector read
    if described is None:
        return False  # a detector just rebuilt, or still in its first blocks
    base, mad, print_quantum = described[1]
    if not (math.isfinite(base) and math.isfinite(mad)):
        return False
    scale = max(MAD_TO_SIGMA * mad, float(noise_floor(base, print_quantum, detector.profile.abs_floor)))
    new = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        return bool(np.isfinite(new).all() and np.abs(new - base).max() <= WAIT_NOISE_UNITS * scale)
