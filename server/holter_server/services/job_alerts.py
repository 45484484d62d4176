"""Alerts the training job raises itself (`run.alert(title, text, level)`, wandb's `wandb.alert`).

Each becomes an event of kind `alert` on the run, keyed by the client's id for it, so an alert
resent after a fault or from the spool is stored (and sent to chat) once. The alert rules
decide who hears about it, as for any event; a new channel's default rules take every level.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from holter_server.detect.events import Event
from holter_server.schemas.events import JobAlert
from holter_server.services.alerting import alert_on_event
from holter_server.store import events as events_store
from holter_server.store.models import EventRow, RunRow
from holter_server.vocabulary.event_keys import job_alert_key
from holter_server.vocabulary.events import EventKind

DETECTOR = "job"  # what stands in the event's detector_version: the job itself said so


def raise_alert(*, session: Session, run: RunRow, alert: JobAlert) -> EventRow:
    """Store the alert as an event (once per key) and queue its chat messages."""
    key = job_alert_key(alert.key)
    existing = events_store.get_event_by_key(session=session, run_id=run.id, event_key=key)
    if existing is not None:
        return existing
    summary = f"{alert.title}: {alert.text}" if alert.text else alert.title
    event = Event(
        kind=EventKind.ALERT,
        metric=None,
        start_step=alert.step,
        end_step=alert.step,
        peak_step=alert.step,
        severity=alert.severity,
        score=0.0,
        summary=summary,
        details={"title": alert.title, "text": alert.text},
    )
    row, created = events_store.insert_event_once(
        session=session, run_id=run.id, event_key=key, event=event, detector_version=DETECTOR
    )
    if created:  # the same alert racing itself (a retry sent while the first is stored) is sent to chat once
        alert_on_event(session=session, event=row, previous_severity=None)
    return row
