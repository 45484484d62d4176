"""Points: the columnar batch ingest and a plain range read."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from holter_server.api.deps import SessionDep, SettingsDep
from holter_server.api.routes.runs import require_run
from holter_server.schemas.points import PointsBatch, PointsStored, SeriesPointsPublic
from holter_server.services.ingest import UnknownRunError, ingest_batch
from holter_server.store import points as points_store
from holter_server.store import runs as runs_store
from holter_server.wire import BodyError, decode_body, encode_json, encode_msgpack, is_msgpack, json_safe_column

router = APIRouter(prefix="/runs/{run_id}", tags=["points"])

BATCH_BODY = {
    "required": True,
    "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/PointsBatch"}},
        "application/msgpack": {"schema": {"$ref": "#/components/schemas/PointsBatch"}},
    },
}


async def _read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise HTTPException(status_code=413, detail=f"request body of {declared} bytes exceeds the limit of {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise HTTPException(status_code=413, detail=f"request body exceeds the limit of {limit} bytes")
    return bytes(body)


@router.post(
    "/points",
    response_model=PointsStored,
    summary="Store a batch of points for many metrics (JSON or msgpack)",
    openapi_extra={"requestBody": BATCH_BODY},
    responses={404: {"description": "unknown run"}, 413: {"description": "batch too large"}, 422: {"description": "malformed batch"}},
)
async def add_points(request: Request, run_id: str, settings: SettingsDep) -> PointsStored:
    raw = await _read_limited(request, settings.max_body_bytes)
    try:
        batch = PointsBatch.model_validate(decode_body(raw, request.headers.get("content-type")))
    except BodyError as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False, include_context=False)) from exc
    if batch.point_count() > settings.max_points_per_batch:
        raise HTTPException(status_code=413, detail=f"batch of {batch.point_count()} points exceeds the limit of {settings.max_points_per_batch}")
    # The database work blocks; run it off the event loop as FastAPI runs a sync route.
    return await run_in_threadpool(_store_batch, request, run_id, batch)


def _store_batch(request: Request, run_id: str, batch: PointsBatch) -> PointsStored:
    with request.app.state.session_factory() as session:
        try:
            result = ingest_batch(session=session, run_id=run_id, batch=batch)
        except UnknownRunError:
            raise HTTPException(status_code=404, detail=f"unknown run {run_id!r}; create it with POST /api/v1/runs first") from None
        session.commit()
    return PointsStored(received=result.received, stored=result.stored, duplicates=result.duplicates)


@router.get(
    "/metrics/{metric:path}/points",
    response_model=SeriesPointsPublic,
    summary="Points of one metric in a step range (JSON, or msgpack with Accept: application/msgpack)",
)
def read_points(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    run_id: str,
    metric: str,
    start: Annotated[int | None, Query(ge=0, description="first step (inclusive)")] = None,
    end: Annotated[int | None, Query(ge=0, description="last step (inclusive)")] = None,
    limit: Annotated[int | None, Query(ge=1, description="most points to return")] = None,
) -> Response:
    require_run(session, run_id)
    row = runs_store.get_metric(session=session, run_id=run_id, name=metric)
    if row is None:
        raise HTTPException(status_code=404, detail=f"run {run_id!r} has no metric {metric!r}")
    cap = min(limit or settings.max_points_per_read, settings.max_points_per_read)
    series = points_store.read_points(session=session, run_id=run_id, metric_id=row.metric_id, start=start, end=end, limit=cap + 1)
    truncated = len(series.steps) > cap
    payload = {
        "run_id": run_id,
        "metric": metric,
        "steps": series.steps[:cap],
        "values": series.values[:cap],
        "times": series.wall_times[:cap],
        "truncated": truncated,
    }
    if is_msgpack(request.headers.get("accept")):
        return Response(encode_msgpack(payload), media_type="application/msgpack")
    payload["values"] = json_safe_column(payload["values"])
    return Response(encode_json(payload), media_type="application/json")
