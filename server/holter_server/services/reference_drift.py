"""A run against its reference run: one metric compared on request (the band and the drifts are
`postmortem.reference`'s), and the drift events of a finished run's losses, recorded by the
reference-drift loop after the client's finish (reading both runs' losses is too slow for the
finish request: up to a million points per loss)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from holter_server.detect.events import Event
from holter_server.postmortem.reference import Band, Drift, drifts
from holter_server.services import reads
from holter_server.services.detection import record_event
from holter_server.services.kinds import understood_metrics
from holter_server.store import references as references_store
from holter_server.store import runs as runs_store
from holter_server.store.database import session_scope
from holter_server.store.models import EventRow, RunRow
from holter_server.vocabulary.event_keys import reference_key
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.severities import Level
from holter_server.vocabulary.signals import LOSS_KINDS

COMPARE_POINTS = 1_000_000
# Finished runs compared per transaction: each may read millions of points.
DRIFT_RUNS_PER_TRANSACTION = 1


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
    return reads.read_curve(session=session, run_id=run_id, metric=metric, limit=COMPARE_POINTS)


class CompareTooLargeError(ValueError):
    """The comparison would read more points than one request may."""


def compare(
    *, session: Session, run_id: str, reference_id: str, metric: str, max_points: int | None = None
) -> Comparison | None:
    """The run's `metric` against the same metric of the reference run (None if either lacks it).
    `max_points`: refuse (CompareTooLargeError) when the two series hold more points than that together."""
    if max_points is not None:
        counts = [
            row.count
            for rid in (run_id, reference_id)
            if (row := runs_store.get_metric(session=session, run_id=rid, name=metric))
        ]
        if sum(counts) > max_points:
            raise CompareTooLargeError(
                f"comparing {metric!r} would read {sum(counts):,} points (run and reference), more than "
                f"{max_points:,} (HOLTER_MAX_COMPARE_POINTS)"
            )
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
    losses = sorted(
        name
        for name, understood in understood_metrics(session=session, run=run).items()
        if understood.kind in LOSS_KINDS
    )
    comparisons = {
        name: c
        for name in losses
        if (c := compare(session=session, run_id=run.id, reference_id=reference_id, metric=name))
    }
    recorded = []
    for name, comparison in comparisons.items():
        for drift in comparison.drifts:
            companions = {
                other: not any(d.start_step <= drift.end_step and drift.start_step <= d.end_step for d in c.drifts)
                for other, c in comparisons.items()
                if other != name
            }
            event = Event(
                kind=EventKind.REFERENCE_DRIFT,
                metric=name,
                start_step=drift.start_step,
                end_step=drift.end_step,
                severity=Level.WARNING,
                score=abs(drift.mean_gap),
                summary=drift.summary(companions),
                details={
                    "reference_run": reference_id,
                    "mean_gap": drift.mean_gap,
                    "direction": drift.direction,
                    "points": drift.points,
                    "companions": companions,
                },
            )
            recorded.append(
                record_event(
                    session=session, run_id=run.id, key=reference_key(name, drift.start_step), event=event, muted=False
                )
            )
    return recorded


def record_due_drifts(*, session_factory: sessionmaker[Session], limit: int = 10) -> int:
    """Compare up to `limit` runs finished since their last comparison with their reference, each
    in its own transaction (claimed, compared, its drift events recorded, marked done: a crash
    leaves it due); returns how many runs were compared."""
    done = 0
    while done < limit:
        with session_scope(session_factory) as session:
            claimed = runs_store.claim_drift_due(session=session, limit=DRIFT_RUNS_PER_TRANSACTION)
            for run in claimed:
                record_reference_drifts(session=session, run=run)
                runs_store.drift_done(session=session, run=run)
        if not claimed:
            break
        done += len(claimed)
    return done
