"""The FastAPI application: `create_app(settings)` wires settings, the database and the routers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.utils import get_openapi

from holter_server import __version__
from holter_server.api.routes import health, points, runs
from holter_server.schemas.points import PointsBatch
from holter_server.settings import Settings
from holter_server.store.database import make_engine, make_session_factory, upgrade

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
        try:
            yield
        finally:
            engine.dispose()

    app = FastAPI(title="Holter", version=__version__, summary="Training-health monitor for ML runs", lifespan=lifespan)
    app.state.settings = settings
    api = APIRouter(prefix=API_PREFIX)
    api.include_router(health.router)
    api.include_router(runs.router)
    api.include_router(points.router)
    app.include_router(api)
    app.openapi = lambda: _openapi_with_batch_schema(app)  # type: ignore[method-assign]
    return app


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
