"""Runs: create or resume, heartbeat, finish, update, list, read, analyze, archive, delete."""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query

from holter_server.api.deps import PrincipalDep, SessionDep, SettingsDep
from holter_server.api.gate import unknown
from holter_server.schemas import MAX_BIGINT
from holter_server.schemas.events import AnalyzedSeries, RunAnalysis
from holter_server.schemas.runs import (
    MAX_TAGS,
    MetricColumnPublic,
    MetricPublic,
    MetricUpdate,
    RunCreate,
    RunCreated,
    RunDeleted,
    RunFinish,
    RunPublic,
    RunsPublic,
    RunUpdate,
    SparklinePublic,
)
from holter_server.schemas.vocabulary import MetricName
from holter_server.services import incidents as incidents_service
from holter_server.services import kinds, lifecycle, retention, run_table
from holter_server.services import ranks as ranks_service
from holter_server.services import runs as runs_service
from holter_server.services.run_analysis import AnalysisTooLargeError, UnknownMetricError, analyze_run
from holter_server.services.runs import StoredRun
from holter_server.vocabulary.statuses import RunStatus

router = APIRouter(prefix="/runs", tags=["runs"])


def require_run(session: SessionDep, run_id: str) -> StoredRun:
    """The run, or a 404 that names it."""
    run = runs_service.find_run(session=session, run_id=run_id)
    if run is None:
        raise HTTPException(status_code=404, detail=unknown("run", run_id))
    return run


@router.post("", response_model=RunCreated, summary="Create a run, or resume it when its id exists")
def create_run(session: SessionDep, settings: SettingsDep, principal: PrincipalDep, body: RunCreate) -> RunCreated:
    config_size = len(json.dumps(body.config))
    if config_size > settings.max_config_bytes:
        raise HTTPException(
            status_code=413, detail=f"config of {config_size} bytes exceeds the limit of {settings.max_config_bytes}"
        )
    if not principal.sees(body.project):
        raise HTTPException(
            status_code=403, detail=f"this key is for project {principal.project!r}, not {body.project!r}"
        )
    run_id = body.id or uuid.uuid4().hex[:16]
    # never the other project's name: the caller may not be allowed to know it
    taken = HTTPException(
        status_code=409, detail=f"run id {run_id!r} is already taken by another project; choose another id"
    )
    existing = runs_service.find_run(session=session, run_id=run_id)
    if existing is not None and existing.project != body.project:
        raise taken
    if existing is None and (gone := runs_service.deleted_at(session=session, run_id=run_id, project=body.project)):
        # a job still writing a run someone deleted re-registers it after a 404: it stays deleted
        raise HTTPException(
            status_code=410,
            detail=f"run {run_id!r} was deleted at {gone.isoformat(timespec='seconds')}; start a new run (another id)",
        )
    if existing is not None and body.definitions():
        kinds.hold_for_declaring(session=session, run_id=run_id)  # before the run's row (see there)
    # a rank of a job joining for the first time does not reopen a run another rank ended; a rank
    # joining again (restarted) does, as a restarted run's registration does
    fresh_rank = body.rank is not None and not ranks_service.has_joined(
        session=session, run_id=run_id, rank=body.rank.rank
    )
    try:
        run, resumed = runs_service.create_or_resume_run(
            session=session,
            run_id=run_id,
            project=body.project,
            name=body.name,
            config=body.config,
            tags=body.tags,
            max_config_bytes=settings.max_config_bytes,
            max_tags=MAX_TAGS,
            reopen=not fresh_rank,
        )
    except runs_service.RunIdTakenError:
        raise taken from None
    except runs_service.MergeTooLargeError as exc:
        raise HTTPException(status_code=413 if exc.what == "config" else 422, detail=str(exc)) from exc
    if body.provenance is not None:
        runs_service.set_provenance(session=session, run=run, provenance=body.provenance.model_dump(exclude_unset=True))
    kinds.declare(session=session, run=run, definitions=body.definitions())
    if body.notes is not None:
        runs_service.update_run(session=session, run=run, tags=None, notes=body.notes)
    answer = RunPublic.from_row(run).model_dump()
    if body.rank is not None:
        # a rank of a distributed job joins the one run: it resumes only its own part (a restart),
        # and continues from its own step, never from the other ranks'
        row, rejoined = ranks_service.join(session=session, run=run, joined=body.rank)
        if body.rank.rank != 0:
            resumed = rejoined
            answer["last_step"] = row.step - 1 if rejoined and row.step else None
    session.commit()
    return RunCreated(**answer, resumed=resumed)


