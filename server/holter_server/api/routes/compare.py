"""Signal or noise: seed groups, and a run or a group against a run or a group."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query

from holter_server.api.deps import PrincipalDep, SessionDep, SettingsDep
from holter_server.api.gate import unknown
from holter_server.api.routes.runs import require_run
from holter_server.schemas import MAX_BIGINT
from holter_server.schemas.compare import (
    ArmComparisonPublic,
    ProjectSettingsPublic,
    ProjectSettingsSet,
    RepeatsPublic,
    SeedGroupPublic,
    SeedGroupsPublic,
    TwinsPublic,
)
from holter_server.services import compare as compare_service
from holter_server.services import projects as projects_service
from holter_server.services import repeats as repeats_service
from holter_server.services.runs import StoredRun

router = APIRouter(tags=["compare"])

ARM_HELP = "run:<run id> for the run alone, group:<run id> for the run's seed group"


def _arm(session: SessionDep, principal: PrincipalDep, name: str, text: str) -> tuple[str, StoredRun]:
    kind, sep, run_id = text.partition(":")
    if not sep or kind not in compare_service.ARM_KINDS or not run_id:
        raise HTTPException(status_code=422, detail=f"{name}={text!r}: an arm is {ARM_HELP}")
    run = require_run(session, run_id)
    if not principal.sees(run.project):  # a project's key learns nothing of another's runs
        raise HTTPException(status_code=404, detail=unknown("run", run_id))
    return kind, run


@router.get(
    "/compare",
    response_model=ArmComparisonPublic,
    summary="Arm A against arm B on a metric: seed bands, a verdict per measure, the confounders",
)
def compare_arms(
    session: SessionDep,
    settings: SettingsDep,
    principal: PrincipalDep,
    metric: str,
    a: Annotated[str, Query(description=ARM_HELP)],
    b: Annotated[str, Query(description=ARM_HELP)],
    at_step: Annotated[
        int | None,
        Query(ge=0, le=MAX_BIGINT, description="the step of the at_step measure (default: the last every run reached)"),
    ] = None,
    at_tokens: Annotated[
        float | None,
        Query(
            gt=0,
            allow_inf_nan=False,
            description="the token count of the at_tokens measure (default: the least any run reached)",
        ),
    ] = None,
    start: Annotated[
        int | None,
        Query(ge=0, le=MAX_BIGINT, description="the range of the auc measure (default: what every run covers)"),
    ] = None,
    end: Annotated[int | None, Query(ge=0, le=MAX_BIGINT)] = None,
    primary: Annotated[
        Literal["final", "at_step", "at_tokens", "auc"] | None,
        Query(
            description="the measure chosen up front and tested at α (default: at_tokens when every run counts "
            "tokens, else at_step); the others are claimed only after it, Holm-corrected"
        ),
    ] = None,
) -> ArmComparisonPublic:
    first, second = _arm(session, principal, "a", a), _arm(session, principal, "b", b)
    if (start is None) != (end is None) or (start is not None and end is not None and end <= start):
        raise HTTPException(status_code=422, detail="the auc range needs both start and end, with end > start")
    try:
        found = compare_service.compare(
            session=session,
            metric=metric,
            a=first,
            b=second,
            at_step=at_step,
            at_tokens=at_tokens,
            step_range=(start, end) if start is not None and end is not None else None,
            primary=primary,
            max_points=settings.max_group_points,
        )
    except compare_service.GroupTooLargeError as exc:
        raise HTTPException(status_code=413, detail=str(exc)) from exc
    except compare_service.MissingMetricError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    except ValueError as exc:  # a primary measure that cannot be read
        raise HTTPException(status_code=422, detail=str(exc)) from exc
    return ArmComparisonPublic.from_comparison(found)


@router.get(
    "/runs/{run_id}/seed-group",
    response_model=SeedGroupPublic,
    summary="The runs that differ from this one only in seeds",
)
def read_seed_group(session: SessionDep, run_id: str) -> SeedGroupPublic:
    return SeedGroupPublic.from_group(compare_service.group_of_run(session=session, run=require_run(session, run_id)))


@router.get(
    "/runs/{run_id}/twins",
    response_model=TwinsPublic,
    summary="The runs that read the same batches in the same order as this one, whatever else differs",
)
def read_twins(session: SessionDep, run_id: str) -> TwinsPublic:
    return TwinsPublic.from_twins(compare_service.twins_of_run(session=session, run=require_run(session, run_id)))


@router.get(
    "/runs/{run_id}/repeats",
    response_model=RepeatsPublic,
    summary="Determinism: the runs with this run's config and seeds, and whether they logged the same values",
)
def read_repeats(session: SessionDep, run_id: str) -> RepeatsPublic:
    return RepeatsPublic.from_repeats(repeats_service.repeats_of(session=session, run=require_run(session, run_id)))


@router.get(
    "/projects/{project}/seed-groups",
    response_model=SeedGroupsPublic,
    summary="The project's runs grouped by config less seeds",
)
def list_seed_groups(session: SessionDep, project: str) -> SeedGroupsPublic:
    groups = compare_service.groups_of_project(session=session, project=project)
    return SeedGroupsPublic(project=project, data=[SeedGroupPublic.from_group(g) for g in groups])


@router.get(
    "/projects/{project}/settings",
    response_model=ProjectSettingsPublic,
    summary="What the project declared about its configs",
)
def read_settings(session: SessionDep, project: str) -> ProjectSettingsPublic:
    row = projects_service.project_settings(session=session, project=project)
    if row is None:
        return ProjectSettingsPublic(project=project, seed_keys=[], data_seed_keys=[], updated_at=None)
    return ProjectSettingsPublic(
        project=project, seed_keys=row.seed_keys, data_seed_keys=row.data_seed_keys, updated_at=row.updated_at
    )


@router.put(
    "/projects/{project}/settings",
    response_model=ProjectSettingsPublic,
    summary="Declare the project's own seed keys and data-seed keys",
)
def set_settings(session: SessionDep, project: str, body: ProjectSettingsSet) -> ProjectSettingsPublic:
    for key in (*body.seed_keys, *body.data_seed_keys):
        if not key.strip() or len(key) > 256:
            raise HTTPException(status_code=422, detail=f"a seed key must be 1 to 256 characters, not {key!r}")
    row = projects_service.declare_settings(
        session=session, project=project, seed_keys=body.seed_keys, data_seed_keys=body.data_seed_keys
    )
    session.commit()
    return ProjectSettingsPublic(
        project=project, seed_keys=row.seed_keys, data_seed_keys=row.data_seed_keys, updated_at=row.updated_at
    )
