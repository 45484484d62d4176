"""Post-mortem review: the lever finder, reference runs and comparison against them."""

from __future__ import annotations

from typing import Annotated

import numpy as np
from fastapi import APIRouter, HTTPException, Query, Response
from fastapi.responses import HTMLResponse

from holter_server.api.deps import PrincipalDep, SessionDep, SettingsDep
from holter_server.api.routes.runs import require_run
from holter_server.nonfinite import json_safe_column
from holter_server.postmortem.levers import TooManyPairsError
from holter_server.schemas.annotations import AnnotationPublic
from holter_server.schemas.events import EventPublic
from holter_server.schemas.postmortem import (
    ComparisonPublic,
    DriftPublic,
    LeversPublic,
    PostMortemPublic,
    ReferencePublic,
    ReferenceSet,
)
from holter_server.schemas.runs import RunPublic
from holter_server.services import annotations as notes
from holter_server.services import kinds, levers, postmortem, reference_drift, references
from holter_server.services import runs as runs_service

router = APIRouter(tags=["post-mortem"])


@router.get(
    "/levers",
    response_model=LeversPublic,
    summary="Config parameters that change the structure of a failure across runs",
)
def find_levers(
    session: SessionDep,
    settings: SettingsDep,
    principal: PrincipalDep,
    project: str | None = None,
    tag: str | None = None,
    run_id: Annotated[list[str] | None, Query(description="a selection of runs (repeat the parameter)")] = None,
) -> LeversPublic:
    if not (project or tag or run_id):
        raise HTTPException(status_code=422, detail="name the runs: project, tag, or run_id (repeatable)")
    try:
        report = levers.levers(
            session=session,
            project=project or principal.project,
            tag=tag,
            run_ids=run_id,
            max_pairs=settings.max_lever_pairs,
            max_seconds=settings.max_lever_seconds,
            max_keys=settings.max_lever_keys,
            max_config_bytes=settings.max_lever_config_bytes,
        )
    except TooManyPairsError as exc:
        raise HTTPException(status_code=413, detail=str(exc)) from exc
    return LeversPublic.from_report(report)


@router.put(
    "/projects/{project}/reference",
    response_model=ReferencePublic,
    summary="Make a run the reference of its project (or of a tag)",
)
def set_reference(session: SessionDep, principal: PrincipalDep, project: str, body: ReferenceSet) -> ReferencePublic:
    run = require_run(session, body.run_id)
    if run.project != project:
        raise HTTPException(status_code=422, detail=f"run {run.id!r} is not in project {project!r}")
    row = references.set_reference(session=session, project=project, tag=body.tag, run=run, by=principal.name)
    session.commit()
    return ReferencePublic(
        project=row.project, tag=row.tag or None, run_id=row.run_id, set_by=row.set_by, created_at=row.created_at
    )


@router.get(
    "/projects/{project}/references", response_model=list[ReferencePublic], summary="The project's reference runs"
)
def list_references(session: SessionDep, project: str) -> list[ReferencePublic]:
    return [
        ReferencePublic(project=r.project, tag=r.tag or None, run_id=r.run_id, set_by=r.set_by, created_at=r.created_at)
        for r in references.references_of_project(session=session, project=project)
    ]


@router.delete("/projects/{project}/reference", status_code=204, summary="Remove the project's (or a tag's) reference")
def remove_reference(session: SessionDep, project: str, tag: str | None = None) -> Response:
    if not references.remove_reference(session=session, project=project, tag=tag):
        raise HTTPException(
            status_code=404, detail=f"project {project!r} has no reference{f' for tag {tag!r}' if tag else ''}"
        )
    session.commit()
    return Response(status_code=204)


@router.get(
    "/runs/{run_id}/compare", response_model=ComparisonPublic, summary="A metric of a run against its reference run"
)
def compare_run(
    session: SessionDep, settings: SettingsDep, run_id: str, metric: str, reference: str | None = None
) -> ComparisonPublic:
    run = require_run(session, run_id)
    reference_id = reference or references.reference_of_run(session=session, run=run)
    if reference_id is None:
        raise HTTPException(status_code=404, detail=f"run {run_id!r} has no reference run; set one or pass ?reference=")
    require_run(session, reference_id)
    try:
        found = reference_drift.compare(
            session=session,
            run_id=run_id,
            reference_id=reference_id,
            metric=metric,
            max_points=settings.max_compare_points,
        )
    except reference_drift.CompareTooLargeError as exc:
        raise HTTPException(status_code=413, detail=str(exc)) from exc
    if found is None:
        raise HTTPException(status_code=404, detail=f"{metric!r} is not logged by both {run_id!r} and {reference_id!r}")
    b = found.band
    values = (
        np.interp(b.steps, np.asarray(found.run_steps), np.asarray(found.run_values)).tolist() if len(b.steps) else []
    )
    return ComparisonPublic(
        run_id=run_id,
        reference_id=reference_id,
        metric=metric,
        steps=b.steps.tolist(),
        values=json_safe_column(values),
        reference=b.reference.tolist(),
        low=b.low.tolist(),
        high=b.high.tolist(),
        drifts=[
            DriftPublic(
                start_step=d.start_step,
                end_step=d.end_step,
                mean_gap=d.mean_gap,
                direction=d.direction,
                points=d.points,
            )
            for d in found.drifts
        ],
    )


@router.get(
    "/runs/{run_id}/postmortem",
    response_model=PostMortemPublic,
    summary="The run's timeline, written summary and notes",
)
def read_postmortem(session: SessionDep, settings: SettingsDep, run_id: str) -> PostMortemPublic:
    run = require_run(session, run_id)
    events = postmortem.timeline(session=session, run_id=run_id)
    health = runs_service.health_of_runs(session=session, run_ids=[run_id])[run_id]
    return PostMortemPublic(
        run=RunPublic.from_row(
            run,
            runs_service.metrics_of_run(session=session, run_id=run_id),
            health=health,
            understood=kinds.understood_metrics(session=session, run=run),
        ),
        summary=postmortem.summary_of(
            session=session, run=run, events=events, max_group_points=settings.max_group_points
        ),
        timeline=[EventPublic.from_row(e) for e in events],
        annotations=[AnnotationPublic.from_row(a) for a in notes.notes_of_run(session=session, run_id=run_id)],
    )


@router.get(
    "/runs/{run_id}/report.html", response_class=HTMLResponse, summary="A self-contained HTML report (opens offline)"
)
def download_report(session: SessionDep, settings: SettingsDep, run_id: str) -> HTMLResponse:
    run = require_run(session, run_id)
    try:
        html = postmortem.report_html(
            session=session, run=run, max_events=settings.max_report_events, max_group_points=settings.max_group_points
        )
    except ModuleNotFoundError as exc:
        raise HTTPException(
            status_code=501, detail=f"reports need plotly: pip install 'holter[dashboard]' ({exc.name} missing)"
        ) from exc
    filename = f"holter-{run.id}.html"
    return HTMLResponse(html, headers={"Content-Disposition": f'attachment; filename="{filename}"'})
