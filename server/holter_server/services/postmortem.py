"""The post-mortem of one run: its timeline, written summary and self-contained HTML report.
(The lever finder is services/levers.py; comparison with a reference, services/reference_drift.py.)"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from holter_server import vocabulary
from holter_server.postmortem.summary import write_summary
from holter_server.schemas.annotations import AnnotationPublic
from holter_server.schemas.events import EventPublic
from holter_server.schemas.runs import RunPublic
from holter_server.services import reads
from holter_server.services.incidents import grouped
from holter_server.services.kinds import metric_kinds_of, run_metric_kinds, understood_metrics
from holter_server.services.seed_standing import SeedStanding, seed_standing
from holter_server.store import annotations as annotations_store
from holter_server.store import events as events_store
from holter_server.store import runs as runs_store
from holter_server.store.events import EventFilter
from holter_server.store.models import EventRow, RunRow


def timeline(*, session: Session, run_id: str) -> list[EventRow]:
    """Every event of the run that still stands, in step order (status changes included)."""
    rows, _ = events_store.list_events(session=session, where=EventFilter(run_id=run_id), limit=100_000, offset=0)
    return sorted(rows, key=lambda r: (r.start_step if r.start_step is not None else -1, r.created_at, r.id))


def summary_of(
    *,
    session: Session,
    run: RunRow,
    events: list[EventRow],
    seeds: SeedStanding | None = None,
    max_group_points: int | None = None,
) -> str:
    """The written summary of the run from its events, with a clause on its seed group when it
    has one (`seeds`: the run's standing when the caller read it already; else read, its siblings
    refused past `max_group_points` points per metric)."""
    kinds = run_metric_kinds(session=session, run=run)
    seeds = (
        seeds
        if seeds is not None
        else seed_standing(session=session, run=run, kinds=kinds, max_points=max_group_points)
    )
    facts = [
        {
            "kind": e.kind,
            "metric": e.metric,
            "start_step": e.start_step,
            "end_step": e.end_step,
            "severity": e.severity,
            "score": e.score,
            "summary": e.summary,
            "status": e.status,
            "period": e.period,
            "details": e.details or {},
        }
        for e in events
    ]
    incidents = [
        {
            "rule": found.incident.rule,
            "cause": found.incident.cause,
            "severity": found.incident.severity,
            "start_step": found.incident.start_step,
            "status": found.status,
            "event_ids": [events_store.event_of(r).event_id for r in found.rows],
        }
        for found in grouped(session=session, run_id=run.id, rows=events)
    ]
    return write_summary(
        name=run.name or run.id,
        status=run.status,
        last_step=run.last_step,
        events=facts,
        kinds=kinds,
        seed_clause=seeds.clause,
        incidents=incidents,
    )


REPORT_POINTS = 2_000
REPORT_METRICS = 200  # metrics drawn in a report (by name); the rest are in its export


def report_html(*, session: Session, run: RunRow, max_events: int = 200, max_group_points: int | None = None) -> str:
    """The run's self-contained HTML report (needs plotly): at most REPORT_METRICS metrics drawn,
    `max_events` events marked on them, its seed siblings read up to `max_group_points` points
    per metric."""
    from holter_server.postmortem.report import render_report  # plotly: only where reports are made

    events = timeline(session=session, run_id=run.id)
    metrics = list(runs_store.list_metrics(session=session, run_id=run.id))[:REPORT_METRICS]
    series = {}
    for metric in metrics:
        read = reads.read_series(
            session=session, metric=metric, start=None, end=None, max_points=REPORT_POINTS, plain_cap=REPORT_POINTS
        )
        series[metric.name] = (read.steps, read.values)
    understood = understood_metrics(session=session, run=run)
    kinds = metric_kinds_of(understood, run)
    seeds = seed_standing(session=session, run=run, kinds=kinds, max_points=max_group_points)
    return render_report(
        run=RunPublic.from_row(run, metrics, understood=understood).model_dump(mode="json"),
        summary=summary_of(session=session, run=run, events=events, seeds=seeds),
        timeline=[EventPublic.from_row(e).model_dump(mode="json") for e in events],
        annotations=[
            AnnotationPublic.from_row(a).model_dump(mode="json")
            for a in annotations_store.list_annotations(session=session, run_id=run.id)
        ],
        series=series,
        vocabulary=vocabulary.as_dict(),
        max_drawn_events=max_events,
        seed_group=seed_group_of(seeds),
    )


def seed_group_of(seeds: SeedStanding) -> dict[str, Any]:
    """The report's seed group as plain data: its sentences, its runs, and each metric's band."""
    return {
        "sentences": seeds.sentences(),
        "runs": [{"id": r.id, "name": r.name} for r in seeds.siblings],
        "bands": {
            m.metric: {
                "steps": m.band.steps.tolist(),
                "median": m.band.median.tolist(),
                "low": m.band.low.tolist(),
                "high": m.band.high.tolist(),
                "seeds": m.standing.seeds,
            }
            for m in seeds.metrics
        },
    }
