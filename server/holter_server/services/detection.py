"""Live detection: feed newly stored points to each metric's incremental detector and keep
the run's events current; and the batch re-analysis of a whole run.

Work is found in the database (metrics whose last step is past what detection has seen), so
any number of service processes can run the loop; each pass claims its metrics, updates their
events and saves their detector state in one transaction: a restart neither misses nor repeats
an event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from holter_server.detect import DETECTOR_VERSION, Event, IncrementalDetector, verdict
from holter_server.detect.events import format_step, format_value
from holter_server.detect.findings import SeriesSnapshot, cross_signal_findings
from holter_server.detect.kinds import recognised_kind
from holter_server.services import alerting
from holter_server.store import events as events_store
from holter_server.store import points as points_store
from holter_server.store import runs as runs_store
from holter_server.store.database import session_scope
from holter_server.store.models import AlertRuleRow, EventRow, RunRow

CHUNK_POINTS = 200_000  # points read at a time by the batch re-analysis
# Points fed per live transaction, over all the metrics it claimed: a long backlog (an imported
# run, a bulk load) is worked off in many short transactions, so ingest never waits long for
# SQLite's one write lock.
POINTS_PER_TRANSACTION = 20_000


def event_fields(event: Event) -> dict[str, Any]:
    """The columns of an event row, from a detector event."""
    return {
        "metric": event.metric, "kind": event.kind, "severity": event.severity, "score": float(event.score),
        "start_step": event.start_step, "end_step": event.end_step, "peak_step": event.peak_step,
        "period": event.period, "summary": event.summary, "details": _json_safe(event.details),
        "detector_version": DETECTOR_VERSION,
    }


def _json_safe(value: Any) -> Any:
    """Details as JSON can store them (numpy scalars to Python, non-finite floats to names)."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return value


def record_event(*, session: Session, run_id: str, key: str, event: Event, muted: bool, keep_start: bool = False) -> EventRow:
    """Store an event (new or grown) and, in the same transaction, queue the alerts it calls for."""
    row, previous = events_store.upsert_event(session=session, run_id=run_id, event_key=key, fields=event_fields(event),
                                              muted=muted, keep_start=keep_start)
    if previous is None or previous != row.severity:
        alerting.alert_on_event(session=session, event=row, previous_severity=previous)
    return row


def detect_pending(*, session_factory: sessionmaker[Session], limit: int = 50, per_transaction: int = 8) -> int:
    """One pass of live detection over up to `limit` metrics with new points; returns how many.

    Metrics are claimed a few at a time, each group in its own short transaction: on SQLite a
    transaction holds the one write lock, and ingest must not wait behind a long pass.
    """
    done = 0
    while done < limit:
        claimed = _detect_some(session_factory, min(per_transaction, limit - done))
        if not claimed:
            break
        done += claimed
    return done


