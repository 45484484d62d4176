"""Liveness and readiness."""

from __future__ import annotations

import os

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from holter_server import __version__
from holter_server.api.deps import SessionDep
from holter_server.services.health import database_health

router = APIRouter(tags=["health"])


@router.get("/health", summary="Is the service up and its database reachable?")
def health(session: SessionDep) -> JSONResponse:
    dialect, failure = database_health(session=session)
    if failure is not None:
        return JSONResponse({"status": "unavailable", "database": dialect, "detail": failure}, status_code=503)
    # `process`: which API process answered (`holter serve --workers N` runs several on one port)
    return JSONResponse({"status": "ok", "version": __version__, "database": dialect, "process": os.getpid()})
