"""API schemas for incidents: a run's events grouped by the cause they share, led by the root cause."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from holter_server.schemas.events import EventPublic
from holter_server.schemas.zoom import Zoomable
from holter_server.vocabulary.severities import Level
from holter_server.vocabulary.statuses import EventStatus

if TYPE_CHECKING:
    from holter_server.services.incidents import StoredIncident


class IncidentPublic(Zoomable):
    """One problem: the event that is its root cause, the events that follow from it, and a
    sentence that says the cause."""

    id: int = Field(description="the leader event's id")
    rule: str = Field(
        description="what grouped it: nonfinite (a tripwire and what followed), episode (divergences "
        "of one episode), bad_batch (loss and gradient norm spiking at one step), sawtooth (one period "
        "with its teeth and pauses), single (an event sharing no cause)"
    )
    title: str
    cause: str = Field(description="the root cause in a sentence, then what followed from it")
    severity: Level
    status: EventStatus = Field(description="open while any of its events is open, else the leader's")
    start_step: int | None
    end_step: int | None
    leader: EventPublic
    folded: list[EventPublic] = Field(description="the events that follow from the leader, earliest first")

    @classmethod
    def from_stored(cls, stored: StoredIncident) -> IncidentPublic:
        inc = stored.incident
        return cls(
            id=stored.leader.id,
            rule=inc.rule,
            title=inc.title,
            cause=inc.cause,
            severity=inc.severity,  # type: ignore[arg-type]
            status=stored.status,  # type: ignore[arg-type]
            start_step=inc.start_step,
            end_step=inc.end_step,
            leader=EventPublic.from_row(stored.leader),
            folded=[EventPublic.from_row(row) for row in stored.folded],
        )


class IncidentsPublic(BaseModel):
    data: list[IncidentPublic]
    count: int = Field(description="how many incidents")
    events: int = Field(description="how many events they group")
