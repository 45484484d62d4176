"""Events, mutes and live-detection state. All SQL about them lives here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, and_, case, func, literal, select, update
from sqlalchemy.orm import Session

from holter_server.store.models import DetectorStateRow, EventRow, MetricRow, MuteRow, RunRow, UTCDateTime
from holter_server.store.database import insert_ignoring_conflicts
from holter_server.store.runs import now

SEVERITY_ORDER = case({"info": 1, "warning": 2, "critical": 3}, value=EventRow.severity, else_=0)
SEVERITY_NAMES = {0: "healthy", 1: "info", 2: "warning", 3: "critical"}


@dataclass(frozen=True)
class EventFilter:
    """Which events to list; None means any."""

    run_id: str | None = None
    project: str | None = None
    metric: str | None = None
    kind: str | None = None
    severity: str | None = None
    status: str | None = None


@dataclass
class DetectionWork:
    """One metric with points the live detector has not seen yet."""

    run_id: str
    metric_id: int
    metric: str
    detected_step: int
    state: dict[str, Any] | None
    detector_version: str | None


def claim_detection_work(*, session: Session, limit: int) -> list[DetectionWork]:
    """Metrics whose newest step is past what detection has seen, locked for this transaction.

    On Postgres the rows are claimed with FOR UPDATE SKIP LOCKED, so several service processes
    share the work without doing any of it twice; SQLite has one writer at a time anyway.
    """
    missing = (
        select(MetricRow.run_id, MetricRow.metric_id, literal(-1, BigInteger()), literal(now(), UTCDateTime()))
        .outerjoin(DetectorStateRow, and_(DetectorStateRow.run_id == MetricRow.run_id, DetectorStateRow.metric_id == MetricRow.metric_id))
        .where(DetectorStateRow.run_id.is_(None))
    )
    session.execute(
        insert_ignoring_conflicts(session, DetectorStateRow)
        .from_select(["run_id", "metric_id", "detected_step", "updated_at"], missing)
    )
    rows = session.execute(
        select(DetectorStateRow, MetricRow.name)
        .join(MetricRow, and_(MetricRow.run_id == DetectorStateRow.run_id, MetricRow.metric_id == DetectorStateRow.metric_id))
        .where(MetricRow.last_step > DetectorStateRow.detected_step)
        .order_by(DetectorStateRow.updated_at)
        .limit(limit)
        .with_for_update(skip_locked=True, of=DetectorStateRow)
    ).all()
    return [
        DetectionWork(run_id=state.run_id, metric_id=state.metric_id, metric=name, detected_step=state.detected_step,
                      state=state.state, detector_version=state.detector_version)
        for state, name in rows
    ]


def save_detection_state(
    *, session: Session, run_id: str, metric_id: int, detected_step: int, state: dict[str, Any] | None, detector_version: str
) -> None:
    """Record how far detection got on a metric and the detector's state there."""
    session.execute(
        update(DetectorStateRow)
        .where(DetectorStateRow.run_id == run_id, DetectorStateRow.metric_id == metric_id)
        .values(detected_step=detected_step, state=state, detector_version=detector_version, updated_at=now())
    )


def muted_kinds(*, session: Session, run_id: str) -> set[tuple[str, str]]:
    """(metric, kind) pairs muted for this run."""
    return {(m, k) for m, k in session.execute(select(MuteRow.metric, MuteRow.kind).where(MuteRow.run_id == run_id))}


def add_mute(*, session: Session, run_id: str, metric: str, kind: str, by: str | None, reason: str | None) -> None:
    """Mute a kind of event for one metric of a run (idempotent)."""
    session.execute(
        insert_ignoring_conflicts(session, MuteRow)
        .values(run_id=run_id, metric=metric, kind=kind, created_by=by, reason=reason, created_at=now())
    )


def upsert_event(
    *,
    session: Session,
    run_id: str,
    event_key: str,
    fields: dict[str, Any],
    muted: bool = False,
    keep_start: bool = False,
) -> tuple[EventRow, str | None]:
    """Insert the event, or update the one with the same key in place (a growing event).

    A person's decision (acknowledged, dismissed) stands through updates; a withdrawn event
    that comes back is open again. With `keep_start`, an existing event keeps the step where
    it was first seen. Returns the row and its severity before this update (None when new).
    """
    moment = now()
    row = session.scalar(select(EventRow).where(EventRow.run_id == run_id, EventRow.event_key == event_key))
    if row is None:
        row = EventRow(run_id=run_id, event_key=event_key, status="muted" if muted else "open", created_at=moment, updated_at=moment, **fields)
        session.add(row)
        session.flush()
        return row, None
    previous = row.severity
    for name, value in fields.items():
        if not (keep_start and name == "start_step"):
            setattr(row, name, value)
    if row.status == "withdrawn":
        row.status = "muted" if muted else "open"
    row.updated_at = moment
    session.flush()
    return row, previous


