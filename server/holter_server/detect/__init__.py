"""Curve classifier: names spike, divergence, plateau, sawtooth, too_good and level_shift.

Pure code — numpy in, events out; no I/O, clock, database or network.
"""

from holter_server.detect.classify import classify_series, is_alarm, verdict
from holter_server.detect.events import EVENT_KINDS, Event
from holter_server.detect.incremental import DETECTOR_VERSION, IncrementalDetector, Update
from holter_server.detect.kinds import KINDS, infer_kind, is_vital_sign, profile_for

__all__ = [
    "DETECTOR_VERSION",
    "EVENT_KINDS",
    "KINDS",
    "Event",
    "IncrementalDetector",
    "Update",
    "classify_series",
    "infer_kind",
    "is_alarm",
    "is_vital_sign",
    "profile_for",
    "verdict",
]
