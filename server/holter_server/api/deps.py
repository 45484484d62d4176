"""Dependencies shared by the routers: settings and a database session per request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from annotated_types import Interval
from fastapi import Depends, HTTPException, Request
from pydantic import BeforeValidator
from sqlalchemy.orm import Session

from holter_server.services.auth import ROW_ID_RULE, Principal, row_id
from holter_server.settings import Settings


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    """A session for one request. Routes that write commit before answering, so an answer
    always means the data is durable; anything uncommitted is rolled back here."""
    session = request.app.state.session_factory()
    try:
        yield session
    finally:
        session.close()


SettingsDep = Annotated[Settings, Depends(get_settings)]


def _row_id_spelling(value: object) -> object:
    # the gate's spelling of an id, not int()'s: "+1", "01", "1.0" or " 1" is no id here either
    if isinstance(value, str) and row_id(value) is None:
        raise ValueError(f"{value!r} is not an id: {ROW_ID_RULE}")
    return value


# Ids of rows (events, annotations, channels, rules, deliveries, keys): 32-bit on every store,
# so an absurd id is a 422, not a database overflow; spelled one way only (services/auth.row_id).
RowId = Annotated[int, BeforeValidator(_row_id_spelling), Interval(ge=1, le=2**31 - 1)]
SessionDep = Annotated[Session, Depends(get_session)]


# --- who is calling: the gate (api/gate.py) established it ------------------------------


def get_principal(request: Request) -> Principal:
    """The caller, as the gate established it (api/gate.py). A route the gate did not admit
    (one missing from the access table) gets nobody: refused, never open."""
    principal = getattr(request.state, "principal", None)
    if principal is None:
        raise HTTPException(status_code=403, detail="this route is not in the access table (api/access.py)")
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]