def withdraw_events(*, session: Session, run_id: str, event_keys: Iterable[str]) -> None:
    """Mark events the detector no longer stands by (kept, hidden from default lists)."""
    keys = list(event_keys)
    if keys:
        session.execute(
            update(EventRow)
            .where(EventRow.run_id == run_id, EventRow.event_key.in_(keys), EventRow.status == "open")
            .values(status="withdrawn", updated_at=now())
        )


def list_events(*, session: Session, where: EventFilter, limit: int, offset: int) -> tuple[Sequence[EventRow], int]:
    """Events matching the filter, newest step first, and how many match in all.

    Withdrawn events are left out unless asked for by status.
    """
    query = select(EventRow)
    if where.project is not None:
        query = query.join(RunRow, RunRow.id == EventRow.run_id).where(RunRow.project == where.project)
    for column, value in ((EventRow.run_id, where.run_id), (EventRow.metric, where.metric), (EventRow.kind, where.kind), (EventRow.severity, where.severity)):
        if value is not None:
            query = query.where(column == value)
    query = query.where(EventRow.status == where.status) if where.status is not None else query.where(EventRow.status != "withdrawn")
    count = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(EventRow.start_step.desc().nulls_last(), EventRow.id.desc()).limit(limit).offset(offset)).all()
    return rows, count


def get_event_by_key(*, session: Session, run_id: str, event_key: str) -> EventRow | None:
    """The event with this detector key on a run, or None."""
    return session.scalar(select(EventRow).where(EventRow.run_id == run_id, EventRow.event_key == event_key))


def get_event(*, session: Session, run_id: str, event_id: int) -> EventRow | None:
    """One event of a run, or None."""
    return session.scalar(select(EventRow).where(EventRow.run_id == run_id, EventRow.id == event_id))


def set_event_status(*, session: Session, event: EventRow, status: str, by: str | None, reason: str | None) -> EventRow:
    """Acknowledge or dismiss an event, recording who and why."""
    moment = now()
    event.status, event.status_by, event.status_reason, event.status_at, event.updated_at = status, by, reason, moment, moment
    session.flush()
    return event


def health_of_runs(*, session: Session, run_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
    """Per run: the worst open event's severity ("healthy" when none) and the open count."""
    if not run_ids:
        return {}
    rows = session.execute(
        select(EventRow.run_id, func.max(SEVERITY_ORDER), func.count())
        .where(EventRow.run_id.in_(run_ids), EventRow.status == "open")
        .group_by(EventRow.run_id)
    )
    found = {run_id: (SEVERITY_NAMES[worst or 0], count) for run_id, worst, count in rows}
    return {run_id: found.get(run_id, ("healthy", 0)) for run_id in run_ids}


def run_events_for_findings(*, session: Session, run_id: str) -> Sequence[EventRow]:
    """The run's per-metric detector events (not findings, not lifecycle), for cross-signal rules."""
    return session.scalars(
        select(EventRow).where(EventRow.run_id == run_id, EventRow.status != "withdrawn", EventRow.event_key.not_like("finding:%"),
                               EventRow.event_key.not_like("status:%"), EventRow.event_key.not_like("threshold:%"))
    ).all()


def finding_keys(*, session: Session, run_id: str) -> set[str]:
    """Keys of the cross-signal findings currently standing on a run."""
    return set(session.scalars(select(EventRow.event_key).where(EventRow.run_id == run_id, EventRow.event_key.like("finding:%"), EventRow.status != "withdrawn")))


def record_status_event(*, session: Session, run_id: str, kind: str, severity: str, summary: str, step: int | None) -> EventRow:
    """A lifecycle change (stalled, resumed, crashed) as an event, so alert rules can use it."""
    moment = now()
    row = EventRow(
        run_id=run_id, event_key=f"status:{kind}@{moment.isoformat()}", metric=None, kind=kind, severity=severity, score=0.0,
        start_step=step, end_step=step, summary=summary, details={}, status="open", detector_version="lifecycle",
        created_at=moment, updated_at=moment,
    )
    session.add(row)
    session.flush()
    return row


