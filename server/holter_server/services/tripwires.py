"""Tripwire reports from the training job, turned into events on the run.

A non-finite report (`POST /runs/{id}/nonfinite`) becomes one `first_nonfinite` event per step,
keyed by that step: the client resends it after a fault or from its spool, and the service keeps
the first one it stored. The event is attached to the divergence it explains as soon as that
divergence is known: here when it already is, otherwise by the live detection's refresh of the
run's findings (`services.detection.refresh_findings_of_runs`).
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from holter_server.detect import DETECTOR_VERSION
from holter_server.detect.findings import nonfinite_origin
from holter_server.schemas.tripwires import NonFiniteReport
from holter_server.services.alerting import alert_on_event
from holter_server.services.detection import row_to_event
from holter_server.services.kinds import run_metric_kinds
from holter_server.store import events as events_store
from holter_server.store import runs as runs_store
from holter_server.store.models import EventRow
from holter_server.vocabulary.event_keys import tripwire_key


def record_nonfinite(*, session: Session, run_id: str, report: NonFiniteReport) -> EventRow:
    """Store the report's event (once per step) attached to a divergence when there is one."""
    key = tripwire_key("nonfinite", report.step)
    existing = events_store.get_event_by_key(session=session, run_id=run_id, event_key=key)
    if existing is not None:
        return existing
    events = [row_to_event(row) for row in events_store.run_events_for_findings(session=session, run_id=run_id)]
    run = runs_store.get_run(session=session, run_id=run_id)
    event = nonfinite_origin(
        step=report.step,
        forward=report.forward.model_dump(exclude_defaults=True) if report.forward else None,
        gradient=report.gradient.model_dump(exclude_defaults=True) if report.gradient else None,
        events=events,
        kinds=run_metric_kinds(session=session, run=run),
    )
    muted = (event.metric, event.kind) in events_store.muted_kinds(session=session, run_id=run_id)
    # stored once even when the same report races itself (a retry sent while the first is stored)
    row, created = events_store.insert_event_once(
        session=session, run_id=run_id, event_key=key, event=event, detector_version=DETECTOR_VERSION, muted=muted
    )
    if created:
        alert_on_event(session=session, event=row, previous_severity=None)
    return row
