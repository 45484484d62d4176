"""Events: list them (per run or project-wide), acknowledge, dismiss and mute."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query

from holter_server.api.deps import PrincipalDep, RowId, SessionDep
from holter_server.api.routes.runs import require_run
from holter_server.schemas import MAX_BIGINT
from holter_server.schemas.events import EventDecision, EventDismissal, EventPublic, EventsPublic
from holter_server.schemas.incidents import IncidentPublic, IncidentsPublic
from holter_server.services import events as events_service
from holter_server.services.events import StoredEvent
from holter_server.services.incidents import run_incidents
from holter_server.vocabulary.severities import Level
from holter_server.vocabulary.statuses import EventStatus

router = APIRouter(tags=["events"])
Limit = Annotated[int, Query(ge=1, le=1000)]
Offset = Annotated[int, Query(ge=0, le=MAX_BIGINT)]


@router.get("/runs/{run_id}/events", response_model=EventsPublic, summary="A run's events, latest step first")
def run_events(
    session: SessionDep,
    run_id: str,
    metric: str | None = None,
    kind: str | None = None,
    severity: Level | None = None,
    status: EventStatus | None = None,
    limit: Limit = 500,
    offset: Offset = 0,
) -> EventsPublic:
    require_run(session, run_id)
    rows, count = events_service.events_of_run(
        session=session,
        run_id=run_id,
        metric=metric,
        kind=kind,
        severity=severity,
        status=status,
        limit=limit,
        offset=offset,
    )
    return EventsPublic(data=[EventPublic.from_row(row) for row in rows], count=count)


@router.get(
    "/runs/{run_id}/incidents",
    response_model=IncidentsPublic,
    summary="A run's events grouped into incidents, one per problem, the worst first",
    description="Events that share a cause are one incident led by its root cause: a NaN tripwire's module "
    "with the divergences that follow from it, one episode's per-layer divergences, a bad batch seen in the "
    "loss and the gradient norm, a sawtooth with its teeth and the config key that explains its period. "
    "An event that shares no cause is an incident of its own.",
)
def run_incidents_list(session: SessionDep, run_id: str) -> IncidentsPublic:
    require_run(session, run_id)
    incidents = [IncidentPublic.from_stored(found) for found in run_incidents(session=session, run_id=run_id)]
    return IncidentsPublic(data=incidents, count=len(incidents), events=sum(1 + len(i.folded) for i in incidents))


@router.get(
    "/events",
    response_model=EventsPublic,
    summary="Events across runs (filter by project, run, kind, severity, status)",
)
def all_events(
    session: SessionDep,
    principal: PrincipalDep,
    project: str | None = None,
    run_id: str | None = None,
    kind: str | None = None,
    severity: Level | None = None,
    status: EventStatus | None = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> EventsPublic:
    rows, count = events_service.events_across_runs(
        session=session,
        project=project or principal.project,
        run_id=run_id,
        kind=kind,
        severity=severity,
        status=status,
        limit=limit,
        offset=offset,
    )
    return EventsPublic(data=[EventPublic.from_row(row) for row in rows], count=count)


def _require_event(session: SessionDep, run_id: str, event_id: RowId) -> StoredEvent:
    require_run(session, run_id)
    event = events_service.find_event(session=session, run_id=run_id, event_id=event_id)
    if event is None:
        raise HTTPException(status_code=404, detail=f"run {run_id!r} has no event {event_id}")
    return event


@router.post(
    "/runs/{run_id}/events/{event_id}/acknowledge",
    response_model=EventPublic,
    summary="Someone has seen it and is on it",
)
def acknowledge(
    session: SessionDep, principal: PrincipalDep, run_id: str, event_id: RowId, body: EventDecision
) -> EventPublic:
    event = events_service.acknowledge(
        session=session,
        event=_require_event(session, run_id, event_id),
        by=principal.name,  # signed by the key, not by what the body claims
        reason=body.reason,
    )
    session.commit()
    return EventPublic.from_row(event)


@router.post(
    "/runs/{run_id}/events/{event_id}/dismiss",
    response_model=EventPublic,
    summary="Not a problem; optionally mute its kind on its metric",
)
def dismiss(
    session: SessionDep, principal: PrincipalDep, run_id: str, event_id: RowId, body: EventDismissal
) -> EventPublic:
    event = _require_event(session, run_id, event_id)
    if body.mute and event.metric is None:
        raise HTTPException(status_code=422, detail="run-level events have no metric to mute")
    event = events_service.dismiss(session=session, event=event, by=principal.name, reason=body.reason, mute=body.mute)
    session.commit()
    return EventPublic.from_row(event)
