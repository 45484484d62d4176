"""Run lifecycle: running, finished, crashed, stalled — and each change recorded as an event
so that alert rules can use it."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from holter_server.detect.events import Event
from holter_server.services.alerting import alert_on_event
from holter_server.store import events as events_store
from holter_server.store import runs as runs_store
from holter_server.store.models import EventRow, RunRow
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.severities import Level
from holter_server.vocabulary.statuses import RunStatus


def _ago(delta: timedelta) -> str:
    minutes = delta.total_seconds() / 60
    return f"{minutes:.0f} min" if minutes >= 1 else f"{delta.total_seconds():.0f} s"


def _status_event(kind: str, severity: str, *, step: int | None, summary: str) -> Event:
    """A change of the run's status as an event of the whole run, at its last known step."""
    return Event(kind=kind, metric=None, start_step=step, end_step=step, severity=severity, score=0.0, summary=summary)


def _announce(session: Session, event: EventRow) -> None:
    alert_on_event(session=session, event=event, previous_severity=None)


def record_activity(*, session: Session, run_id: str, last_step: int | None, status: str | None = None) -> None:
    """Points or a heartbeat arrived: the run is alive; a stalled run is running again.

    `status`: the run's status as the caller just read it; the run is read again only when it
    was stalled (a batch of a live run then costs one UPDATE)."""
    if status is not None and status != RunStatus.STALLED:
        runs_store.record_activity(session=session, run_id=run_id, last_step=last_step)
        return
    run = runs_store.get_run(session=session, run_id=run_id)
    if run is not None and run.status == RunStatus.STALLED:
        silence = runs_store.now() - run.heartbeat_at
        runs_store.set_status(session=session, run=run, status=RunStatus.RUNNING)
        _announce(
            session,
            events_store.record_status_event(
                session=session,
                run_id=run_id,
                event=_status_event(
                    EventKind.RUN_RESUMED,
                    Level.INFO,
                    step=last_step or run.last_step,
                    summary=f"run {run.name or run_id} resumed after {_ago(silence)} without points or heartbeat",
                ),
            ),
        )
    runs_store.record_activity(session=session, run_id=run_id, last_step=last_step)


def finish(*, session: Session, run: RunRow, status: str, reason: str | None = None) -> RunRow:
    """The client ended the run; a crash becomes an event, saying why when the client said
    (`reason`: its exception, and which rank). The comparison of its losses with its reference
    becomes due: the reference-drift loop makes it (it reads every point of both runs)."""
    runs_store.finish_run(session=session, run=run, status=status)
    if status == RunStatus.CRASHED:
        _announce(
            session,
            events_store.record_status_event(
                session=session,
                run_id=run.id,
                event=_status_event(
                    EventKind.RUN_CRASHED,
                    Level.CRITICAL,
                    step=run.last_step,
                    summary=f"run {run.name or run.id} crashed at step "
                    f"{run.last_step if run.last_step is not None else '?'} "
                    + (f"({reason})" if reason else "(reported by the client)"),
                ),
            ),
        )
    return run


def mark_stalled(*, session: Session, stall_after: timedelta) -> list[str]:
    """Running runs silent for longer than `stall_after` become stalled; returns their ids."""
    silent = runs_store.stall_silent_runs(session=session, silent_since=runs_store.now() - stall_after)
    for run in silent:
        last = f" at step {run.last_step:,}" if run.last_step is not None else ""
        _announce(
            session,
            events_store.record_status_event(
                session=session,
                run_id=run.id,
                event=_status_event(
                    EventKind.RUN_STALLED,
                    Level.WARNING,
                    step=run.last_step,
                    summary=f"run {run.name or run.id} stalled{last}: no points or heartbeat for "
                    f"{_ago(runs_store.now() - run.heartbeat_at)}",
                ),
            ),
        )
    return [run.id for run in silent]
