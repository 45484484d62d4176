"""Dependencies shared by the routers: settings and a database session per request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from annotated_types import Interval
from fastapi import Depends, HTTPException, Request
from sqlalchemy.orm import Session

from holter_server.services.auth import OPEN, AuthMode, Principal, authenticate
from holter_server.settings import Settings
from holter_server.store import alerts as alerts_store
from holter_server.store import runs as runs_store


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
# Ids of rows (events, annotations, channels, rules, deliveries, keys): 32-bit on every store,
# so an absurd id is a 422, not a database overflow.
RowId = Annotated[int, Interval(ge=1, le=2**31 - 1)]
SessionDep = Annotated[Session, Depends(get_session)]


# --- who is calling -----------------------------------------------------------------------

# Route paths below the API prefix (/api/v1).
API = "/api/v1"
OPEN_ROUTES = {("GET", "/health")}
INGEST_ROUTES = {
    ("POST", "/runs"),
    ("POST", "/runs/{run_id}/points"),
    ("POST", "/runs/{run_id}/heartbeat"),
    ("POST", "/runs/{run_id}/finish"),
}
ADMIN_PREFIXES = ("/channels", "/rules", "/deliveries", "/keys", "/projects/")


def required_scope(method: str, path: str) -> str | None:
    """The scope a route needs (None: open). One table, so no route can be left out by accident."""
    path = path.removeprefix(API)
    if (method, path) in OPEN_ROUTES:
        return None
    if (method, path) in INGEST_ROUTES:
        return "ingest"
    if path.startswith(ADMIN_PREFIXES) and not (method == "GET" and path.startswith("/projects/")):
        return "admin"
    return "read"


def _presented_key(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.headers.get("x-api-key") or request.cookies.get("holter_key")


def authorize(request: Request, session: SessionDep) -> Principal:
    """Every API route depends on this: authenticate the key, check the route's scope and that
    every run, channel, rule, delivery or project the request names belongs to the key's project."""
    settings: Settings = request.app.state.settings
    mode: AuthMode = request.app.state.auth_mode
    route = request.scope.get("route")
    path = getattr(route, "path", request.url.path)
    needed = required_scope(request.method, path)
    if needed is None or not mode.enabled(session):
        request.state.principal = OPEN
        return OPEN
    token = _presented_key(request)
    principal = authenticate(session=session, token=token, settings=settings) if token else None
    if principal is None:
        raise HTTPException(status_code=401, detail="an API key is needed: Authorization: Bearer <key>" if not token else "unknown or revoked API key",
                            headers={"WWW-Authenticate": "Bearer"})
    if not principal.allows(needed):
        raise HTTPException(status_code=403, detail=f"this key's scope is {principal.scope!r}; this needs {needed!r}")
    if principal.project is not None:
        _check_project(session, principal, request)
    request.state.principal = principal
    return principal


def _check_project(session: Session, principal: Principal, request: Request) -> None:
    params, query = request.path_params, request.query_params
    named = query.get("project") or params.get("project")
    if named is not None and named != principal.project:
        raise HTTPException(status_code=403, detail=f"this key is for project {principal.project!r}, not {named!r}")
    run_ids = [params["run_id"]] if "run_id" in params else query.getlist("run_id") + query.getlist("run") + query.getlist("runs")
    for run_id in (r for value in run_ids for r in value.split(",") if r):
        run = runs_store.get_run(session=session, run_id=run_id)
        if run is not None and run.project != principal.project:
            raise HTTPException(status_code=404, detail=f"unknown run {run_id!r}")  # not even whether it exists
    channel_id = params.get("channel_id") or query.get("channel_id")
    rule = alerts_store.get_rule(session=session, rule_id=int(params["rule_id"])) if str(params.get("rule_id", "")).isdigit() else None
    delivery = alerts_store.get_delivery(session=session, delivery_id=int(params["delivery_id"])) if str(params.get("delivery_id", "")).isdigit() else None
    for owner in (channel_id, rule.channel_id if rule else None, delivery.channel_id if delivery else None):
        if owner is not None and str(owner).isdigit():
            channel = alerts_store.get_channel(session=session, channel_id=int(owner))
            if channel is not None and channel.project != principal.project:
                raise HTTPException(status_code=404, detail=f"unknown channel {owner}")


def get_principal(request: Request) -> Principal:
    """The caller, as `authorize` established it."""
    return getattr(request.state, "principal", OPEN)


PrincipalDep = Annotated[Principal, Depends(get_principal)]
