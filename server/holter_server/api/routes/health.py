"""Liveness and readiness."""

from __future__ import annotations

import os

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from holter_server import __version__
from holter_server.api.deps import SessionDep
from holter_server.store.database import database_kind, ping

router = APIRouter(tags=["health"])


@router.get("/health", summary="Is the service up and its database reachable?")
def health(session: SessionDep) -> JSONResponse:
    dialect = database_kind(session)
    try:
        ping(session)
    except SQLAlchemyError as exc:
        return JSONResponse(
            {"status": "unavailable", "database": dialect, "detail": str(exc.__cause__ or exc)}, status_code=503
        )
    # `process`: which API process answered (`holter serve --workers N` runs several on one port)
    return JSONResponse({"status": "ok", "version": __version__, "database": dialect, "process": os.getpid()})
