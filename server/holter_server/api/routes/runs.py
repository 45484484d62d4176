"""Runs: create or resume, heartbeat, finish, list, read."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query

from holter_server.api.deps import SessionDep
from holter_server.schemas.runs import RunCreate, RunCreated, RunFinish, RunPublic, RunsPublic
from holter_server.store import runs as runs_store
from holter_server.store.models import RunRow

router = APIRouter(prefix="/runs", tags=["runs"])


def require_run(session: SessionDep, run_id: str) -> RunRow:
    """The run, or a 404 that names it."""
    run = runs_store.get_run(session=session, run_id=run_id)
    if run is None:
        raise HTTPException(status_code=404, detail=f"unknown run {run_id!r}")
    return run


@router.post("", response_model=RunCreated, summary="Create a run, or resume it when its id exists")
def create_run(session: SessionDep, body: RunCreate) -> RunCreated:
    run_id = body.id or uuid.uuid4().hex[:16]
    existing = runs_store.get_run(session=session, run_id=run_id)
    if existing is not None and existing.project != body.project:
        raise HTTPException(status_code=409, detail=f"run {run_id!r} belongs to project {existing.project!r}, not {body.project!r}")
    run, resumed = runs_store.create_or_resume_run(
        session=session, run_id=run_id, project=body.project, name=body.name, config=body.config, tags=body.tags
    )
    session.commit()
    return RunCreated(**RunPublic.from_row(run).model_dump(), resumed=resumed)


@router.get("", response_model=RunsPublic, summary="List runs, newest first")
def list_runs(
    session: SessionDep,
    project: str | None = None,
    status: Literal["running", "finished", "crashed"] | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> RunsPublic:
    rows, count = runs_store.list_runs(session=session, project=project, status=status, limit=limit, offset=offset)
    return RunsPublic(data=[RunPublic.from_row(row) for row in rows], count=count)


@router.get("/{run_id}", response_model=RunPublic, summary="One run with its config, status and metric series")
def read_run(session: SessionDep, run_id: str) -> RunPublic:
    run = require_run(session, run_id)
    return RunPublic.from_row(run, list(runs_store.list_metrics(session=session, run_id=run_id)))


@router.post("/{run_id}/heartbeat", summary="The run is alive (sent by the client when it has nothing to log)")
def heartbeat(session: SessionDep, run_id: str) -> dict[str, str]:
    require_run(session, run_id)
    runs_store.record_activity(session=session, run_id=run_id, last_step=None)
    session.commit()
    return {"status": "ok"}


@router.post("/{run_id}/finish", response_model=RunPublic, summary="Mark the run finished or crashed")
def finish_run(session: SessionDep, run_id: str, body: RunFinish) -> RunPublic:
    run = runs_store.finish_run(session=session, run=require_run(session, run_id), status=body.status)
    session.commit()
    return RunPublic.from_row(run)
