"""Series reads beyond one metric: comparison charts, metric families, and export."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.responses import StreamingResponse

from holter_server.api.deps import SessionDep, SettingsDep
from holter_server.api.routes.points import MAX_CHART_POINTS, encode_for, json_safe_series, series_body
from holter_server.api.routes.runs import require_run
from holter_server.schemas import MAX_BIGINT
from holter_server.schemas.runs import MetricPublic
from holter_server.schemas.series import FamilyMatrixPublic, MetricsPublic, SeriesManyPublic
from holter_server.services import export, reads
from holter_server.services import runs as runs_service

router = APIRouter(tags=["series"])

MAX_SERIES_PER_READ = 256
MAX_FAMILY_METRICS = 2_000

StartStep = Annotated[int | None, Query(ge=0, le=MAX_BIGINT, description="first step (inclusive)")]
EndStep = Annotated[int | None, Query(ge=0, le=MAX_BIGINT, description="last step (inclusive)")]


@router.get(
    "/series",
    response_model=SeriesManyPublic,
    summary="Several series on one step range: many metrics of a run, or one metric across runs "
    "(every run × metric pair asked for; JSON, or msgpack with Accept: application/msgpack)",
)
def read_many(
    request: Request,
    session: SessionDep,
    run: Annotated[list[str], Query(min_length=1, description="run id (repeat for several)")],
    metric: Annotated[list[str], Query(min_length=1, description="metric name (repeat for several)")],
    start: StartStep = None,
    end: EndStep = None,
    max_points: Annotated[int, Query(ge=2, le=MAX_CHART_POINTS, description="most points per series")] = 2000,
    with_times: Annotated[
        bool, Query(description="downsampled series also return the wall time of each point drawn")
    ] = False,
) -> Response:
    pairs = [(run_id, name) for run_id in dict.fromkeys(run) for name in dict.fromkeys(metric)]
    if len(pairs) > MAX_SERIES_PER_READ:
        raise HTTPException(
            status_code=422, detail=f"{len(pairs)} series asked for; at most {MAX_SERIES_PER_READ} per read"
        )
    found, missing = [], []
    for run_id in dict.fromkeys(run):
        rows = runs_service.metrics_named(session=session, run_id=run_id, names=metric)
        for name in dict.fromkeys(metric):
            if name in rows:
                found.append(rows[name])
            else:
                missing.append({"run_id": run_id, "metric": name})
    series = reads.read_many(
        session=session, metrics=found, start=start, end=end, max_points=max_points, with_times=with_times
    )
    payload = {"data": [series_body(read) for read in series], "missing": missing}
    return encode_for(
        request, payload, lambda body: {**body, "data": [json_safe_series(item) for item in body["data"]]}
    )


@router.get(
    "/runs/{run_id}/metrics", response_model=MetricsPublic, summary="A run's metrics whose names start with a prefix"
)
def list_metrics(
    session: SessionDep,
    run_id: str,
    prefix: Annotated[str, Query(description="name prefix, e.g. `act_norm/layer.` (a trailing * is ignored)")] = "",
    limit: Annotated[int, Query(ge=1, le=MAX_FAMILY_METRICS)] = 1000,
) -> MetricsPublic:
    require_run(session, run_id)
    rows = reads.list_family(session=session, run_id=run_id, prefix=prefix, limit=limit)
    return MetricsPublic(data=[MetricPublic.from_row(row) for row in rows], count=len(rows))


@router.get(
    "/runs/{run_id}/family",
    response_model=FamilyMatrixPublic,
    summary="A metric family (metrics sharing a prefix) as a metrics × step-buckets matrix, for heatmaps",
)
def read_family(
    session: SessionDep,
    settings: SettingsDep,
    run_id: str,
    prefix: Annotated[
        str, Query(min_length=1, description="name prefix, e.g. `act_norm/layer.` (a trailing * is ignored)")
    ],
    start: StartStep = None,
    end: EndStep = None,
    max_buckets: Annotated[int, Query(ge=1, le=10_000, description="most step buckets (columns)")] = 200,
    stat: Annotated[Literal["min", "max", "mean", "first", "last"], Query(description="what each cell shows")] = "max",
) -> FamilyMatrixPublic:
    require_run(session, run_id)
    metrics = reads.list_family(session=session, run_id=run_id, prefix=prefix, limit=MAX_FAMILY_METRICS)
    if len(metrics) * max_buckets > settings.max_family_cells:
        raise HTTPException(
            status_code=413,
            detail=f"{len(metrics):,} metrics × {max_buckets:,} buckets = {len(metrics) * max_buckets:,} cells, "
            f"more than {settings.max_family_cells:,} (HOLTER_MAX_FAMILY_CELLS); "
            "ask for fewer buckets or a longer prefix",
        )
    family = reads.read_family(
        session=session,
        run_id=run_id,
        prefix=prefix,
        metrics=metrics,
        start=start,
        end=end,
        max_buckets=max_buckets,
        stat=stat,
    )
    return FamilyMatrixPublic(
        run_id=family.run_id,
        prefix=family.prefix,
        stat=family.stat,
        metrics=family.metrics,
        bucket_width=family.bucket_width,
        bucket_starts=family.bucket_starts,
        values=family.values,
        nonfinite=family.nonfinite,
    )


@router.get(
    "/runs/{run_id}/export",
    summary="A run's points (or some metrics') as CSV or Parquet, streamed",
    responses={200: {"content": {"text/csv": {}, "application/vnd.apache.parquet": {}}}},
)
def export_points(
    request: Request,
    session: SessionDep,
    run_id: str,
    format: Annotated[Literal["csv", "parquet"], Query(description="file format")] = "csv",
    metric: Annotated[
        list[str] | None, Query(description="metric name (repeat for several); none: every metric")
    ] = None,
    start: StartStep = None,
    end: EndStep = None,
) -> StreamingResponse:
    require_run(session, run_id)
    if format == "parquet" and not export.parquet_available():
        raise HTTPException(status_code=501, detail=f"this service cannot write Parquet: {export.PARQUET_EXTRA_HINT}")
    if metric:
        rows = runs_service.metrics_named(session=session, run_id=run_id, names=metric)
        unknown = [name for name in metric if name not in rows]
        if unknown:
            raise HTTPException(status_code=404, detail=f"run {run_id!r} has no metric {unknown[0]!r}")
        chosen = [rows[name] for name in dict.fromkeys(metric)]
    else:
        chosen = runs_service.metrics_of_run(session=session, run_id=run_id, ranks=True)
    series = [(row.name, row.metric_id, row.count or 0) for row in chosen]
    session.close()  # the stream opens its own session per chunk
    stream = export.csv_stream if format == "csv" else export.parquet_stream
    chunks = stream(open_session=request.app.state.session_factory, run_id=run_id, series=series, start=start, end=end)
    media_type = "text/csv" if format == "csv" else "application/vnd.apache.parquet"
    headers = {"content-disposition": f'attachment; filename="{run_id}.{format}"'}
    return StreamingResponse(chunks, media_type=media_type, headers=headers)
