"""The batch re-analysis of a whole run: the classifier over every stored point of its metrics,
as `POST /runs/{id}/analyze` answers it (nothing is stored).

Its cost is known before it starts (a detector per metric, about 15 ms each here, and about
11 µs per point), from the metrics' stored counts: a run with more analysed metrics or points
than the caps is refused (`AnalysisTooLargeError`) before any point is read, and the caller may
name the metrics to analyse instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from holter_server.detect import Event, verdict
from holter_server.detect.classify import Detector, new_detector
from holter_server.detect.findings import cross_signal_findings
from holter_server.services.attribution import explain_period
from holter_server.services.detection import snapshots
from holter_server.services.kinds import metric_kinds_of, understood_metrics
from holter_server.store import points as points_store
from holter_server.store import runs as runs_store
from holter_server.vocabulary.names import Understanding, understand
from holter_server.vocabulary.signals import signal

CHUNK_POINTS = 200_000  # points read at a time


class AnalysisTooLargeError(ValueError):
    """More analysed metrics or points than one request may read."""


class UnknownMetricError(LookupError):
    """A metric asked for that the run does not have."""


@dataclass
class SeriesAnalysis:
    """The batch classifier's reading of one metric."""

    metric: str
    understood: Understanding
    verdict: str
    events: list[Event]


def analyze_run(
    *,
    session: Session,
    run_id: str,
    metrics: list[str] | None = None,
    max_metrics: int | None = None,
    max_points: int | None = None,
) -> tuple[list[SeriesAnalysis], list[Event]]:
    """Re-run the classifier over every stored point of the run's metrics (or of `metrics`),
    each read as the kind it is declared or recognised as (schedules are skipped; unknown names
    are watched only for NaN/±Inf and extreme outliers).

    AnalysisTooLargeError, before any point is read, when more than `max_metrics` metrics or
    `max_points` points would be analysed; UnknownMetricError for a metric the run lacks.
    Reads each metric in chunks and feeds them to a fresh detector, which gives the same events
    as one pass over the whole series, in bounded memory.
    """
    analyses, all_events = [], []
    run = runs_store.get_run(session=session, run_id=run_id)
    understood = understood_metrics(session=session, run=run) if run is not None else {}
    detectors: dict[str, Detector] = {}
    rows = list(runs_store.list_metrics(session=session, run_id=run_id))
    if metrics is not None:
        wanted = set(metrics)
        if missing := sorted(wanted - {row.name for row in rows}):
            raise UnknownMetricError(f"run {run_id!r} has no metric {missing[0]!r}")
        rows = [row for row in rows if row.name in wanted]
    chosen = [
        (row, reading)
        for row in rows
        if signal(
            (
                reading := understood.get(row.name)
                or understand(row.name, declarations=run.metric_definitions if run is not None else None)
            ).kind
        ).analysed
    ]
    points = sum(row.count or 0 for row, _ in chosen)
    if max_metrics is not None and len(chosen) > max_metrics:
        raise AnalysisTooLargeError(
            f"{len(chosen):,} metrics to analyse, more than {max_metrics:,} per request (HOLTER_MAX_ANALYZE_METRICS); "
            "name the metrics to analyse (metric=..., repeatable)"
        )
    if max_points is not None and points > max_points:
        raise AnalysisTooLargeError(
            f"{points:,} points to analyse, more than {max_points:,} per request (HOLTER_MAX_ANALYZE_POINTS); "
            "name fewer metrics (metric=..., repeatable)"
        )
    for metric, reading in chosen:
        detector = new_detector(metric.name, kind=reading.kind)
        start = 0
        while True:
            series = points_store.read_points(
                session=session, run_id=run_id, metric_id=metric.metric_id, start=start, end=None, limit=CHUNK_POINTS
            )
            if not series.steps:
                break
            detector.add(series.steps, series.values)
            start = series.steps[-1] + 1
        events = [explain_period(e, run.config if run is not None else None) for e in detector.events]
        detectors[metric.name] = detector
        analyses.append(SeriesAnalysis(metric=metric.name, understood=reading, verdict=verdict(events), events=events))
        all_events.extend(events)
    findings = cross_signal_findings(
        all_events,
        snapshots(session=session, run_id=run_id, detectors=detectors),
        metric_kinds_of(understood, run),
    )
    return analyses, [explain_period(f, run.config if run is not None else None) for f in findings]
