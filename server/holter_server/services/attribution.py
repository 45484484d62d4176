"""What other runs and the run's own config say about an event.

* A period is matched against what the run's config implies (`analysis.periods`): the event's
  summary ends with "period 64 = rollouts_num" and `details["period_causes"]` lists the matches.
* A spike that recurs at the same step (±1) in runs with the same data order (`analysis.twins`)
  is the batch, not the optimiser: `details["twins"]` links them and `details["twin_note"]` says so.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy.orm import Session

from holter_server.analysis.periods import cause_note, period_causes
from holter_server.analysis.twins import SpikeAt, data_order_key, twin_note, twins_of
from holter_server.detect.events import Event
from holter_server.services import compare as compare_service
from holter_server.store import events as events_store
from holter_server.store import runs as runs_store
from holter_server.store.models import EventRow
from holter_server.vocabulary.events import EventKind

CAUSE_SEPARATOR = " — "


def explain_period(event: Event, config: dict[str, Any] | None) -> Event:
    """The event with the config's explanation of its period, when one matches (else unchanged)."""
    if not event.period or not config or "period_causes" in event.details:
        return event
    causes = period_causes(float(event.period), config)
    if not causes:
        return event
    note = cause_note(float(event.period), causes)
    details = {
        **event.details,
        "period_causes": [
            {
                "rule": c.rule,
                "implied": c.implied,
                "formula": c.formula,
                "exact": c.exact,
                "text": c.describe(float(event.period)),
            }
            for c in causes
        ],
        "period_note": note,
    }
    return replace(event, summary=f"{event.summary}{CAUSE_SEPARATOR}{note}", details=details)


TWIN_KIND = EventKind.SPIKE


def attribute_twin_spikes(*, session: Session, run_id: str) -> int:
    """Link the run's spikes with spikes at the same step (±1) in runs of its project with the same
    data order, on both sides, and clear links that no longer hold; returns the events rewritten."""
    run = runs_store.get_run(session=session, run_id=run_id)
    if run is None:
        return 0
    own = events_store.standing_events_of_kind(session=session, run_ids=[run_id], kind=TWIN_KIND)
    if not own:
        return 0
    declared = compare_service.declared_keys(session=session, project=run.project)
    key = data_order_key(run.config or {}, declared.seed_keys, declared.data_seed_keys)
    if key is None:
        return 0
    twins = [
        r
        for r in compare_service.project_runs(session=session, project=run.project)
        if r.id != run_id and data_order_key(r.config or {}, declared.seed_keys, declared.data_seed_keys) == key
    ]
    names = {r.id: r.name for r in twins} | {run.id: run.name}
    rows = list(own) + list(
        events_store.standing_events_of_kind(session=session, run_ids=[r.id for r in twins], kind=TWIN_KIND)
    )
    spikes = {row.id: SpikeAt(row.run_id, row.metric or "", _step(row), names.get(row.run_id)) for row in rows}
    own_spikes = [spikes[row.id] for row in own]
    changed = 0
    for row in rows:
        spike = spikes[row.id]
        # another run's spike is only looked at again when it sits by one of this run's
        if row.run_id != run_id and not twins_of(spike, own_spikes):
            continue
        found = twins_of(spike, spikes.values())
        changed += _rewrite(session, row, spike, found)
    return changed


def _step(row: EventRow) -> int:
    return int(row.peak_step if row.peak_step is not None else row.start_step or 0)


def _rewrite(session: Session, row: EventRow, spike: SpikeAt, twins: list[SpikeAt]) -> int:
    details = dict(row.details or {})
    summary = row.summary
    old = details.pop("twin_note", None)
    details.pop("twins", None)
    if old and summary.endswith(CAUSE_SEPARATOR + old):
        summary = summary[: -len(CAUSE_SEPARATOR + old)]
    if twins:
        note = twin_note(spike, twins)
        details["twins"] = [{"run_id": t.run_id, "run_name": t.run_name, "step": t.step} for t in twins]
        details["twin_note"] = note
        summary = f"{summary}{CAUSE_SEPARATOR}{note}"
    if summary == row.summary and details == (row.details or {}):
        return 0
    events_store.set_event_text(session=session, event=row, summary=summary, details=details)
    return 1
