"""The FastAPI application: `create_app(settings)` wires settings, the database and the routers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.openapi.utils import get_openapi
from sqlalchemy.orm import Session, sessionmaker

from holter_server import __version__
from holter_server.api.deps import authorize
from holter_server.api.routes import alerts, annotations, events, health, keys, points, postmortem, runs, series
from holter_server.schemas.points import PointsBatch
from holter_server.services.auth import AuthMode
from holter_server.services.loops import AlertDispatcher, BackgroundWork, DetectionLoop, LoopService, StallWatch
from holter_server.settings import Settings
from holter_server.store.database import background_lock_path, make_engine, make_session_factory, upgrade

API_PREFIX = "/api/v1"


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the service. Tests pass their own settings; `holter serve` passes the CLI's."""
    settings = settings or Settings()
    url = settings.resolved_database_url()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.migrate_on_start:
            upgrade(url)
        engine = make_engine(url)
        app.state.engine = engine
        app.state.session_factory = make_session_factory(engine)
        loops = background_loops(settings, app.state.session_factory) if settings.background == "thread" else []
        work = BackgroundWork(loops, background_lock_path(url))
        work.start()
        try:
            yield
        finally:
            work.stop()
            engine.dispose()

    app = FastAPI(title="Holter", version=__version__, summary="Training-health monitor for ML runs", lifespan=lifespan)
    app.state.settings = settings
    app.state.auth_mode = AuthMode(settings)
    # Every API route passes `authorize`: its scope comes from one table (api/deps.py).
    api = APIRouter(prefix=API_PREFIX, dependencies=[Depends(authorize)])
    api.include_router(health.router)
    api.include_router(runs.router)
    api.include_router(points.router)
    api.include_router(events.router)
    api.include_router(annotations.router)
    api.include_router(alerts.router)
    api.include_router(postmortem.router)
    api.include_router(keys.router)
    api.include_router(series.router)
    app.include_router(api)
    app.openapi = lambda: _openapi_with_batch_schema(app)  # type: ignore[method-assign]
    _mount_dashboard(app)
    return app


def _mount_dashboard(app: FastAPI) -> None:
    """Serve the dashboard at `/` when it is installed (`holter[dashboard]`); the API works without it."""
    try:
        from holter_dashboard import mount
    except ImportError:
        return
    mount(app)


def background_loops(settings: Settings, session_factory: sessionmaker[Session]) -> list[LoopService]:
    """The loops this process runs: the stall watch, the alert dispatcher and live detection (unless disabled)."""
    loops: list[LoopService] = [
        StallWatch(session_factory, timedelta(seconds=settings.stall_after), settings.stall_check_interval),
        AlertDispatcher(session_factory, base_url=settings.base_url(), timeout=settings.alert_timeout,
                        give_up_after=timedelta(seconds=settings.alert_give_up_after), allow_private=settings.allow_private_webhooks),
    ]
    if settings.detection_enabled:
        loops.append(DetectionLoop(session_factory, settings.detection_interval))
    return loops


def _openapi_with_batch_schema(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document, plus the points batch schema that the ingest route parses itself
    (it decodes JSON and msgpack by hand, so FastAPI cannot see the model)."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
        batch = PointsBatch.model_json_schema(ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(batch.pop("$defs", {}))
        components["PointsBatch"] = batch
        app.openapi_schema = schema
    return app.openapi_schema
