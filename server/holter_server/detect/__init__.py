"""Curve classifier: names spike, divergence, plateau, sawtooth, too_good and level_shift.

Pure code — numpy in, events out; no I/O, clock, database or network. What a metric is, and
each kind's thresholds, come from the vocabulary (`holter_server.vocabulary`).
"""

from holter_server.detect.classify import classify_series, is_alarm, verdict
from holter_server.detect.events import Event
from holter_server.detect.incremental import DETECTOR_VERSION, IncrementalDetector, Update

__all__ = [
    "DETECTOR_VERSION",
    "Event",
    "IncrementalDetector",
    "Update",
    "classify_series",
    "is_alarm",
    "verdict",
]
