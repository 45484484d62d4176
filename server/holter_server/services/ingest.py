"""Ingest: turn a validated batch into stored points and a live run."""

from __future__ import annotations

from sqlalchemy.orm import Session

from holter_server.schemas.points import PointsBatch
from holter_server.services import lifecycle
from holter_server.store import points as points_store
from holter_server.store import runs as runs_store
from holter_server.store.points import StoredCount


class UnknownRunError(LookupError):
    """The batch names a run the service does not know."""


class TooManyMetricsError(ValueError):
    """The batch would give the run more metric series than the service allows."""


def ingest_batch(*, session: Session, run_id: str, batch: PointsBatch, max_metrics: int) -> StoredCount:
    """Store a batch exactly once and record the run's progress (all of it, or none of it)."""
    if runs_store.get_run(session=session, run_id=run_id) is None:
        raise UnknownRunError(run_id)
    new = set(batch.metrics) - runs_store.existing_metric_names(session=session, run_id=run_id, names=batch.metrics)
    if new and runs_store.count_metrics(session=session, run_id=run_id) + len(new) > max_metrics:
        raise TooManyMetricsError(f"run {run_id!r} would have more than {max_metrics} metrics with {len(new)} new ones in this batch")
    step_time = dict(zip(batch.step_times.steps, batch.step_times.times)) if batch.step_times else {}
    columns = {}
    for name, series in batch.metrics.items():
        times = series.times if series.times is not None else [step_time.get(step) for step in series.steps]
        columns[name] = (series.steps, series.values, times)
    result = points_store.add_points(session=session, run_id=run_id, columns=columns)
    last_steps = [max(series.steps) for series in batch.metrics.values() if series.steps]
    lifecycle.record_activity(session=session, run_id=run_id, last_step=max(last_steps) if last_steps else None)
    return result
