"""Projects: the ones that have runs, and the config keys their runs were created with (what the
runs page offers as columns, a bounded page at a time)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from holter_server.api.deps import PrincipalDep, SessionDep
from holter_server.schemas.runs import ConfigKeysPublic, ProjectPublic
from holter_server.services import runs as runs_service

router = APIRouter(tags=["runs"])


@router.get("/projects", response_model=list[ProjectPublic], summary="The projects that have runs, with their counts")
def list_projects(session: SessionDep, principal: PrincipalDep) -> list[ProjectPublic]:
    return [
        ProjectPublic(name=name, runs=runs, archived=archived)
        for name, runs, archived in runs_service.projects(session=session, project=principal.project)
    ]


@router.get(
    "/config-keys",
    response_model=ConfigKeysPublic,
    summary="The dotted config keys of a project's runs (every project's when none is named) that hold a text",
)
def list_config_keys(
    session: SessionDep,
    principal: PrincipalDep,
    project: str | None = None,
    contains: Annotated[str | None, Query(max_length=512, description="only keys holding this, in any case")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> ConfigKeysPublic:
    keys, count = runs_service.list_config_keys(
        session=session, project=project or principal.project, contains=contains, limit=limit
    )
    return ConfigKeysPublic(keys=keys, count=count)
