"""The FastAPI application: `create_app(settings)` wires settings, the database and the routers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import entry_points
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi_offline import FastAPIOffline

from holter_server import __version__
from holter_server.alerts import image_links
from holter_server.api import docs
from holter_server.api.bad_input import refuse_unstorable_text, validation_failed
from holter_server.api.gate import Gate
from holter_server.api.routes import (
    alerts,
    annotations,
    compare,
    events,
    health,
    job_reports,
    keys,
    points,
    postmortem,
    projects,
    ranks,
    runs,
    series,
    tripwires,
    vocabulary,
)
from holter_server.schemas.points import PointsBatch
from holter_server.services.auth import AuthMode
from holter_server.services.loops import BackgroundWork, background_loops
from holter_server.settings import Settings
from holter_server.store.database import background_lock_path, make_engine, make_session_factory, upgrade

API_PREFIX = "/api/v1"


def create_app(settings: Settings | None = None, *, dashboard: bool = True) -> FastAPI:
    """Build the service. Tests pass their own settings; `holter serve` passes the CLI's.

    `dashboard=False` serves the API alone, as an install without `holter[dashboard]` does: the
    API's in-process tests skip mounting Dash, the slowest part of building the app."""
    settings = settings or Settings()
    url = settings.resolved_database_url()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.migrate_on_start:
            upgrade(url, partition_points=settings.partition_points)
        engine = make_engine(url, pool_size=settings.db_pool_size)
        app.state.engine = engine
        app.state.session_factory = make_session_factory(engine)
        with app.state.session_factory() as session:
            image_links.ensure_secret(session=session)
        # "process": `holter serve` runs them in a worker process of their own, not here
        loops = background_loops(settings, app.state.session_factory) if settings.background == "thread" else []
        work = BackgroundWork(loops, background_lock_path(url))
        work.start()
        try:
            yield
        finally:
            work.stop()
            engine.dispose()

    app = FastAPIOffline(
        title="Holter",
        version=__version__,
        summary="Training-health monitor for ML runs",
        lifespan=lifespan,
        # /docs and /redoc with their files served from here, not a CDN (api/docs.py)
        docs_url=None,
        redoc_url=None,
        static_url=docs.ASSETS,
    )
    docs.install(app)
    app.state.settings = settings
    app.state.auth_mode = AuthMode(settings)
    app.add_exception_handler(RequestValidationError, validation_failed)
    # Text that no store can hold is refused before any lookup (api/bad_input.py).
    api = APIRouter(prefix=API_PREFIX, dependencies=[Depends(refuse_unstorable_text)])
    api.include_router(health.router)
    api.include_router(runs.router)
    api.include_router(points.router)
    api.include_router(events.router)
    api.include_router(annotations.router)
    api.include_router(alerts.router)
    api.include_router(postmortem.router)
    api.include_router(compare.router)
    api.include_router(keys.router)
    api.include_router(series.router)
    api.include_router(tripwires.router)
    api.include_router(ranks.router)
    api.include_router(job_reports.router)
    api.include_router(vocabulary.router)
    api.include_router(projects.router)
    app.include_router(api)
    app.openapi = lambda: _openapi_with_batch_schema(app)  # type: ignore[method-assign]
    if dashboard:
        _mount_dashboard(app)
    # Every request passes the gate first (api/gate.py), added last so it is the outermost layer,
    # before the dashboard's sign-in: the Host check for everything served, then for the API size,
    # key and project from one table (api/access.py), before any body is read.
    # The ingest route, the one a lab calls many times a second, is answered by the gate itself.
    app.add_middleware(Gate, holter_app=app, direct={("POST", "/runs/{run_id}/points"): points.serve_batch})
    return app


def _mount_dashboard(app: FastAPI) -> None:
    """Serve the dashboard at `/` when it is installed (`holter[dashboard]`); the API works without it.

    The dashboard is found by name in the `holter.mounts` entry points (pyproject.toml), so the
    service never imports it: the dashboard is the API's client, not a part of the service."""
    for point in entry_points(group="holter.mounts", name="dashboard"):
        try:
            mount = point.load()
        except ImportError:  # the package is there, its dependencies (dash) are not
            return
        mount(app)
        return


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
