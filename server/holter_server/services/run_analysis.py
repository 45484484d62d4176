"""The batch re-analysis of a whole run: the classifier over every stored point of its metrics,
as `POST /runs/{id}/analyze` answers it (nothing is stored)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from holter_server.detect import Event, verdict
from holter_server.detect.classify import Detector, new_detector
from holter_server.detect.findings import cross_signal_findings
from holter_server.services.attribution import explain_period
from holter_server.services.detection import snapshots
from holter_server.services.kinds import understood_metrics
from holter_server.store import points as points_store
from holter_server.store import runs as runs_store
from holter_server.vocabulary.names import Understanding, understand
from holter_server.vocabulary.signals import signal

CHUNK_POINTS = 200_000  # points read at a time


@dataclass
class SeriesAnalysis:
    """The batch classifier's reading of one metric."""

    metric: str
    understood: Understanding
    verdict: str
    events: list[Event]


def analyze_run(*, session: Session, run_id: str) -> tuple[list[SeriesAnalysis], list[Event]]:
    """Re-run the classifier over every stored point of the run's metrics, each read as the kind
    it is declared or recognised as (schedules are skipped; unknown names are watched only for
    NaN/±Inf and extreme outliers).

    Reads each metric in chunks and feeds them to a fresh detector, which gives the same events
    as one pass over the whole series, in bounded memory.
    """
    analyses, all_events = [], []
    run = runs_store.get_run(session=session, run_id=run_id)
    understood = understood_metrics(session=session, run=run) if run is not None else {}
    detectors: dict[str, Detector] = {}
    for metric in runs_store.list_metrics(session=session, run_id=run_id):
        reading = understood.get(metric.name) or understand(metric.name)
        if not signal(reading.kind).analysed:
            continue
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
    findings = cross_signal_findings(all_events, snapshots(session=session, run_id=run_id, detectors=detectors))
    return analyses, [explain_period(f, run.config if run is not None else None) for f in findings]
