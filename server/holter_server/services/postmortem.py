"""Post-mortem services: the lever finder over a set of runs, and comparison with a reference run."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy.orm import Session

from holter_server.detect.events import Event
from holter_server.detect.kinds import recognised_kind
from holter_server.postmortem.levers import LeverReport, RunEvents, find_levers
from holter_server.postmortem.reference import Band, Drift, drifts
from holter_server.postmortem.summary import write_summary
from holter_server.schemas.annotations import AnnotationPublic
from holter_server.schemas.events import EventPublic
from holter_server.schemas.runs import RunPublic
from holter_server.services import reads
from holter_server.services.detection import record_event
from holter_server.store import annotations as annotations_store
from holter_server.store import events as events_store
from holter_server.store import points as points_store
from holter_server.store import references as references_store
from holter_server.store import runs as runs_store
from holter_server.store.events import EventFilter
from holter_server.store.models import EventRow, RunRow

MAX_RUNS = 500
COMPARE_POINTS = 1_000_000


def levers(*, session: Session, project: str | None, tag: str | None, run_ids: list[str] | None) -> LeverReport:
    """Find configuration levers across the selected runs (a project, a tag, or a list of ids)."""
    if run_ids:
        runs = [run for run_id in run_ids if (run := runs_store.get_run(session=session, run_id=run_id)) is not None]
    else:
        runs = list(runs_store.list_runs(session=session, project=project, status=None, tag=tag, limit=MAX_RUNS, offset=0)[0])
    selected = []
    for run in runs:
        rows, _ = events_store.list_events(session=session, where=EventFilter(run_id=run.id), limit=10_000, offset=0)
        events = [{"metric": r.metric, "kind": r.kind, "start_step": r.start_step or 0, "period": r.period, "score": r.score}
                  for r in rows if r.metric is not None and r.status != "withdrawn"]
        selected.append(RunEvents(run_id=run.id, config=run.config or {}, events=events))
    return find_levers(selected)


@dataclass
class Comparison:
    """One metric of a run against its reference."""

    metric: str
    reference_id: str
    run_steps: list[int]
    run_values: list[float]
    band: Band
    drifts: list[Drift]


def _series(session: Session, run_id: str, metric: str) -> tuple[np.ndarray, np.ndarray] | None:
    row = runs_store.get_metric(session=session, run_id=run_id, name=metric)
    if row is None:
        return None
    points = points_store.read_points(session=session, run_id=run_id, metric_id=row.metric_id, start=None, end=None, limit=COMPARE_POINTS)
    return np.asarray(points.steps, dtype=np.int64), np.asarray(points.values, dtype=float)


def compare(*, session: Session, run_id: str, reference_id: str, metric: str) -> Comparison | None:
    """The run's `metric` against the same metric of the reference run (None if either lacks it)."""
    ours, theirs = _series(session, run_id, metric), _series(session, reference_id, metric)
    if ours is None or theirs is None or not len(ours[0]) or not len(theirs[0]):
        return None
    band, found = drifts(metric, theirs[0], theirs[1], ours[0], ours[1])
    return Comparison(metric, reference_id, ours[0].tolist(), ours[1].tolist(), band, found)


def record_reference_drifts(*, session: Session, run: RunRow) -> list[EventRow]:
    """Compare a finished run's losses with its reference and record each drift as an event.

    The summary says whether the other losses still match over the same steps: an eval loss
    drifting while the train loss matches is the signature of a silent bug.
    """
    reference_id = references_store.reference_for(session=session, run=run)
    if reference_id is None:
        return []
    losses = [m.name for m in runs_store.list_metrics(session=session, run_id=run.id) if recognised_kind(m.name) in ("loss", "eval_loss")]
    comparisons = {name: c for name in losses if (c := compare(session=session, run_id=run.id, reference_id=reference_id, metric=name))}
    recorded = []
    for name, comparison in comparisons.items():
        for drift in comparison.drifts:
            companions = {
                other: not any(d.start_step <= drift.end_step and drift.start_step <= d.end_step for d in c.drifts)
                for other, c in comparisons.items() if other != name
            }
            event = Event(kind="reference_drift", metric=name, start_step=drift.start_step, end_step=drift.end_step,
                          severity="warning", score=abs(drift.mean_gap), summary=drift.summary(companions),
                          details={"reference_run": reference_id, "mean_gap": drift.mean_gap, "direction": drift.direction,
                                   "points": drift.points, "companions": companions})
            recorded.append(record_event(session=session, run_id=run.id, key=f"reference:{name}@{drift.start_step}", event=event, muted=False))
    return recorded


def timeline(*, session: Session, run_id: str) -> list[EventRow]:
    """Every event of the run that still stands, in step order (status changes included)."""
    rows, _ = events_store.list_events(session=session, where=EventFilter(run_id=run_id), limit=100_000, offset=0)
    return sorted(rows, key=lambda r: (r.start_step if r.start_step is not None else -1, r.created_at, r.id))


def summary_of(*, run: RunRow, events: list[EventRow]) -> str:
    """The written summary of the run from its events."""
    facts = [{"kind": e.kind, "metric": e.metric, "start_step": e.start_step, "end_step": e.end_step, "severity": e.severity,
              "score": e.score, "summary": e.summary, "status": e.status, "period": e.period, "details": e.details or {}} for e in events]
    return write_summary(name=run.name or run.id, status=run.status, last_step=run.last_step, events=facts)


REPORT_POINTS = 2_000


def report_html(*, session: Session, run: RunRow) -> str:
    """The run's self-contained HTML report (needs plotly)."""
    from holter_server.postmortem.report import render_report  # plotly: only where reports are made

    events = timeline(session=session, run_id=run.id)
    metrics = list(runs_store.list_metrics(session=session, run_id=run.id))
    series = {}
    for metric in metrics:
        read = reads.read_series(session=session, metric=metric, start=None, end=None, max_points=REPORT_POINTS, plain_cap=REPORT_POINTS)
        series[metric.name] = (read.steps, read.values)
    return render_report(
        run=RunPublic.from_row(run).model_dump(mode="json"),
        summary=summary_of(run=run, events=events),
        timeline=[EventPublic.from_row(e).model_dump(mode="json") for e in events],
        annotations=[AnnotationPublic.from_row(a).model_dump(mode="json") for a in annotations_store.list_annotations(session=session, run_id=run.id)],
        series=series,
    )
