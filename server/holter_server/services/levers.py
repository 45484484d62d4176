"""The lever finder over a set of runs: which configuration parameters change the structure of a
failure (the finding itself is `postmortem.levers`'; this module reads what it needs)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from holter_server.postmortem.levers import LeverReport, RunEvents, find_levers
from holter_server.store import events as events_store
from holter_server.store import runs as runs_store
from holter_server.store.events import EventFilter

MAX_RUNS = 500


def levers(
    *,
    session: Session,
    project: str | None,
    tag: str | None,
    run_ids: list[str] | None,
    max_pairs: int | None = None,
    max_seconds: float | None = None,
) -> LeverReport:
    """Find configuration levers across the selected runs (a project, a tag, or a list of ids)."""
    if run_ids:
        runs = [run for run_id in run_ids if (run := runs_store.get_run(session=session, run_id=run_id)) is not None]
    else:
        runs = list(
            runs_store.list_runs(session=session, project=project, status=None, tag=tag, limit=MAX_RUNS, offset=0)[0]
        )
    selected = []
    for run in runs:
        rows, _ = events_store.list_events(session=session, where=EventFilter(run_id=run.id), limit=10_000, offset=0)
        events = [
            {"metric": r.metric, "kind": r.kind, "start_step": r.start_step or 0, "period": r.period, "score": r.score}
            for r in rows
            if r.metric is not None and r.status != "withdrawn"
        ]
        selected.append(RunEvents(run_id=run.id, config=run.config or {}, events=events))
    return find_levers(selected, max_pairs=max_pairs, max_seconds=max_seconds)
