"""Events and mutes. All SQL about them lives here (live detection's queue and progress: detection_queue.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, func, select, update
from sqlalchemy.orm import Session

from holter_server.detect.events import Event
from holter_server.nonfinite import json_safe_tree
from holter_server.store.database import insert_ignoring_conflicts, next_id
from holter_server.store.models import EventRow, MuteRow, RunRow
from holter_server.store.runs import now
from holter_server.vocabulary.event_keys import KeyPrefix, status_key
from holter_server.vocabulary.severities import HEALTHY, SEVERITIES
from holter_server.vocabulary.statuses import EventStatus

# The worst open event names a run's health: severities ordered by the vocabulary's rank (0: none).
SEVERITY_ORDER = case({s.name: s.rank + 1 for s in SEVERITIES}, value=EventRow.severity, else_=0)
HEALTH_BY_ORDER = {0: HEALTHY, **{s.rank + 1: s.name for s in SEVERITIES}}


# The classifier's own events on one metric, by their keys: not findings, lifecycle or thresholds.
_CLASSIFIER_EVENTS = (
    EventRow.event_key.not_like(KeyPrefix.FINDING.like()),
    EventRow.event_key.not_like(KeyPrefix.STATUS.like()),
    EventRow.event_key.not_like(KeyPrefix.THRESHOLD.like()),
)


@dataclass(frozen=True)
class EventFilter:
    """Which events to list; None means any."""

    run_id: str | None = None
    project: str | None = None
    metric: str | None = None
    kind: str | None = None
    severity: str | None = None
    status: str | None = None


def withdraw_metric_events(*, session: Session, run_id: str, metrics: Sequence[str]) -> None:
    """Withdraw the open classifier events of these metrics (findings, lifecycle, threshold,
    reference and tripwire events stay: a tripwire report is attached again to whatever
    divergence the new reading finds): what they were read as has changed, and detection reads
    them again."""
    if metrics:
        session.execute(
            update(EventRow)
            .where(
                EventRow.run_id == run_id,
                EventRow.metric.in_(list(metrics)),
                EventRow.status == EventStatus.OPEN,
                *_CLASSIFIER_EVENTS,
                EventRow.event_key.not_like(KeyPrefix.REFERENCE.like()),
                EventRow.event_key.not_like(KeyPrefix.TRIPWIRE.like()),
            )
            .values(status=EventStatus.WITHDRAWN, updated_at=now())
        )


def muted_kinds(*, session: Session, run_id: str) -> set[tuple[str, str]]:
    """(metric, kind) pairs muted for this run."""
    return {(m, k) for m, k in session.execute(select(MuteRow.metric, MuteRow.kind).where(MuteRow.run_id == run_id))}


def muted_kinds_of_runs(*, session: Session, run_ids: Sequence[str]) -> dict[str, set[tuple[str, str]]]:
    """(metric, kind) pairs muted, for each of these runs (every run given is in the answer)."""
    out: dict[str, set[tuple[str, str]]] = {run_id: set() for run_id in run_ids}
    if run_ids:
        for run_id, metric, kind in session.execute(
            select(MuteRow.run_id, MuteRow.metric, MuteRow.kind).where(MuteRow.run_id.in_(list(run_ids)))
        ):
            out[run_id].add((metric, kind))
    return out


def add_mute(*, session: Session, run_id: str, metric: str, kind: str, by: str | None, reason: str | None) -> None:
    """Mute a kind of event for one metric of a run (idempotent)."""
    session.execute(
        insert_ignoring_conflicts(session, MuteRow).values(
            run_id=run_id, metric=metric, kind=kind, created_by=by, reason=reason, created_at=now()
        )
    )


def upsert_event(
    *,
    session: Session,
    run_id: str,
    event_key: str,
    event: Event,
    detector_version: str,
    muted: bool = False,
    keep_start: bool = False,
) -> tuple[EventRow, str | None]:
    """Insert the event, or update the one with the same key in place (a growing event);
    `detector_version` says who found it (the detectors' version, "lifecycle", "job").

    A person's decision (acknowledged, dismissed) stands through updates; a withdrawn event
    that comes back is open again. With `keep_start`, an existing event keeps the step where
    it was first seen. Returns the row and its severity before this update (None when new).
    """
    moment = now()
    fields = _columns(event, detector_version)
    row = session.scalar(select(EventRow).where(EventRow.run_id == run_id, EventRow.event_key == event_key))
    if row is None:
        row = EventRow(
            id=next_id(session, EventRow.id),
            run_id=run_id,
            event_key=event_key,
            status=EventStatus.MUTED if muted else EventStatus.OPEN,
            created_at=moment,
            updated_at=moment,
            **fields,
        )
        session.add(row)
        session.flush()
        return row, None
    previous = row.severity
    for name, value in fields.items():
        if not (keep_start and name == "start_step"):
            setattr(row, name, value)
    if row.status == EventStatus.WITHDRAWN:
        row.status = EventStatus.MUTED if muted else EventStatus.OPEN
    row.updated_at = moment
    session.flush()
    return row, previous


def insert_event_once(
    *, session: Session, run_id: str, event_key: str, event: Event, detector_version: str, muted: bool = False
) -> tuple[EventRow, bool]:
    """Store the event unless one with its key is stored already; returns (the stored row, whether
    this call stored it). An `INSERT ... ON CONFLICT DO NOTHING`: the same report resent while the
    first is still being stored (a client's retry after its timeout) waits for it and keeps it."""
    moment = now()
    given_id = next_id(session, EventRow.id)  # None on Postgres: its sequence numbers the row
    created = session.execute(  # a row back: this call inserted it
        insert_ignoring_conflicts(session, EventRow)
        .values(
            **({} if given_id is None else {"id": given_id}),
            run_id=run_id,
            event_key=event_key,
            status=EventStatus.MUTED if muted else EventStatus.OPEN,
            created_at=moment,
            updated_at=moment,
            **_columns(event, detector_version),
        )
        .returning(EventRow.id)
    ).first()
    row = session.scalar(
        select(EventRow)
        .where(EventRow.run_id == run_id, EventRow.event_key == event_key)
        .execution_options(populate_existing=True)
    )
    assert row is not None  # inserted above, or there already
    return row, created is not None


def _columns(event: Event, detector_version: str) -> dict[str, Any]:
    """The columns of an event row that its author's `Event` gives."""
    # a rule that found no metric to name says "" (detect.findings.nonfinite_origin): stored as
    # None, the one spelling of "the whole run" in the table
    return {
        "metric": event.metric or None,
        "kind": event.kind,
        "severity": event.severity,
        "score": float(event.score),
        "start_step": event.start_step,
        "end_step": event.end_step,
        "peak_step": event.peak_step,
        "period": event.period,
        "summary": event.summary,
        "details": stored_details(event),
        "detector_version": detector_version,
    }


def stored_details(event: Event) -> dict[str, Any]:
    """An event's details as the store keeps them: JSON-safe, non-finite floats by name
    (holter_server.nonfinite), numpy scalars as Python numbers."""
    details: dict[str, Any] = json_safe_tree(event.details)
    return details


def event_of(row: EventRow) -> Event:
    """The `Event` a stored row holds (its details as stored: non-finite floats by name)."""
    return Event(
        kind=row.kind,
        metric=row.metric,
        start_step=row.start_step,
        end_step=row.end_step,
        severity=row.severity,
        score=row.score,
        summary=row.summary,
        peak_step=row.peak_step,
        period=row.period,
        details=dict(row.details or {}),
    )


def withdraw_events(*, session: Session, run_id: str, event_keys: Iterable[str]) -> None:
    """Mark events the detector no longer stands by (kept, hidden from default lists)."""
    keys = list(event_keys)
    if keys:
        session.execute(
            update(EventRow)
            .where(EventRow.run_id == run_id, EventRow.event_key.in_(keys), EventRow.status == EventStatus.OPEN)
            .values(status=EventStatus.WITHDRAWN, updated_at=now())
        )


def list_events(*, session: Session, where: EventFilter, limit: int, offset: int) -> tuple[Sequence[EventRow], int]:
    """Events matching the filter, newest step first, and how many match in all.

    Withdrawn events are left out unless asked for by status.
    """
    query = select(EventRow)
    if where.project is not None:
        query = query.join(RunRow, RunRow.id == EventRow.run_id).where(RunRow.project == where.project)
    for column, value in (
        (EventRow.run_id, where.run_id),
        (EventRow.metric, where.metric),
        (EventRow.kind, where.kind),
        (EventRow.severity, where.severity),
    ):
        if value is not None:
            query = query.where(column == value)
    query = (
        query.where(EventRow.status == where.status)
        if where.status is not None
        else query.where(EventRow.status != EventStatus.WITHDRAWN)
    )
    count = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(
        query.order_by(EventRow.start_step.desc().nulls_last(), EventRow.id.desc()).limit(limit).offset(offset)
    ).all()
    return rows, count


def count_metric_events_of_runs(*, session: Session, run_ids: Sequence[str]) -> int:
    """How many events of a metric (not withdrawn) these runs have in all, counted in the database."""
    if not run_ids:
        return 0
    query = select(func.count()).where(
        EventRow.run_id.in_(list(run_ids)), EventRow.metric.is_not(None), EventRow.status != EventStatus.WITHDRAWN
    )
    return session.scalar(query) or 0


def get_event_by_key(*, session: Session, run_id: str, event_key: str) -> EventRow | None:
    """The event with this detector key on a run, or None."""
    return session.scalar(select(EventRow).where(EventRow.run_id == run_id, EventRow.event_key == event_key))


def get_event(*, session: Session, run_id: str, event_id: int) -> EventRow | None:
    """One event of a run, or None."""
    return session.scalar(select(EventRow).where(EventRow.run_id == run_id, EventRow.id == event_id))


def set_event_status(*, session: Session, event: EventRow, status: str, by: str | None, reason: str | None) -> EventRow:
    """Acknowledge or dismiss an event, recording who and why."""
    moment = now()
    event.status, event.status_by, event.status_reason, event.status_at, event.updated_at = (
        status,
        by,
        reason,
        moment,
        moment,
    )
    session.flush()
    return event


def health_of_runs(*, session: Session, run_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
    """Per run: the worst open event's severity ("healthy" when none) and the open count."""
    if not run_ids:
        return {}
    rows = session.execute(
        select(EventRow.run_id, func.max(SEVERITY_ORDER), func.count())
        .where(EventRow.run_id.in_(run_ids), EventRow.status == EventStatus.OPEN)
        .group_by(EventRow.run_id)
    )
    found = {run_id: (HEALTH_BY_ORDER[worst or 0], count) for run_id, worst, count in rows}
    return {run_id: found.get(run_id, (HEALTHY, 0)) for run_id in run_ids}


def open_alarms_of_runs(*, session: Session, run_ids: Sequence[str], at_least: int) -> dict[str, list[EventRow]]:
    """Per run, its open events of a severity ranked `at_least` or worse (their rank + 1, as
    `SEVERITY_ORDER` counts), earliest first; runs with none are left out."""
    found: dict[str, list[EventRow]] = {}
    if not run_ids:
        return found
    rows = session.scalars(
        select(EventRow)
        .where(EventRow.run_id.in_(run_ids), EventRow.status == EventStatus.OPEN, at_least <= SEVERITY_ORDER)
        .order_by(EventRow.run_id, EventRow.id)
    )
    for row in rows:
        found.setdefault(row.run_id, []).append(row)
    return found


def standing_events(*, session: Session, run_id: str, limit: int) -> Sequence[EventRow]:
    """A run's events that are not withdrawn, earliest stored first, at most `limit` (the latest
    steps kept when there are more): what its incidents are grouped from."""
    latest = (
        select(EventRow)
        .where(EventRow.run_id == run_id, EventRow.status != EventStatus.WITHDRAWN)
        .order_by(EventRow.start_step.desc().nulls_last(), EventRow.id.desc())
        .limit(limit)
    )
    return sorted(session.scalars(latest).all(), key=lambda row: row.id)


def run_events_for_findings(*, session: Session, run_id: str) -> Sequence[EventRow]:
    """The run's per-metric detector events (not findings, not lifecycle), for cross-signal rules."""
    return runs_events_for_findings(session=session, run_ids=[run_id])[run_id]


def runs_events_for_findings(*, session: Session, run_ids: Sequence[str]) -> dict[str, list[EventRow]]:
    """`run_events_for_findings` of many runs in one query (every run given is in the answer), each
    run's in the order they were stored."""
    out: dict[str, list[EventRow]] = {run_id: [] for run_id in run_ids}
    if run_ids:
        query = select(EventRow).where(
            EventRow.run_id.in_(list(run_ids)), EventRow.status != EventStatus.WITHDRAWN, *_CLASSIFIER_EVENTS
        )
        for row in session.scalars(query.order_by(EventRow.id)):
            out[row.run_id].append(row)
    return out


def finding_keys_of_runs(*, session: Session, run_ids: Sequence[str]) -> dict[str, set[str]]:
    """Keys of the cross-signal findings currently standing on each run, in one query (every run
    given is in the answer)."""
    out: dict[str, set[str]] = {run_id: set() for run_id in run_ids}
    if run_ids:
        for run_id, key in session.execute(
            select(EventRow.run_id, EventRow.event_key).where(
                EventRow.run_id.in_(list(run_ids)),
                EventRow.event_key.like(KeyPrefix.FINDING.like()),
                EventRow.status != EventStatus.WITHDRAWN,
            )
        ):
            out[run_id].add(key)
    return out


def record_status_event(*, session: Session, run_id: str, event: Event) -> EventRow:
    """A lifecycle change (stalled, resumed, crashed) as an event, so alert rules can use it:
    each change is its own event, keyed by when it happened."""
    row, _ = upsert_event(
        session=session,
        run_id=run_id,
        event_key=status_key(event.kind, now().isoformat()),
        event=event,
        detector_version="lifecycle",
    )
    return row


def standing_events_of_kind(*, session: Session, run_ids: Sequence[str], kind: str) -> Sequence[EventRow]:
    """The events of one kind on these runs that still stand (not withdrawn)."""
    if not run_ids:
        return []
    return session.scalars(
        select(EventRow).where(
            EventRow.run_id.in_(list(run_ids)), EventRow.kind == kind, EventRow.status != EventStatus.WITHDRAWN
        )
    ).all()


def set_event_text(*, session: Session, event: EventRow, summary: str, details: dict[str, Any]) -> None:
    """Rewrite what an event says (its summary and details) without touching its status or severity."""
    event.summary, event.details, event.updated_at = summary, details, now()
    session.flush()
