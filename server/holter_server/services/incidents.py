"""A run's incidents: its stored events grouped by the cause they share (`analysis/incidents.py`),
each with the rows of its leader and folded events."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from holter_server.analysis.incidents import Incident, group_incidents
from holter_server.services.kinds import run_metric_kinds
from holter_server.store import events as events_store
from holter_server.store import runs as runs_store
from holter_server.store.models import EventRow
from holter_server.vocabulary.severities import SEVERITIES, Level
from holter_server.vocabulary.statuses import EventStatus

# an alarm's severity as `store.events.SEVERITY_ORDER` counts it (rank + 1): warning and worse
ALARM_ORDER = next(s.rank for s in SEVERITIES if s.name == Level.WARNING) + 1
# the most events one run's incidents are grouped from (the latest steps first): a run with more is
# one whose list nobody reads event by event anyway
MAX_EVENTS = 5000


@dataclass(frozen=True)
class StoredIncident:
    """An incident with its stored events: `leader` first, then `folded` earliest first."""

    incident: Incident
    leader: EventRow
    folded: tuple[EventRow, ...]

    @property
    def rows(self) -> tuple[EventRow, ...]:
        return (self.leader, *self.folded)

    @property
    def status(self) -> str:
        """Open while any of its events is open, else the leader's."""
        return EventStatus.OPEN if any(row.status == EventStatus.OPEN for row in self.rows) else self.leader.status


def run_incidents(*, session: Session, run_id: str) -> list[StoredIncident]:
    """The run's incidents, the worst first (`group_incidents`'s order)."""
    rows = events_store.standing_events(session=session, run_id=run_id, limit=MAX_EVENTS)
    return grouped(session=session, run_id=run_id, rows=rows)


def grouped(*, session: Session, run_id: str, rows: Sequence[EventRow]) -> list[StoredIncident]:
    """These rows of one run grouped into incidents, each metric read as its declared kind."""
    run = runs_store.get_run(session=session, run_id=run_id)
    kinds = run_metric_kinds(session=session, run=run)
    incidents = group_incidents([events_store.event_of(row) for row in rows], kinds)
    return [
        StoredIncident(incident=inc, leader=rows[inc.leader], folded=tuple(rows[i] for i in inc.folded))
        for inc in incidents
    ]


def problems_of_runs(*, session: Session, run_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """Per run, its open problems by severity: the incidents its open warning and critical events
    make ({"critical": 1, "warning": 2}; {} for a run with none). What the runs list and the run's
    header count, so that one problem reads as one, however many events it made (issue 46)."""
    rows_by_run = events_store.open_alarms_of_runs(session=session, run_ids=run_ids, at_least=ALARM_ORDER)
    counts: dict[str, dict[str, int]] = {run_id: {} for run_id in run_ids}
    for run_id, rows in rows_by_run.items():
        for incident in group_incidents([events_store.event_of(row) for row in rows]):
            counts[run_id][incident.severity] = counts[run_id].get(incident.severity, 0) + 1
    return counts


def incident_of(*, session: Session, run_id: str, event: EventRow) -> StoredIncident | None:
    """The incident a stored event belongs to, among the run's standing events."""
    for found in run_incidents(session=session, run_id=run_id):
        if any(row.id == event.id for row in found.rows):
            return found
    return None
