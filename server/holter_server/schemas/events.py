"""API schemas for events (what Holter found) and the decisions people make about them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from holter_server.schemas.points import Step
from holter_server.schemas.vocabulary import KindName
from holter_server.schemas.zoom import Zoomable
from holter_server.store.models import EventRow
from holter_server.vocabulary.severities import Level
from holter_server.vocabulary.statuses import EventStatus


class EventPublic(Zoomable):
    """A named anomaly with its evidence: where (steps), how bad (severity, score), and a sentence with the numbers."""

    id: int
    run_id: str
    metric: str | None = Field(description="null for run-level events (lifecycle)")
    kind: str
    severity: Level
    score: float
    start_step: int | None
    end_step: int | None
    peak_step: int | None
    period: float | None = Field(description="sawtooth and recurring mismatch: the period in steps")
    summary: str
    details: dict[str, Any]
    status: EventStatus
    status_by: str | None
    status_reason: str | None
    detector_version: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: EventRow) -> EventPublic:
        return cls(
            id=row.id,
            run_id=row.run_id,
            metric=row.metric,
            kind=row.kind,
            severity=row.severity,  # type: ignore[arg-type]
            score=row.score,
            start_step=row.start_step,
            end_step=row.end_step,
            peak_step=row.peak_step,
            period=row.period,
            summary=row.summary,
            details=row.details or {},
            status=row.status,
            status_by=row.status_by,  # type: ignore[arg-type]
            status_reason=row.status_reason,
            detector_version=row.detector_version,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


class EventsPublic(BaseModel):
    data: list[EventPublic]
    count: int


class EventDecision(BaseModel):
    """Why an event is acknowledged or dismissed (who: the key's name, or "local" with auth off)."""

    model_config = ConfigDict(extra="forbid")

    by: str | None = Field(
        default=None,
        max_length=128,
        description="ignored (kept for older clients): signed by the key's name, or 'local' with auth off",
    )
    reason: str | None = Field(default=None, max_length=4000)


class EventDismissal(EventDecision):
    """Dismiss an event; `mute` also silences later events of its kind on its metric in this run."""

    mute: bool = False


class AnalyzedSeries(BaseModel):
    metric: str
    kind: KindName  # type: ignore[valid-type]
    understood: dict[str, Any] = Field(
        description="how Holter knows what it is: source (declared, recognised, unknown), framework, rule"
    )
    verdict: str
    events: list[dict[str, Any]]


class RunAnalysis(BaseModel):
    """The batch classifier's reading of a whole run (nothing is stored)."""

    run_id: str
    series: list[AnalyzedSeries]
    findings: list[dict[str, Any]]


class JobAlert(BaseModel):
    """An alert the training job raises itself (`run.alert`, wandb's `wandb.alert`): stored as an
    event of kind `alert` and sent to chat by the rules that take that kind."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=256)
    text: str = Field(default="", max_length=4000)
    severity: Level = Level.INFO
    step: Step | None = Field(default=None, description="the run's step when it was raised")
    key: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.\-]+$",
        description="the client's id for this alert: a resent alert (retry, spool) is stored once",
    )
