"""The ranks of a distributed job's run: their beats, where each stands, and one metric across them."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Query

from holter_server.api.deps import SessionDep, SettingsDep
from holter_server.api.routes.runs import require_run
from holter_server.api.routes.series import EndStep, StartStep
from holter_server.schemas.ranks import MAX_RANK, RankBeat, RankMatrixPublic, RankPublic, RanksPublic
from holter_server.services import ranks as ranks_service

router = APIRouter(prefix="/runs/{run_id}/ranks", tags=["ranks"])

RankPath = Annotated[int, Path(ge=0, le=MAX_RANK, description="the rank, as its launcher numbered it")]


@router.post(
    "/{rank}/beat",
    summary="A rank's beat: the step it is in, its collective, its timings, and its stack when quiet",
    responses={404: {"description": "unknown run, or a rank that never joined it"}},
)
def beat(session: SessionDep, run_id: str, rank: RankPath, body: RankBeat) -> dict[str, str]:
    # one UPDATE of the rank's row, the run read only when it names none: a thousand ranks beat
    # every few seconds, and loading the run (its config) first was a third of a beat's cost
    if not ranks_service.record_beat(session=session, run_id=run_id, rank=rank, beat=body):
        session.rollback()
        require_run(session, run_id)
        raise HTTPException(status_code=404, detail=f"rank {rank} has not joined run {run_id!r} (register it first)")
    session.commit()
    return {"status": "ok"}


@router.get("", response_model=RanksPublic, summary="The run's ranks: where each stands, by host")
def list_ranks(session: SessionDep, run_id: str) -> RanksPublic:
    require_run(session, run_id)
    rows = ranks_service.ranks_with_life(session=session, run_id=run_id)
    hosts: dict[str, list[int]] = {}
    for row, _alive in rows:
        hosts.setdefault(row.host or "?", []).append(row.rank)
    return RanksPublic(
        run_id=run_id,
        world_size=max((row.world_size or 0 for row, _ in rows), default=0) or None,
        launcher=next((row.launcher for row, _ in rows if row.launcher), None),
        job=next((row.job for row, _ in rows if row.job), None),
        hosts=hosts,
        data=[
            RankPublic(
                rank=row.rank,
                world_size=row.world_size,
                local_rank=row.local_rank,
                node_rank=row.node_rank,
                host=row.host,
                pid=row.pid,
                launcher=row.launcher,
                status=row.status,
                reason=row.reason,
                alive=alive,
                joined_at=row.joined_at,
                beat_at=row.beat_at,
                finished_at=row.finished_at,
                step=row.step,
                step_at=row.step_at,
                collective=row.collective,
                collective_since=row.collective_since,
                stack=row.stack,
                timing=row.timing,
            )
            for row, alive in rows
        ],
    )


@router.get(
    "/matrix",
    response_model=RankMatrixPublic,
    summary="One metric across the ranks (rank 0's under its own name) as a ranks × step-buckets matrix",
)
def rank_matrix(
    session: SessionDep,
    settings: SettingsDep,
    run_id: str,
    metric: Annotated[str, Query(min_length=1, max_length=256, description="e.g. holter/dist/compute_s, or loss")],
    start: StartStep = None,
    end: EndStep = None,
    max_buckets: Annotated[int, Query(ge=1, le=10_000, description="most step buckets (columns)")] = 200,
    stat: Annotated[Literal["min", "max", "mean", "first", "last"], Query(description="what each cell shows")] = "mean",
) -> RankMatrixPublic:
    require_run(session, run_id)
    ranks = ranks_service.ranks_of(session=session, run_id=run_id)
    if len(ranks) * max_buckets > settings.max_family_cells:
        raise HTTPException(
            status_code=413,
            detail=f"{len(ranks):,} ranks × {max_buckets:,} buckets = {len(ranks) * max_buckets:,} cells, more than "
            f"{settings.max_family_cells:,} (HOLTER_MAX_FAMILY_CELLS); ask for fewer buckets",
        )
    found, family = ranks_service.rank_matrix(
        session=session, run_id=run_id, metric=metric, start=start, end=end, max_buckets=max_buckets, stat=stat
    )
    return RankMatrixPublic(
        run_id=run_id,
        metric=metric,
        stat=stat,
        ranks=found,
        bucket_width=family.bucket_width,
        bucket_starts=family.bucket_starts,
        values=family.values,
    )