@router.get("", response_model=RunsPublic, summary="List runs, newest first, with their health")
def list_runs(
    session: SessionDep,
    principal: PrincipalDep,
    project: str | None = None,
    status: RunStatus | None = None,
    tag: str | None = None,
    archived: Annotated[
        Literal["exclude", "include", "only"],
        Query(description="archived runs: left out (default), with the rest, or alone"),
    ] = "exclude",
    metric: Annotated[
        list[str] | None, Query(max_length=20, description="metrics to show the last and best value of, per run")
    ] = None,
    sparkline_kind: Annotated[
        str | None, Query(description="a kind (loss): each run's first metric of it, as a sparkline")
    ] = None,
    names: Annotated[bool, Query(description="list the metric names of the runs on this page")] = False,
    q: Annotated[
        str | None,
        Query(
            max_length=1000,
            description="search every run of the project: each word found in its id, name, project, tags or config "
            "(any case); a `key=value` word matches a config value (`optimizer.lr=3e-4` finds 0.0003)",
        ),
    ] = None,
    config: Annotated[
        str | None,
        Query(max_length=1000, description="`key=value` (dotted key), or a key the run's config must have"),
    ] = None,
    config_keys: Annotated[
        list[str] | None,
        Query(
            max_length=20,
            description="show only these dotted config keys of each run's config (empty: no config), so that a page "
            "of runs with big configs stays small",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_BIGINT)] = 0,
) -> RunsPublic:
    shown_keys = None if config_keys is None else [key for key in config_keys if key]
    if any(len(key) > runs_service.MAX_CONFIG_KEY_LENGTH for key in shown_keys or ()):
        raise HTTPException(422, f"config_keys: a key is at most {runs_service.MAX_CONFIG_KEY_LENGTH} characters")
    rows, count, configs = runs_service.list_runs(
        session=session,
        project=project or principal.project,
        status=status,
        tag=tag,
        archived=archived,
        limit=limit,
        offset=offset,
        search=q,
        config=config,
        config_keys=shown_keys,
    )
    health = runs_service.health_of_runs(session=session, run_ids=[row.id for row in rows])
    problems = incidents_service.problems_of_runs(session=session, run_ids=[row.id for row in rows])
    page = [
        RunPublic.from_row(
            row, health=health[row.id], problems=problems[row.id], config=None if configs is None else configs[row.id]
        )
        for row in rows
    ]
    if metric or sparkline_kind:
        columns, sparklines = run_table.table_columns(
            session=session, runs=rows, metrics=metric or [], sparkline_kind=sparkline_kind
        )
        for run in page:
            run.columns = {name: MetricColumnPublic(**vars(c)) for name, c in columns.get(run.id, {}).items()}
            run.sparkline = SparklinePublic(**sparklines[run.id]) if run.id in sparklines else None  # type: ignore[arg-type]
    metric_names = None
    if names:
        listed = runs_service.metric_names_of_runs(session=session, run_ids=[row.id for row in rows])
        metric_names = sorted({name for names_ in listed.values() for name in names_})
    return RunsPublic(data=page, count=count, metric_names=metric_names)


@router.get("/{run_id}", response_model=RunPublic, summary="One run with its config, status, health and metric series")
def read_run(session: SessionDep, run_id: str) -> RunPublic:
    run = require_run(session, run_id)
    health = runs_service.health_of_runs(session=session, run_ids=[run_id])[run_id]
    problems = incidents_service.problems_of_runs(session=session, run_ids=[run_id])[run_id]
    return RunPublic.from_row(
        run,
        runs_service.metrics_of_run(session=session, run_id=run_id),
        health=health,
        problems=problems,
        understood=kinds.understood_metrics(session=session, run=run),
        job=ranks_service.job_of(session=session, run_id=run_id),
    )


