"""Points: the columnar batch ingest and the range read (plain, or downsampled to a chart's size)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from holter_server.api.bad_input import refuse_unstorable_text
from holter_server.api.deps import SessionDep, SettingsDep
from holter_server.api.gate import BODY_STATE, unknown
from holter_server.api.routes.runs import require_run
from holter_server.nonfinite import json_safe_column
from holter_server.schemas import MAX_BIGINT
from holter_server.schemas.points import BatchShapeError, PointsStored, ReadBatch, SeriesPointsPublic, read_batch
from holter_server.services import reads, runs
from holter_server.services.ingest import UnknownRunError, ingest_batch
from holter_server.services.reads import SeriesRead
from holter_server.settings import Settings
from holter_server.wire import BodyError, TooManyValuesError, decode_body, encode_json, encode_msgpack, is_msgpack

router = APIRouter(prefix="/runs/{run_id}", tags=["points"])

MAX_CHART_POINTS = 100_000  # a downsampled read's largest size; plain reads have max_points_per_read

BATCH_BODY = {
    "required": True,
    "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/PointsBatch"}},
        "application/msgpack": {"schema": {"$ref": "#/components/schemas/PointsBatch"}},
    },
}


def _gated_body(request: Request) -> bytearray:
    """The body the gate read (api/gate.py): whole, under this route's limit, before any session."""
    body = request.scope.get(BODY_STATE)
    if body is None:
        raise HTTPException(status_code=400, detail="no request body")
    return body


@router.post(
    "/points",
    response_model=PointsStored,
    summary="Store a batch of points for many metrics (JSON or msgpack)",
    openapi_extra={"requestBody": BATCH_BODY},
    responses={
        400: {"description": "a body that cannot be decoded (malformed, nested too deeply)"},
        404: {"description": "unknown run"},
        413: {"description": "batch too large"},
        422: {
            "description": "malformed batch (a key twice, a number out of range), "
            "or every metric of it refused (each with its reason)"
        },
    },
)
async def add_points(request: Request, run_id: str) -> PointsStored:
    # Requests the gate admitted are answered by `serve_batch` (below) without coming here; this
    # is the same answer through FastAPI, for the OpenAPI document and any app without the gate.
    return await ingest(request.app, run_id, _gated_body(request), request.headers.get("content-type"))


async def ingest(app: FastAPI, run_id: str, raw: bytes | bytearray, content_type: str | None) -> PointsStored:
    """Decode, check and store one batch: `HTTPException` or `RequestValidationError` for a
    batch refused, each with the answer the route gives."""
    settings: Settings = app.state.settings
    try:
        body = decode_body(raw, content_type, max_values=values_allowed(settings))
        batch = read_batch(body)
    except TooManyValuesError as exc:
        raise HTTPException(
            status_code=exc.status, detail=f"{exc}: a batch may hold at most {settings.max_points_per_batch:,} points"
        ) from exc
    except BodyError as exc:
        raise HTTPException(status_code=exc.status, detail=str(exc)) from exc
    except BatchShapeError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False, include_context=False, include_input=False)) from exc
    if batch.point_count() > settings.max_points_per_batch:
        raise HTTPException(
            status_code=413,
            detail=f"batch of {batch.point_count()} points exceeds the limit of {settings.max_points_per_batch}",
        )
    names = len(batch.metrics) + len(batch.refused)
    if names > settings.max_metrics_per_run:
        raise HTTPException(
            status_code=422,
            detail=f"the batch names {names:,} metrics, more than the {settings.max_metrics_per_run:,} "
            "one run may have (HOLTER_MAX_METRICS_PER_RUN)",
        )
    # The database work blocks; run it off the event loop as FastAPI runs a sync route.
    return await run_in_threadpool(_store_batch, app.state.session_factory, run_id, batch, settings.max_metrics_per_run)


_STORED = TypeAdapter(PointsStored)


async def serve_batch(app: FastAPI, scope: Scope, receive: Receive, send: Send, path_params: dict[str, str]) -> None:
    """The ingest route as the gate serves it (api/gate.py), once it has admitted the request and
    read its body: what FastAPI would do for `add_points`, without its routing, dependencies and
    the middleware below the gate, which cost a small batch about as much CPU as decoding it.

    Every answer is the route's: the path and query's text checked first (api/bad_input.py), a
    refusal answered by the app's own exception handlers, the stored counts serialized as FastAPI
    serializes the response model; anything else propagates to the server's 500 as before."""
    scope["path_params"] = path_params
    request = Request(scope, receive)
    try:
        await refuse_unstorable_text(request)
        stored = await ingest(app, path_params["run_id"], scope[BODY_STATE], request.headers.get("content-type"))
        response = Response(_STORED.dump_json(stored, by_alias=True), media_type="application/json")
    except (HTTPException, RequestValidationError) as exc:
        response = await _handler_for(app, exc)(request, exc)
    await response(scope, receive, send)


def _handler_for(app: FastAPI, exc: Exception) -> Callable[[Request, Any], Awaitable[Response]]:
    # as Starlette's ExceptionMiddleware looks one up: the nearest class the app has a handler for
    for kind in type(exc).__mro__:
        handler = app.exception_handlers.get(kind)
        if handler is not None:
            return handler  # type: ignore[no-any-return]
    raise exc


