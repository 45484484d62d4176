"""Events, mutes and live-detection state. All SQL about them lives here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, Select, and_, bindparam, case, func, literal, select, tuple_, update
from sqlalchemy.orm import Session

from holter_server.detect.events import Event
from holter_server.nonfinite import json_safe_tree
from holter_server.store import claims
from holter_server.store.backends import backend_for
from holter_server.store.database import insert_ignoring_conflicts, next_id
from holter_server.store.models import DetectorStateRow, EventRow, MetricRow, MuteRow, RunRow, UTCDateTime
from holter_server.store.runs import now
from holter_server.vocabulary.severities import HEALTHY, SEVERITIES

# The worst open event names a run's health: severities ordered by the vocabulary's rank (0: none).
SEVERITY_ORDER = case({s.name: s.rank + 1 for s in SEVERITIES}, value=EventRow.severity, else_=0)
HEALTH_BY_ORDER = {0: HEALTHY, **{s.rank + 1: s.name for s in SEVERITIES}}


# The classifier's own events on one metric, by their keys: not findings, lifecycle or thresholds.
_CLASSIFIER_EVENTS = (
    EventRow.event_key.not_like("finding:%"),
    EventRow.event_key.not_like("status:%"),
    EventRow.event_key.not_like("threshold:%"),
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


@dataclass
class DetectionWork:
    """One metric with points the live detector has not seen yet."""

    run_id: str
    metric_id: int
    metric: str
    detected_step: int
    state: dict[str, Any] | None
    detector_version: str | None
    last_step: int | None = None  # the metric's newest stored step when claimed


# DetectionProgress.state meaning "leave the saved state as it is"
KEEP_STATE: dict[str, Any] = {"keep": True}


@dataclass(frozen=True)
class DetectionProgress:
    """Where live detection of one metric got to, to be saved (`state` KEEP_STATE: only the step)."""

    run_id: str
    metric_id: int
    detected_step: int
    state: dict[str, Any] | None
    detector_version: str


NEVER_READ = datetime(1970, 1, 1, tzinfo=UTC)  # the progress time of a metric detection has not read yet


# Runs with batches stored that detection has not settled (store/models/runs.py). With a lab's
# history of finished runs in the database, detection's statements look at these runs' metrics
# only: their ids are read first and passed on, since no planner can tell from its statistics
# how few rows a comparison of two columns keeps (it guessed a third, and joined every metric).
_RUNS = RunRow.__table__
_STATES = DetectorStateRow.__table__
_DUE = _RUNS.c.stored_batches > _RUNS.c.detected_batches
# The most due runs one statement names; past it (only when that many runs have unread points at
# once) each pass takes a random share, so none waits for ever.
MAX_DUE_RUNS = 5_000


def _due_runs(session: Session) -> list[tuple[str, int]]:
    """(id, stored batches) of runs due for detection."""
    query = select(_RUNS.c.id, _RUNS.c.stored_batches).where(_DUE)
    due = session.execute(query.limit(MAX_DUE_RUNS + 1)).all()
    if len(due) > MAX_DUE_RUNS:
        due = session.execute(query.order_by(func.random()).limit(MAX_DUE_RUNS)).all()
    return [(run_id, stored) for run_id, stored in due]


def settle_detected_runs(*, session: Session) -> list[str]:
    """Mark the due runs whose every metric detection has read as settled; returns the runs
    still due (with points detection has not read), for the pass's claims.

    The runs' batch counts are read before their metrics: a batch counted by then has its points
    in sight of the second read (its metrics' steps and its count commit together), and one
    stored after counts again, so its run is due again. The update only ever raises the settled
    count (several processes may settle at once).
    """
    due = _due_runs(session)
    if not due:
        return []
    metrics = MetricRow.__table__
    ids = [run_id for run_id, _ in due]
    unread = set(
        session.scalars(  # (the runs named on both tables: each then read by its key)
            select(metrics.c.run_id)
            .distinct()
            .select_from(
                metrics.outerjoin(
                    _STATES,
                    and_(
                        _STATES.c.run_id == metrics.c.run_id,
                        _STATES.c.metric_id == metrics.c.metric_id,
                        _STATES.c.run_id.in_(ids),
                    ),
                )
            )
            .where(metrics.c.run_id.in_(ids), metrics.c.last_step > func.coalesce(_STATES.c.detected_step, -1))
        )
    )
    read = [{"run": run_id, "seen": seen} for run_id, seen in due if run_id not in unread]
    if read:
        session.execute(
            update(_RUNS)
            .where(_RUNS.c.id == bindparam("run"), _RUNS.c.detected_batches < bindparam("seen"))
            .values(detected_batches=bindparam("seen")),
            read,
        )
    return [run_id for run_id, _ in due if run_id in unread]


def claim_detection_work(
    *, session: Session, limit: int, not_since: datetime | None = None, among_runs: Sequence[str] | None = None
) -> list[DetectionWork]:
    """Metrics whose newest step is past what detection has seen, taken from every run with
    such metrics in turn, of runs this transaction holds for detection (`claims.claim_runs`).

    Several service processes share the work without doing any of it twice: each holds the runs
    it works on until it commits, and reads the metrics' progress only once it holds their runs
    (what another process committed meanwhile is then in view). No row is locked across runs,
    which a distributed table would refuse. `not_since`: leave out metrics whose progress was
    saved at or after that moment (already read in this pass). `among_runs`: the runs due, as
    `settle_detected_runs` returned them this pass (read here when not given).
    """
    due = list(among_runs) if among_runs is not None else [run_id for run_id, _ in _due_runs(session)]
    if not due:
        return []
    missing = (  # never read: first in the queue, and in this pass whenever it began
        select(MetricRow.run_id, MetricRow.metric_id, literal(-1, BigInteger()), literal(NEVER_READ, UTCDateTime()))
        .outerjoin(
            DetectorStateRow,
            and_(DetectorStateRow.run_id == MetricRow.run_id, DetectorStateRow.metric_id == MetricRow.metric_id),
        )
        .where(MetricRow.run_id.in_(due), DetectorStateRow.run_id.is_(None))
    )
    session.execute(
        insert_ignoring_conflicts(session, DetectorStateRow).from_select(
            ["run_id", "metric_id", "detected_step", "updated_at"], missing
        )
    )
    held_elsewhere: list[str] = []
    for _ in range(3):  # a few tries past runs other processes hold, then what is left waits a pass
        candidates = session.execute(
            _pending_work(limit=limit, runs=due, skip_runs=held_elsewhere, not_since=not_since)
        ).all()
        wanted = list(dict.fromkeys(row.run_id for row in candidates))
        held = claims.claim_runs(session=session, task=claims.Task.DETECTION, run_ids=wanted)
        if held:
            rows = session.execute(_pending_work(limit=limit, runs=held, not_since=not_since)).all()
            # the saved states (tens of kB each) are read only where the caller has no detector at hand
            return [
                DetectionWork(
                    run_id=row.run_id,
                    metric_id=row.metric_id,
                    metric=row.name,
                    detected_step=row.detected_step,
                    state=None,
                    detector_version=row.detector_version,
                    last_step=row.last_step,
                )
                for row in rows
            ]
        if len(wanted) == 0:
            return []
        held_elsewhere.extend(wanted)
    return []


def _pending_work(
    *, limit: int, runs: Sequence[str], skip_runs: Sequence[str] = (), not_since: datetime | None = None
) -> Select[Any]:
    """Metrics with points detection has not read, in round-robin order over runs: each run's
    longest-waiting metric first, then each run's second, ... (ordering by waiting time alone let
    one run with thousands of new metrics hold every other run's live detection back for minutes)."""
    turn = (
        func.row_number().over(partition_by=DetectorStateRow.run_id, order_by=DetectorStateRow.updated_at).label("turn")
    )
    query = (
        select(
            DetectorStateRow.run_id,
            DetectorStateRow.metric_id,
            DetectorStateRow.detected_step,
            DetectorStateRow.detector_version,
            DetectorStateRow.updated_at,
            MetricRow.name,
            MetricRow.last_step,
            turn,
        )
        .join(
            MetricRow,
            and_(MetricRow.run_id == DetectorStateRow.run_id, MetricRow.metric_id == DetectorStateRow.metric_id),
        )
        .where(MetricRow.last_step > DetectorStateRow.detected_step)
    )
    # the runs named on both tables: the planner then reads each by its key, not every metric
    query = query.where(DetectorStateRow.run_id.in_(list(runs)), MetricRow.run_id.in_(list(runs)))
    if skip_runs:
        query = query.where(DetectorStateRow.run_id.not_in(list(skip_runs)))
    if not_since is not None:
        query = query.where(DetectorStateRow.updated_at < not_since)
    ranked = query.subquery()
    return select(ranked).order_by(ranked.c.turn, ranked.c.updated_at).limit(limit)


def lock_detection_rows(*, session: Session, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Hold the runs of these (run, metric id) pairs for detection in this transaction, skipping
    runs another process holds; returns the detected_step of each pair whose run is held."""
    by_run: dict[str, list[int]] = {}
    for run_id, metric_id in keys:
        by_run.setdefault(run_id, []).append(metric_id)
    held = claims.claim_runs(session=session, task=claims.Task.DETECTION, run_ids=sorted(by_run))
    out: dict[tuple[str, int], int] = {}
    for run_id in held:
        rows = session.execute(
            select(DetectorStateRow.metric_id, DetectorStateRow.detected_step).where(
                DetectorStateRow.run_id == run_id, DetectorStateRow.metric_id.in_(by_run[run_id])
            )
        )
        out.update(((run_id, metric_id), step) for metric_id, step in rows)
    return out


# Built once and sent as plain executemany (pipelined on Postgres): a pass saves the progress of
# every metric it read, and the ORM's bulk update by primary key cost more than the statements.
_SAVE_PROGRESS = (
    update(_STATES)
    .where(_STATES.c.run_id == bindparam("key_run"), _STATES.c.metric_id == bindparam("key_metric"))
    .values(detected_step=bindparam("step"), updated_at=bindparam("moment"))
)
_SAVE_STATE = _SAVE_PROGRESS.values(
    state=bindparam("state", type_=_STATES.c.state.type), detector_version=bindparam("version")
)


def save_detection_states(*, session: Session, progress: Sequence[DetectionProgress]) -> None:
    """Record how far detection got on many metrics: one statement for those whose state is
    saved, one for the rest (each sent as one pipelined batch on Postgres)."""
    if not progress:
        return
    moment = now()
    with_state = [
        {
            "key_run": p.run_id,
            "key_metric": p.metric_id,
            "step": p.detected_step,
            "moment": moment,
            "state": p.state,
            "version": p.detector_version,
        }
        for p in progress
        if p.state is not KEEP_STATE
    ]
    steps_only = [
        {"key_run": p.run_id, "key_metric": p.metric_id, "step": p.detected_step, "moment": moment}
        for p in progress
        if p.state is KEEP_STATE
    ]
    if with_state:
        session.execute(_SAVE_STATE, with_state)
    if steps_only:
        session.execute(_SAVE_PROGRESS, steps_only)


def mark_detection_read(*, session: Session, keys: Sequence[tuple[str, int]]) -> None:
    """Record that these (run, metric id) pairs were read just now without progress (their new
    points wait for their detector): the queue takes them last, and not again in this pass."""
    if keys and not backend_for(session).touch_detection_rows(session, keys, now()):
        session.execute(
            update(_STATES)
            .where(tuple_(_STATES.c.run_id, _STATES.c.metric_id).in_(list(keys)))
            .values(updated_at=now())
        )


def reset_detection(*, session: Session, run_id: str, metric_ids: Sequence[int]) -> None:
    """Make live detection read these metrics again from their first point with fresh detectors
    (once no process is detecting on the run, so that none writes its progress over this)."""
    if metric_ids:
        claims.wait_for_run(session=session, task=claims.Task.DETECTION, run_id=run_id)
        session.execute(
            update(DetectorStateRow)
            .where(DetectorStateRow.run_id == run_id, DetectorStateRow.metric_id.in_(list(metric_ids)))
            .values(detected_step=-1, state=None, updated_at=now())
        )
        # due again, with no batch stored: a pass looks at the run's metrics once more
        session.execute(update(RunRow).where(RunRow.id == run_id).values(stored_batches=RunRow.stored_batches + 1))


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
                EventRow.status == "open",
                *_CLASSIFIER_EVENTS,
                EventRow.event_key.not_like("reference:%"),
                EventRow.event_key.not_like("tripwire:%"),
            )
            .values(status="withdrawn", updated_at=now())
        )


def detection_states(*, session: Session, run_id: str, metric_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The saved live-detector states of these metrics of a run (metric id → state), for the
    run-level rules that read series together; metrics without a saved state are left out."""
    rows = session.execute(
        select(DetectorStateRow.metric_id, DetectorStateRow.state).where(
            DetectorStateRow.run_id == run_id, DetectorStateRow.metric_id.in_(list(metric_ids))
        )
    ).all()
    return {metric_id: state for metric_id, state in rows if state}


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
            status="muted" if muted else "open",
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
    if row.status == "withdrawn":
        row.status = "muted" if muted else "open"
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
            status="muted" if muted else "open",
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
        else query.where(EventRow.status != "withdrawn")
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
        EventRow.run_id.in_(list(run_ids)), EventRow.metric.is_not(None), EventRow.status != "withdrawn"
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
        .where(EventRow.run_id.in_(run_ids), EventRow.status == "open")
        .group_by(EventRow.run_id)
    )
    found = {run_id: (HEALTH_BY_ORDER[worst or 0], count) for run_id, worst, count in rows}
    return {run_id: found.get(run_id, (HEALTHY, 0)) for run_id in run_ids}


def standing_events(*, session: Session, run_id: str, limit: int) -> Sequence[EventRow]:
    """A run's events that are not withdrawn, earliest stored first, at most `limit` (the latest
    steps kept when there are more): what its incidents are grouped from."""
    latest = (
        select(EventRow)
        .where(EventRow.run_id == run_id, EventRow.status != "withdrawn")
        .order_by(EventRow.start_step.desc().nulls_last(), EventRow.id.desc())
        .limit(limit)
    )
    return sorted(session.scalars(latest).all(), key=lambda row: row.id)


def run_events_for_findings(*, session: Session, run_id: str) -> Sequence[EventRow]:
    """The run's per-metric detector events (not findings, not lifecycle), for cross-signal rules."""
    return session.scalars(
        select(EventRow).where(EventRow.run_id == run_id, EventRow.status != "withdrawn", *_CLASSIFIER_EVENTS)
    ).all()


def finding_keys(*, session: Session, run_id: str) -> set[str]:
    """Keys of the cross-signal findings currently standing on a run."""
    return set(
        session.scalars(
            select(EventRow.event_key).where(
                EventRow.run_id == run_id, EventRow.event_key.like("finding:%"), EventRow.status != "withdrawn"
            )
        )
    )


def record_status_event(*, session: Session, run_id: str, event: Event) -> EventRow:
    """A lifecycle change (stalled, resumed, crashed) as an event, so alert rules can use it:
    each change is its own event, keyed by when it happened."""
    row, _ = upsert_event(
        session=session,
        run_id=run_id,
        event_key=f"status:{event.kind}@{now().isoformat()}",
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
            EventRow.run_id.in_(list(run_ids)), EventRow.kind == kind, EventRow.status != "withdrawn"
        )
    ).all()


def set_event_text(*, session: Session, event: EventRow, summary: str, details: dict[str, Any]) -> None:
    """Rewrite what an event says (its summary and details) without touching its status or severity."""
    event.summary, event.details, event.updated_at = summary, details, now()
    session.flush()