def _detect_some(session_factory: sessionmaker[Session], limit: int) -> int:
    with session_scope(session_factory) as session:
        work = events_store.claim_detection_work(session=session, limit=limit)
        touched: set[str] = set()
        muted_by_run: dict[str, set[tuple[str, str]]] = {}
        for item in work:
            run = session.get(RunRow, item.run_id)
            metric = runs_store.get_metric(session=session, run_id=item.run_id, name=item.metric)
            if run is None or metric is None:
                continue
            kind = recognised_kind(item.metric)
            thresholds = alerting.threshold_rules_for(session=session, run=run, metric=item.metric)
            detector = _detector_for(item.state, item.metric, kind) if kind else None
            share = max(1_000, POINTS_PER_TRANSACTION // len(work))
            series = points_store.read_points(session=session, run_id=item.run_id, metric_id=item.metric_id,
                                              start=item.detected_step + 1, end=None, limit=share)
            detected_step = series.steps[-1] if series.steps else (metric.last_step or item.detected_step)
            muted = muted_by_run.setdefault(item.run_id, events_store.muted_kinds(session=session, run_id=item.run_id))
            if detector is not None and series.steps:
                update = detector.add(series.steps, series.values)
                for event in update.changed:
                    record_event(session=session, run_id=item.run_id, key=event.event_id, event=event,
                                 muted=(event.metric, event.kind) in muted)
                events_store.withdraw_events(session=session, run_id=item.run_id, event_keys=update.withdrawn)
                touched.add(item.run_id)
            for rule in thresholds:
                _check_threshold(session, rule, item.run_id, item.metric, series.steps, series.values)
            events_store.save_detection_state(session=session, run_id=item.run_id, metric_id=item.metric_id,
                                              detected_step=detected_step, state=detector.state() if detector else None,
                                              detector_version=DETECTOR_VERSION)
        for run_id in sorted(touched):
            refresh_findings(session=session, run_id=run_id, muted=muted_by_run.get(run_id, set()))
    return len(work)


def _check_threshold(session: Session, rule: AlertRuleRow, run_id: str, metric: str, steps: list[int], values: list[float]) -> None:
    """A threshold rule fires once per metric of a run, at the first point that crosses it."""
    key = f"threshold:{rule.id}:{metric}"
    if events_store.get_event_by_key(session=session, run_id=run_id, event_key=key) is not None:
        return
    crossing = alerting.threshold_crossing(rule, steps, values)
    if crossing is None:
        return
    step, value = crossing
    limit = "non-finite" if rule.threshold_op == "nonfinite" else f"{rule.threshold_op} {format_value(rule.threshold_value or 0.0)}"
    event = Event(kind="threshold", metric=metric, start_step=step, end_step=step, severity=rule.min_severity, score=0.0,
                  peak_step=step, summary=f"{metric} was {format_value(value)} at step {format_step(step)}, {limit} (rule {rule.name!r})",
                  details={"rule_id": rule.id, "value": value})
    row, _ = events_store.upsert_event(session=session, run_id=run_id, event_key=key, fields=event_fields(event))
    alerting.alert_on_threshold(session=session, rule=rule, event=row)


def _detector_for(state: dict[str, Any] | None, metric: str, kind: str) -> IncrementalDetector:
    if state and state.get("detector_version") == DETECTOR_VERSION:
        return IncrementalDetector.from_state(state)
    return IncrementalDetector(metric, kind=kind)


def row_to_event(row: EventRow) -> Event:
    """A stored event as the detectors' `Event` (for cross-signal rules)."""
    return Event(kind=row.kind, metric=row.metric or "", start_step=row.start_step or 0, end_step=row.end_step or 0,
                 severity=row.severity, score=row.score, summary=row.summary, peak_step=row.peak_step,
                 period=row.period, details=dict(row.details or {}))


# Findings judged from the latest values rather than from events: one per metric, first seen kept.
CURRENT_STATE_FINDINGS = ("layer_dominance",)


def finding_key(event: Event) -> str:
    """Stable identity of a cross-signal finding."""
    if event.kind in CURRENT_STATE_FINDINGS:
        return f"finding:{event.kind}:{event.metric}"
    return f"finding:{event.kind}:{event.metric}@{event.start_step}"


def snapshots(*, session: Session, run_id: str) -> list[SeriesSnapshot]:
    """What the cross-signal rules need about each metric of the run."""
    return [SeriesSnapshot(m.name, m.last_value, m.first_step, m.last_step) for m in runs_store.list_metrics(session=session, run_id=run_id)]


def refresh_findings(*, session: Session, run_id: str, muted: set[tuple[str, str]]) -> None:
    """Recompute the run's cross-signal findings from its stored events and keep them current."""
    events = [row_to_event(row) for row in events_store.run_events_for_findings(session=session, run_id=run_id)]
    found = {finding_key(f): f for f in cross_signal_findings(events, snapshots(session=session, run_id=run_id))}
    for key, finding in found.items():
        record_event(session=session, run_id=run_id, key=key, event=finding, muted=(finding.metric, finding.kind) in muted,
                     keep_start=finding.kind in CURRENT_STATE_FINDINGS)
    stale = events_store.finding_keys(session=session, run_id=run_id) - found.keys()
    events_store.withdraw_events(session=session, run_id=run_id, event_keys=stale)


@dataclass
class SeriesAnalysis:
    """The batch classifier's reading of one metric."""

    metric: str
    kind: str
    verdict: str
    events: list[Event]


def analyze_run(*, session: Session, run_id: str) -> tuple[list[SeriesAnalysis], list[Event]]:
    """Re-run the classifier over every stored point of the run's vital signs.

    Reads each metric in chunks and feeds them to a fresh detector, which gives the same events
    as one pass over the whole series, in bounded memory.
    """
    analyses, all_events = [], []
    for metric in runs_store.list_metrics(session=session, run_id=run_id):
        kind = recognised_kind(metric.name)
        if kind is None:
            continue
        detector = IncrementalDetector(metric.name, kind=kind)
        start = 0
        while True:
            series = points_store.read_points(session=session, run_id=run_id, metric_id=metric.metric_id,
                                              start=start, end=None, limit=CHUNK_POINTS)
            if not series.steps:
                break
            detector.add(series.steps, series.values)
            start = series.steps[-1] + 1
        events = detector.events
        analyses.append(SeriesAnalysis(metric=metric.name, kind=kind, verdict=verdict(events), events=events))
        all_events.extend(events)
    findings = cross_signal_findings(all_events, snapshots(session=session, run_id=run_id))
    return analyses, findings
