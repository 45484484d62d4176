"""API schemas for annotations: notes on a run, a step range of a metric, or an event."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, model_validator

from holter_server.schemas import MAX_BIGINT
from holter_server.schemas.zoom import Zoomable
from holter_server.store.models import AnnotationRow


class AnnotationCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    author: str | None = Field(
        default=None,
        max_length=128,
        description="ignored (kept for older clients): a note is signed by the key's name, or 'local' with auth off",
    )
    text: str = Field(min_length=1, max_length=10_000)
    metric: str | None = Field(default=None, max_length=256)
    start_step: int | None = Field(default=None, ge=0, le=MAX_BIGINT)
    end_step: int | None = Field(default=None, ge=0, le=MAX_BIGINT)
    event_id: int | None = Field(default=None, ge=1, le=2**31 - 1, description="comment on this event")

    @model_validator(mode="after")
    def _range_in_order(self) -> AnnotationCreate:
        if self.start_step is not None and self.end_step is not None and self.end_step < self.start_step:
            raise ValueError("end_step is before start_step")
        return self


class AnnotationUpdate(BaseModel):
    """Edit the text of one's own annotation."""

    model_config = ConfigDict(extra="forbid")

    author: str | None = Field(
        default=None,
        max_length=128,
        description="ignored (kept for older clients): a note is signed by the key's name, or 'local' with auth off",
    )
    text: str = Field(min_length=1, max_length=10_000)


class AnnotationPublic(Zoomable):
    id: int
    run_id: str
    metric: str | None
    start_step: int | None
    end_step: int | None
    event_id: int | None
    author: str
    text: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: AnnotationRow) -> AnnotationPublic:
        return cls(
            id=row.id,
            run_id=row.run_id,
            metric=row.metric,
            start_step=row.start_step,
            end_step=row.end_step,
            event_id=row.event_id,
            author=row.author,
            text=row.text,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


class AnnotationsPublic(BaseModel):
    data: list[AnnotationPublic]
    count: int
