"""Events as the API lists and decides them: a run's events or those across runs, one event,
and what a person decides about it (acknowledged, dismissed, its kind muted on its metric).

The routes call these rather than the store (the import contract `routes reach the store through
a service`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from holter_server.store import events as events_store
from holter_server.store.events import EventFilter
from holter_server.store.models import EventRow
from holter_server.vocabulary.statuses import EventStatus

# An event as the services hand it to the API: the store's row, until the schemas are built from
# domain objects (issue 34).
StoredEvent = EventRow


def events_of_run(
    *,
    session: Session,
    run_id: str,
    metric: str | None,
    kind: str | None,
    severity: str | None,
    status: str | None,
    limit: int,
    offset: int,
) -> tuple[Sequence[EventRow], int]:
    """A page of the run's events, latest step first, and how many match in all (withdrawn
    events only when asked for by status)."""
    where = EventFilter(run_id=run_id, metric=metric, kind=kind, severity=severity, status=status)
    return events_store.list_events(session=session, where=where, limit=limit, offset=offset)


def events_across_runs(
    *,
    session: Session,
    project: str | None,
    run_id: str | None,
    kind: str | None,
    severity: str | None,
    status: str | None,
    limit: int,
    offset: int,
) -> tuple[Sequence[EventRow], int]:
    """A page of events of every run (of one project, when given), and how many match in all."""
    where = EventFilter(run_id=run_id, project=project, kind=kind, severity=severity, status=status)
    return events_store.list_events(session=session, where=where, limit=limit, offset=offset)


def find_event(*, session: Session, run_id: str, event_id: int) -> EventRow | None:
    """The run's event of that id, or None."""
    return events_store.get_event(session=session, run_id=run_id, event_id=event_id)


def acknowledge(*, session: Session, event: EventRow, by: str | None, reason: str | None) -> EventRow:
    """Someone has seen the event and is on it."""
    return events_store.set_event_status(
        session=session, event=event, status=EventStatus.ACKNOWLEDGED, by=by, reason=reason
    )


def dismiss(*, session: Session, event: EventRow, by: str | None, reason: str | None, mute: bool) -> EventRow:
    """Not a problem; with `mute`, its kind on its metric is not reported again for the run (the
    caller refuses a mute of a run-level event, which has no metric)."""
    if mute and event.metric is not None:
        events_store.add_mute(
            session=session, run_id=event.run_id, metric=event.metric, kind=event.kind, by=by, reason=reason
        )
    return events_store.set_event_status(
        session=session, event=event, status=EventStatus.DISMISSED, by=by, reason=reason
    )
