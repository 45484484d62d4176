"""The lever finder over a set of runs: which configuration parameters change the structure of a
failure (the finding itself is `postmortem.levers`'; this module reads what it needs).

What it reads is bounded before it is read: at most `MAX_RUNS` runs, their configs together no
larger than `max_config_bytes` (their sizes asked of the database first) and their events no
more than `MAX_EVENTS` (counted first); more is refused (`TooManyPairsError`, a 413) without
loading any of it.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from holter_server.postmortem.levers import LeverReport, RunEvents, TooManyPairsError, find_levers
from holter_server.store import events as events_store
from holter_server.store import runs as runs_store
from holter_server.store.events import EventFilter
from holter_server.vocabulary.statuses import EventStatus

MAX_RUNS = 500
MAX_EVENTS = 200_000  # events of a metric across the selected runs (each run reads at most EVENTS_PER_RUN)
EVENTS_PER_RUN = 10_000


def levers(
    *,
    session: Session,
    project: str | None,
    tag: str | None,
    run_ids: list[str] | None,
    max_pairs: int | None = None,
    max_seconds: float | None = None,
    max_keys: int | None = None,
    max_config_bytes: int | None = None,
) -> LeverReport:
    """Find configuration levers across the selected runs (a project, a tag, or a list of ids)."""
    if run_ids is not None and len(set(run_ids)) > MAX_RUNS:
        raise TooManyPairsError(f"{len(set(run_ids)):,} runs named; the lever finder reads at most {MAX_RUNS}")
    sizes = runs_store.run_config_sizes(
        session=session,
        project=project,
        tag=tag,
        run_ids=list(dict.fromkeys(run_ids)) if run_ids else None,
        limit=MAX_RUNS,
    )
    if max_config_bytes is not None and (total := sum(sizes.values())) > max_config_bytes:
        raise TooManyPairsError(
            f"these {len(sizes)} runs' configs hold {total:,} bytes, more than {max_config_bytes:,} "
            "(HOLTER_MAX_LEVER_CONFIG_BYTES); select fewer runs"
        )
    if (events := events_store.count_metric_events_of_runs(session=session, run_ids=list(sizes))) > MAX_EVENTS:
        raise TooManyPairsError(
            f"these {len(sizes)} runs have {events:,} events, more than the lever finder reads ({MAX_EVENTS:,}); "
            "select fewer runs"
        )
    order = list(dict.fromkeys(run_ids)) if run_ids else list(sizes)
    found = runs_store.get_runs(session=session, run_ids=list(sizes))
    selected = []
    for run in (found[run_id] for run_id in order if run_id in found):
        rows, _ = events_store.list_events(
            session=session, where=EventFilter(run_id=run.id), limit=EVENTS_PER_RUN, offset=0
        )
        events = [
            {"metric": r.metric, "kind": r.kind, "start_step": r.start_step or 0, "period": r.period, "score": r.score}
            for r in rows
            if r.metric is not None and r.status != EventStatus.WITHDRAWN
        ]
        selected.append(RunEvents(run_id=run.id, config=run.config or {}, events=events))
    return find_levers(selected, max_pairs=max_pairs, max_seconds=max_seconds, max_keys=max_keys)
