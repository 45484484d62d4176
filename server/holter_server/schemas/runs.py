"""API schemas for runs, named by role: what clients send (`RunCreate`), what they get (`RunPublic`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from holter_server.store.models import MetricRow, RunRow
from holter_server.wire import json_safe

RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
PROJECT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\- ]*$"


class RunCreate(BaseModel):
    """Create a run, or resume it when `id` names an existing one (the client picks the id)."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(default=None, min_length=1, max_length=64, pattern=RUN_ID_PATTERN,
                           description="client-chosen id; omitted: the service picks one")
    project: str = Field(default="default", min_length=1, max_length=128, pattern=PROJECT_PATTERN)
    name: str | None = Field(default=None, max_length=256)
    config: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list, max_length=64)


class RunUpdate(BaseModel):
    """Change a run's tags or notes (fields left out stay as they are)."""

    model_config = ConfigDict(extra="forbid")

    tags: list[str] | None = Field(default=None, max_length=64)
    notes: str | None = Field(default=None, max_length=20_000)


class RunFinish(BaseModel):
    """End a run: it finished, or the client saw it crash."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["finished", "crashed"] = "finished"


class MetricPublic(BaseModel):
    """A metric series of a run, with its latest value."""

    name: str
    count: int
    first_step: int | None
    last_step: int | None
    last_value: float | str | None = Field(description='latest value; non-finite values as "NaN", "Infinity", "-Infinity"')

    @classmethod
    def from_row(cls, row: MetricRow) -> MetricPublic:
        return cls(name=row.name, count=row.count, first_step=row.first_step, last_step=row.last_step, last_value=json_safe(row.last_value))


class RunPublic(BaseModel):
    """A run as the API shows it."""

    id: str
    project: str
    name: str | None
    config: dict[str, Any]
    tags: list[str]
    notes: str | None
    status: str = Field(description="running, finished, crashed or stalled")
    created_at: datetime
    updated_at: datetime
    heartbeat_at: datetime
    finished_at: datetime | None
    last_step: int | None
    health: str | None = Field(default=None, description="worst open event: healthy, info, warning or critical")
    open_events: int | None = None
    metrics: list[MetricPublic] | None = Field(default=None, description="present when one run is read")

    @classmethod
    def from_row(cls, row: RunRow, metrics: list[MetricRow] | None = None, health: tuple[str, int] | None = None) -> RunPublic:
        return cls(
            id=row.id, project=row.project, name=row.name, config=row.config or {}, tags=row.tags or [],
            notes=row.notes, status=row.status, health=health[0] if health else None,
            open_events=health[1] if health else None, created_at=row.created_at, updated_at=row.updated_at, heartbeat_at=row.heartbeat_at,
            finished_at=row.finished_at, last_step=row.last_step,
            metrics=None if metrics is None else [MetricPublic.from_row(m) for m in metrics],
        )


class RunCreated(RunPublic):
    """Answer to create-or-resume."""

    resumed: bool


class RunsPublic(BaseModel):
    """A page of runs and the total matching the filters."""

    data: list[RunPublic]
    count: int