def values_allowed(settings: Settings) -> int:
    """The most values a batch body may hold: a step, a value, a wall time and a step time per
    point, and a name, an object and three fields with their lists per metric."""
    return 4 * settings.max_points_per_batch + 8 * settings.max_metrics_per_run + 64


def _store_batch(
    session_factory: sessionmaker[Session], run_id: str, batch: ReadBatch, max_metrics: int
) -> PointsStored:
    with session_factory() as session:
        try:
            result = ingest_batch(session=session, run_id=run_id, batch=batch, max_metrics=max_metrics)
        except UnknownRunError:
            # the gate's very words for another project's run: a key learns nothing of which it is
            raise HTTPException(status_code=404, detail=unknown("run", run_id)) from None
        if result.refused and not result.received:
            # Nothing could be stored: refuse the request as a whole, each metric with its reason.
            raise HTTPException(
                status_code=422,
                detail=[
                    {
                        "type": "metric_refused",
                        "loc": ["body", "metrics", refused.metric],
                        "msg": refused.reason,
                        "points": refused.points,
                    }
                    for refused in result.refused
                ],
            )
        session.commit()
    return result


@router.get(
    "/metrics/{metric:path}/points",
    response_model=SeriesPointsPublic,
    summary="Points of one metric in a step range, downsampled to max_points without hiding an extreme "
    "(JSON, or msgpack with Accept: application/msgpack)",
)
def read_points(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    run_id: str,
    metric: str,
    start: Annotated[int | None, Query(ge=0, le=MAX_BIGINT, description="first step (inclusive)")] = None,
    end: Annotated[int | None, Query(ge=0, le=MAX_BIGINT, description="last step (inclusive)")] = None,
    max_points: Annotated[
        int | None,
        Query(ge=2, le=MAX_CHART_POINTS, description="most points to return; a range holding more is downsampled"),
    ] = None,
    limit: Annotated[
        int | None, Query(ge=1, description="without max_points: most points to return (the rest is cut, `truncated`)")
    ] = None,
    with_times: Annotated[
        bool,
        Query(description="a downsampled read also returns the wall time of each point drawn (plain reads always do)"),
    ] = False,
) -> Response:
    require_run(session, run_id)
    row = runs.find_metric(session=session, run_id=run_id, name=metric)
    if row is None:
        raise HTTPException(status_code=404, detail=f"run {run_id!r} has no metric {metric!r}")
    cap = min(limit or settings.max_points_per_read, settings.max_points_per_read)
    read = reads.read_series(
        session=session, metric=row, start=start, end=end, max_points=max_points, plain_cap=cap, with_times=with_times
    )
    return encode_for(request, series_body(read))


def series_body(read: SeriesRead) -> dict[str, Any]:
    """A series read as the response body, floats as they are (see `encode_for`)."""
    body: dict[str, Any] = {
        "run_id": read.run_id,
        "metric": read.metric,
        "start": read.start,
        "end": read.end,
        "steps": read.steps,
        "values": read.values,
        "times": read.times,
        "truncated": read.truncated,
        "downsampled": read.downsampled,
        "bucket_width": read.bucket_width,
        "points_in_range": read.points_in_range,
        "buckets": None,
    }
    buckets = read.buckets
    if buckets is not None:
        has_finite = reads.has_finite(buckets)
        body["buckets"] = {
            "start": (buckets.bucket * read.bucket_width).tolist(),
            "count": buckets.count.tolist(),
            "min": _nulls_where(buckets.min_value, ~has_finite),
            "max": _nulls_where(buckets.max_value, ~has_finite),
            "mean": _nulls_where(reads.finite_mean(buckets), ~has_finite),
            "first": buckets.first_value.tolist(),
            "last": buckets.last_value.tolist(),
            "nan": buckets.nan_count.tolist(),
            "posinf": buckets.posinf_count.tolist(),
            "neginf": buckets.neginf_count.tolist(),
        }
    return body


def _nulls_where(values: np.ndarray, missing: np.ndarray) -> list[float | None]:
    out: list[float | None] = values.tolist()
    for index in np.flatnonzero(missing).tolist():
        out[index] = None
    return out


def json_safe_series(body: dict[str, Any]) -> dict[str, Any]:
    """The body with non-finite floats spelled out for JSON."""
    body = {**body, "values": json_safe_column(body["values"])}
    if body["buckets"] is not None:
        body["buckets"] = {
            **body["buckets"],
            "first": json_safe_column(body["buckets"]["first"]),
            "last": json_safe_column(body["buckets"]["last"]),
        }
    return body


def encode_for(request: Request, payload: Any, make_json_safe: Callable[[Any], Any] = json_safe_series) -> Response:
    """msgpack when the client accepts it (floats natively), else JSON with non-finite floats spelled out."""
    if is_msgpack(request.headers.get("accept")):
        return Response(encode_msgpack(payload), media_type="application/msgpack")
    return Response(encode_json(make_json_safe(payload)), media_type="application/json")
