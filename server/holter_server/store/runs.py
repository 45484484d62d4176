"""Runs and their metric summaries. All SQL about runs lives here."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import String, case, cast, delete, func, select, update
from sqlalchemy.orm import Session

from holter_server.store.models import DetectorStateRow, MetricRow, PointRow, RunRow

RUN_STATUSES = ("running", "finished", "crashed", "stalled")


def now() -> datetime:
    """The current time, timezone-aware (UTC)."""
    return datetime.now(UTC)


def get_run(*, session: Session, run_id: str) -> RunRow | None:
    """The run with this id, or None."""
    return session.get(RunRow, run_id)


def create_or_resume_run(
    *, session: Session, run_id: str, project: str, name: str | None, config: dict[str, Any], tags: list[str]
) -> tuple[RunRow, bool]:
    """Create the run, or resume it when the id exists; returns (run, resumed).

    Resuming sets the run running again and merges the new config and tags into the old ones.
    The caller checks that the project matches.
    """
    moment = now()
    run = session.get(RunRow, run_id, with_for_update=True)
    if run is None:
        run = RunRow(
            id=run_id, project=project, name=name, config=config, tags=tags, status="running",
            created_at=moment, updated_at=moment, heartbeat_at=moment,
        )
        session.add(run)
        session.flush()
        return run, False
    run.status = "running"
    run.finished_at = None
    run.name = name or run.name
    run.config = {**(run.config or {}), **config}
    run.tags = list(dict.fromkeys([*(run.tags or []), *tags]))
    run.updated_at = run.heartbeat_at = moment
    session.flush()
    return run, True


def list_runs(
    *, session: Session, project: str | None, status: str | None, tag: str | None = None, limit: int, offset: int
) -> tuple[Sequence[RunRow], int]:
    """Runs, newest first, with the total count matching the filters."""
    query = select(RunRow)
    if project is not None:
        query = query.where(RunRow.project == project)
    if status is not None:
        query = query.where(RunRow.status == status)
    if tag is not None:
        # Tags are a JSON list; match the quoted element so "a" does not match "ab".
        query = query.where(cast(RunRow.tags, String).contains(json.dumps(tag), autoescape=True))
    count = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(RunRow.created_at.desc(), RunRow.id).limit(limit).offset(offset)).all()
    return rows, count


def list_metrics(*, session: Session, run_id: str) -> Sequence[MetricRow]:
    """The run's metric series with their summaries, by name."""
    return session.scalars(select(MetricRow).where(MetricRow.run_id == run_id).order_by(MetricRow.name)).all()


def get_metric(*, session: Session, run_id: str, name: str) -> MetricRow | None:
    """One metric series of a run, or None."""
    return session.scalar(select(MetricRow).where(MetricRow.run_id == run_id, MetricRow.name == name))


def count_metrics(*, session: Session, run_id: str) -> int:
    """How many metric series a run has."""
    return session.scalar(select(func.count()).select_from(MetricRow).where(MetricRow.run_id == run_id)) or 0


def existing_metric_names(*, session: Session, run_id: str, names: Iterable[str]) -> set[str]:
    """Which of `names` the run already has."""
    wanted = list(names)
    return set(session.scalars(select(MetricRow.name).where(MetricRow.run_id == run_id, MetricRow.name.in_(wanted)))) if wanted else set()


def record_activity(*, session: Session, run_id: str, last_step: int | None) -> None:
    """Note that the run is alive (a batch or a heartbeat arrived) and how far it got."""
    moment = now()
    values: dict[str, Any] = {"heartbeat_at": moment, "updated_at": moment}
    if last_step is not None:
        values["last_step"] = case((RunRow.last_step.is_(None) | (RunRow.last_step < last_step), last_step), else_=RunRow.last_step)
    session.execute(update(RunRow).where(RunRow.id == run_id).values(**values))


def update_run(*, session: Session, run: RunRow, tags: list[str] | None, notes: str | None) -> RunRow:
    """Replace the run's tags and/or notes."""
    if tags is not None:
        run.tags = list(dict.fromkeys(tags))
    if notes is not None:
        run.notes = notes
    run.updated_at = now()
    session.flush()
    return run


def finish_run(*, session: Session, run: RunRow, status: str) -> RunRow:
    """Mark the run finished or crashed."""
    moment = now()
    run.status = status
    run.finished_at = run.updated_at = run.heartbeat_at = moment
    session.flush()
    return run


def delete_run(*, session: Session, run_id: str) -> None:
    """Remove a run and everything stored under it."""
    session.execute(delete(PointRow).where(PointRow.run_id == run_id))
    session.execute(delete(DetectorStateRow).where(DetectorStateRow.run_id == run_id))
    session.execute(delete(MetricRow).where(MetricRow.run_id == run_id))
    session.execute(delete(RunRow).where(RunRow.id == run_id))
