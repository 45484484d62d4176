"""Batch entry point: classify a whole series, and sum its events up in a verdict."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from holter_server.detect.events import SEVERITY_RANK, Event
from holter_server.detect.incremental import IncrementalDetector

VERDICTS = ("healthy", "notice", "warning", "critical")


def classify_series(
    steps: Iterable[int] | np.ndarray,
    values: Iterable[float] | np.ndarray,
    *,
    metric: str,
    kind: str | None = None,
    expected_floor: float | None = None,
) -> list[Event]:
    """Return the events found on one metric series, in step order.

    `kind` is inferred from `metric` when not given; NaN/±Inf values are data (divergence).
    Equivalent, event for event, to feeding the same points to an `IncrementalDetector` in any
    batches.
    """
    detector = IncrementalDetector(metric, kind=kind, expected_floor=expected_floor)
    detector.add(np.asarray(steps), np.asarray(values, dtype=float))
    return detector.events


def verdict(events: list[Event]) -> str:
    """'healthy' (nothing found), 'notice' (only info events, e.g. recovered one-step spikes),
    'warning' or 'critical' (the worst event's severity)."""
    if not events:
        return "healthy"
    worst = max(SEVERITY_RANK[e.severity] for e in events)
    return VERDICTS[worst + 1]


def is_alarm(verdict_name: str) -> bool:
    """Whether a verdict should page someone (and make `holter analyze` exit 1)."""
    return verdict_name in ("warning", "critical")
