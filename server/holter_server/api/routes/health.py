"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from holter_server import __version__
from holter_server.api.deps import SessionDep

router = APIRouter(tags=["health"])


@router.get("/health", summary="Is the service up and its database reachable?")
def health(session: SessionDep) -> JSONResponse:
    dialect = session.get_bind().dialect.name
    try:
        session.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        return JSONResponse({"status": "unavailable", "database": dialect, "detail": str(exc.__cause__ or exc)}, status_code=503)
    return JSONResponse({"status": "ok", "version": __version__, "database": dialect})
