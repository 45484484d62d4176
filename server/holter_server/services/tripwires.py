"""Tripwire reports from the training job, turned into events on the run.

A non-finite report (`POST /runs/{id}/nonfinite`) becomes one `first_nonfinite` event per step,
keyed by that step: the client resends it after a fault or from its spool, and the service keeps
the first one it stored. The event is attached to the divergence it explains as soon as that
divergence is known: here when it already is, otherwise by the live detection's refresh of the
run's findings (`services.detection.refresh_findings_of_runs`).

In a distributed job every rank reports its own episode: the rank whose batch held a NaN at step
80 reports it there, and the others a step later, when the all-reduce has spread it into their
weights. Their reports are one event, kept under the first report's key: the earliest report
(a forward origin before a gradient's at one step) is the origin, the rest are named as followers.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from holter_server.detect import DETECTOR_VERSION
from holter_server.detect.findings import nonfinite_origin
from holter_server.schemas.tripwires import NonFiniteReport
from holter_server.services.alerting import alert_on_event
from holter_server.services.detection import row_to_event
from holter_server.services.kinds import run_metric_kinds
from holter_server.store import claims
from holter_server.store import events as events_store
from holter_server.store import runs as runs_store
from holter_server.store.models import EventRow
from holter_server.vocabulary.event_keys import KeyPrefix, tripwire_key
from holter_server.vocabulary.events import EventKind

# Reports of different ranks this many steps apart are one episode (the all-reduce spreads a
# rank's NaN to the others' weights by the next step).
RANK_EPISODE_STEPS = 3


def record_nonfinite(*, session: Session, run_id: str, report: NonFiniteReport) -> EventRow:
    """Store the report's event (once per step, or once per episode across the ranks of a job)
    attached to a divergence when there is one."""
    key = tripwire_key("nonfinite", report.step)
    reports: dict[str, Any] | None = None
    if report.rank is not None:
        # the ranks report at once: one at a time per run, so each finds the others' episode
        claims.one_writer_at_a_time(session=session, task=claims.Task.TRIPWIRE, run_id=run_id)
        episode = _rank_episode(session, run_id, report.step)
        if episode is not None:
            reports = dict((episode.details or {}).get("rank_reports") or {})
            if str(report.rank) in reports:
                return episode
            key = episode.event_key
        reports = {**(reports or {}), str(report.rank): _report_of(report)}
    existing = events_store.get_event_by_key(session=session, run_id=run_id, event_key=key)
    if existing is not None and reports is None:
        return existing
    origin_rank, origin = _origin(reports) if reports else (None, _report_of(report))
    events = [row_to_event(row) for row in events_store.run_events_for_findings(session=session, run_id=run_id)]
    run = runs_store.get_run(session=session, run_id=run_id)
    event = nonfinite_origin(
        step=origin["step"],
        forward=origin["forward"],
        gradient=origin["gradient"],
        events=events,
        kinds=run_metric_kinds(session=session, run=run),
        origin_rank=origin_rank,
        rank_reports=reports,
    )
    muted = (event.metric, event.kind) in events_store.muted_kinds(session=session, run_id=run_id)
    if existing is not None:  # another rank's report of the same episode: one event, told again only if worse
        row, previous = events_store.upsert_event(
            session=session, run_id=run_id, event_key=key, event=event, detector_version=DETECTOR_VERSION, muted=muted
        )
        alert_on_event(session=session, event=row, previous_severity=previous)
        return row
    # stored once even when the same report races itself (a retry sent while the first is stored)
    row, created = events_store.insert_event_once(
        session=session, run_id=run_id, event_key=key, event=event, detector_version=DETECTOR_VERSION, muted=muted
    )
    if created:
        alert_on_event(session=session, event=row, previous_severity=None)
    return row


def _report_of(report: NonFiniteReport) -> dict[str, Any]:
    return {
        "step": report.step,
        "forward": report.forward.model_dump(exclude_defaults=True) if report.forward else None,
        "gradient": report.gradient.model_dump(exclude_defaults=True) if report.gradient else None,
    }


def _origin(reports: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The rank whose report starts the episode: the earliest step, a forward origin first."""
    rank = min(reports, key=lambda r: (reports[r]["step"], reports[r]["forward"] is None, int(r)))
    return int(rank), reports[rank]


def _rank_episode(session: Session, run_id: str, step: int) -> EventRow | None:
    """The run's tripwire event of ranks' reports within `RANK_EPISODE_STEPS` of `step`, if any."""
    for row in events_store.standing_events_of_kind(session=session, run_ids=[run_id], kind=EventKind.FIRST_NONFINITE):
        if not row.event_key.startswith(KeyPrefix.TRIPWIRE) or "rank_reports" not in (row.details or {}):
            continue
        steps = [int(r.get("step", row.start_step or 0)) for r in row.details["rank_reports"].values()]
        if min(steps) - RANK_EPISODE_STEPS <= step <= max(steps) + RANK_EPISODE_STEPS:
            return row
    return None
