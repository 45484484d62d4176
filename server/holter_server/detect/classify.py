"""Batch entry point: classify a whole series, and sum its events up in a verdict."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from holter_server.detect.events import Event
from holter_server.detect.incremental import IncrementalDetector
from holter_server.detect.system_vitals import DETECTORS, SystemVitalDetector
from holter_server.vocabulary import severities
from holter_server.vocabulary.kinds import kind_of
from holter_server.vocabulary.profiles import SYSTEM_KINDS

Detector = IncrementalDetector | SystemVitalDetector


def classify_series(
    steps: Iterable[int] | np.ndarray,
    values: Iterable[float] | np.ndarray,
    *,
    metric: str,
    kind: str | None = None,
    expected_floor: float | None = None,
) -> list[Event]:
    """Return the events found on one metric series, in step order.

    `kind` is what the vocabulary understands `metric` to be when not given (an unknown name is
    watched only for NaN/±Inf and extreme outliers); NaN/±Inf values are data (divergence).
    Equivalent, event for event, to feeding the same points to an `IncrementalDetector` in any
    batches.
    """
    detector = new_detector(metric, kind=kind, expected_floor=expected_floor)
    detector.add(np.asarray(steps), np.asarray(values, dtype=float))
    return detector.events


def new_detector(metric: str, *, kind: str | None = None, expected_floor: float | None = None) -> Detector:
    """The incremental detector for a series: the curve classifier, or the system-vital
    detector of a GPU kind (`kind`: what the vocabulary understands the name to be when not given)."""
    chosen = kind or kind_of(metric)
    if chosen in SYSTEM_KINDS:
        return DETECTORS[chosen](metric, chosen)
    return IncrementalDetector(metric, kind=chosen, expected_floor=expected_floor)


def detector_from_state(state: dict[str, Any]) -> Detector:
    """Rebuild whichever detector saved `state`."""
    if state.get("kind") in SYSTEM_KINDS:
        return SystemVitalDetector.from_state(state)
    return IncrementalDetector.from_state(state)


def verdict(events: list[Event]) -> str:
    """'healthy' (nothing found), 'notice' (only info events, e.g. recovered one-step spikes),
    'warning' or 'critical' (the worst event's severity)."""
    return severities.verdict_of(e.severity for e in events)


def is_alarm(verdict_name: str) -> bool:
    """Whether a verdict should page someone (and make `holter analyze` exit 1)."""
    return severities.is_alarm_verdict(verdict_name)
