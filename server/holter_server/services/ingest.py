"""Ingest: turn a checked batch into stored points and a live run."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from holter_server.schemas.points import MetricConflict, MetricRefused, PointsStored, ReadBatch
from holter_server.services import kinds, lifecycle
from holter_server.store import points as points_store
from holter_server.store import runs as runs_store
from holter_server.vocabulary.statuses import RunStatus
from holter_server.wire import shown


class UnknownRunError(LookupError):
    """The batch names a run the service does not know."""


# The metric ids of the runs this process wrote to lately (each API process its own).
KNOWN_METRIC_IDS = points_store.KnownMetricIds()


def ingest_batch(
    *,
    session: Session,
    run_id: str,
    batch: ReadBatch,
    max_metrics: int,
    known: points_store.KnownMetricIds = KNOWN_METRIC_IDS,
) -> PointsStored:
    """Store a batch exactly once and record the run's progress (all of it, or none of it).

    Metrics the batch would add beyond the run's `max_metrics` are refused one by one (in the
    batch's order), like the metrics refused while reading it; the rest is stored.
    `known`: the metric ids this process remembers (the usual batch of a run it wrote to
    lately goes without reading them; `KnownMetricIds`).
    """
    step_time = dict(zip(batch.step_times.steps, batch.step_times.times)) if batch.step_times else {}
    columns = {}
    for name, series in batch.metrics.items():
        times = series.times if series.times is not None else [step_time.get(step) for step in series.steps]
        columns[name] = (series.steps, series.values, times)
    remembered = None if batch.kinds or session.in_transaction() else known.get(run_id)
    if remembered is not None and all(name in remembered[1] for name in columns):
        quick = points_store.add_points_as_known(
            session=session, run_id=run_id, columns=columns, created_at=remembered[0], ids=remembered[1]
        )
        if quick is not None:
            return _stored(batch, quick, max_metrics)
        if session.in_transaction():
            # it wrote, and the ids proved stale or the run stalled or gone: the usual way, in a
            # new transaction (this one wrote as if the ids were right); else it sent nothing
            # (a large batch, a database with no such way)
            session.rollback()
            known.forget(run_id)
    found = points_store.run_and_metric_ids(session=session, run_id=run_id, names=batch.metrics.keys())
    status, known_ids = found.status, found.ids
    if status is None:
        raise UnknownRunError(run_id)
    if found.created_at is not None and known_ids:
        known.remember(run_id, found.created_at, known_ids)
    then: Callable[[], None] | None = None
    if status != RunStatus.STALLED and not batch.kinds and all(name in known_ids for name in columns):
        # the usual batch (no new metric, so none refused for room): the run's activity is written
        # in the same round trip as the rollups
        last = max((max(series.steps) for series in batch.metrics.values() if series.steps), default=None)

        def then() -> None:
            lifecycle.record_activity(session=session, run_id=run_id, last_step=last, status=status)

    try:
        result = points_store.add_points(
            session=session, run_id=run_id, columns=columns, max_metrics=max_metrics, known_ids=known_ids, then=then
        )
    except IntegrityError:
        # the run was deleted after its ids were read (SQLite reads them before its write lock):
        # its metrics went, and a rollup naming one failed its foreign key. A gone run is a 404.
        session.rollback()
        known.forget(run_id)
        if runs_store.get_run(session=session, run_id=run_id) is None:
            raise UnknownRunError(run_id) from None
        raise
    if then is None:
        if batch.kinds:
            # after the points: every writer takes the run's locks in one order (metric ids and
            # rollups, then the run's row), so batches declaring kinds cannot deadlock with others
            run = runs_store.get_run(session=session, run_id=run_id)
            if run is None:  # deleted since the batch began
                raise UnknownRunError(run_id)
            kinds.declare(
                session=session, run=run, definitions={pattern: {"kind": kind} for pattern, kind in batch.kinds.items()}
            )
        over_limit = set(result.over_limit)
        last_steps = [
            max(series.steps) for name, series in batch.metrics.items() if series.steps and name not in over_limit
        ]
        lifecycle.record_activity(
            session=session, run_id=run_id, last_step=max(last_steps) if last_steps else None, status=status
        )
    return _stored(batch, result, max_metrics)


def _stored(batch: ReadBatch, result: points_store.StoredCount, max_metrics: int) -> PointsStored:
    refused = [
        *batch.refused,
        *(
            MetricRefused(
                metric=shown(name),
                reason=f"the run already has {max_metrics:,} metrics, the most one run may have "
                "(HOLTER_MAX_METRICS_PER_RUN)",
                points=len(batch.metrics[name].steps),
            )
            for name in result.over_limit
        ),
    ]
    conflicts = [
        MetricConflict(metric=shown(name), count=c.count, steps=c.steps) for name, c in result.conflicts.items()
    ]
    return PointsStored(
        received=result.received,
        stored=result.stored,
        duplicates=result.duplicates,
        refused=refused,
        conflicts=conflicts,
    )