@router.patch(
    "/{run_id}/metrics/{metric:path}",
    response_model=MetricPublic,
    summary="Say what a metric is (its kind; null: as its name says); it is analysed again from its first point",
)
def update_metric(session: SessionDep, run_id: str, metric: str, body: MetricUpdate) -> MetricPublic:
    run = require_run(session, run_id)
    row = runs_service.find_metric(session=session, run_id=run_id, name=metric)
    if row is None:
        raise HTTPException(status_code=404, detail=f"run {run_id!r} has no metric {metric!r}")
    kinds.declare(session=session, run=run, definitions={metric: body.declared()})
    session.commit()
    understood = kinds.understood_metrics(session=session, run=run)
    return MetricPublic.from_row(row, understood[metric], (run.metric_definitions or {}).get(metric))


@router.patch("/{run_id}", response_model=RunPublic, summary="Change a run's tags or notes")
def update_run(session: SessionDep, run_id: str, body: RunUpdate) -> RunPublic:
    run = runs_service.update_run(session=session, run=require_run(session, run_id), tags=body.tags, notes=body.notes)
    session.commit()
    return RunPublic.from_row(run)


@router.post("/{run_id}/heartbeat", summary="The run is alive (sent by the client when it has nothing to log)")
def heartbeat(session: SessionDep, run_id: str) -> dict[str, str]:
    require_run(session, run_id)
    lifecycle.record_activity(session=session, run_id=run_id, last_step=None)
    session.commit()
    return {"status": "ok"}


@router.post("/{run_id}/finish", response_model=RunPublic, summary="Mark the run finished or crashed")
def finish_run(session: SessionDep, run_id: str, body: RunFinish) -> RunPublic:
    run = require_run(session, run_id)
    if body.rank is None:
        run = ranks_service.end_run(session=session, run=run, status=body.status, reason=body.reason)
    else:
        run = ranks_service.end_rank(session=session, run=run, rank=body.rank, status=body.status, reason=body.reason)
    session.commit()
    return RunPublic.from_row(run)


@router.post(
    "/{run_id}/analyze", response_model=RunAnalysis, summary="Re-run the batch classifier over every stored point"
)
def analyze(
    session: SessionDep,
    settings: SettingsDep,
    run_id: str,
    metric: Annotated[
        list[MetricName] | None,  # type: ignore[valid-type]
        Query(max_length=100, description="metric name (repeat for several, at most 100); none: every metric"),
    ] = None,
) -> RunAnalysis:
    require_run(session, run_id)
    try:
        analyses, findings = analyze_run(
            session=session,
            run_id=run_id,
            metrics=metric,
            max_metrics=settings.max_analyze_metrics,
            max_points=settings.max_analyze_points,
        )
    except AnalysisTooLargeError as exc:
        raise HTTPException(status_code=413, detail=str(exc)) from exc
    except UnknownMetricError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    return RunAnalysis(
        run_id=run_id,
        series=[
            AnalyzedSeries(
                metric=a.metric,
                kind=a.understood.kind,
                understood=a.understood.to_dict(),
                verdict=a.verdict,
                events=[e.to_dict() for e in a.events],
            )
            for a in analyses
        ],
        findings=[f.to_dict() for f in findings],
    )


@router.delete(
    "/{run_id}",
    response_model=RunDeleted,
    summary="Delete a run with every point, rollup, event, note, detector state and delivery of it (admin)",
)
def delete_run(session: SessionDep, run_id: str) -> RunDeleted:
    deleted = retention.delete_run(session=session, run=require_run(session, run_id))
    session.commit()
    return RunDeleted(id=run_id, deleted=deleted)


@router.post("/{run_id}/archive", response_model=RunPublic, summary="Archive a run: kept, left out of the runs list")
def archive_run(session: SessionDep, run_id: str) -> RunPublic:
    run = retention.archive_run(session=session, run=require_run(session, run_id), archived=True)
    session.commit()
    return RunPublic.from_row(run)


@router.post("/{run_id}/unarchive", response_model=RunPublic, summary="Bring an archived run back to the runs list")
def unarchive_run(session: SessionDep, run_id: str) -> RunPublic:
    run = retention.archive_run(session=session, run=require_run(session, run_id), archived=False)
    session.commit()
    return RunPublic.from_row(run)
