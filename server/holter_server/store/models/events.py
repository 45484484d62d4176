"""Events (what the detectors and the lifecycle found), mutes, and detector state."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Double,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from holter_server.store.models.base import Base, UTCDateTime
from holter_server.vocabulary.statuses import EventStatus


class EventRow(Base):
    """A named anomaly on a run: on one metric, across signals, or in the run's lifecycle.

    `event_key` is the detector's stable identity for the event ("loss:spike@1204"), so an
    event that keeps growing is updated in place, never duplicated. Keyed by (run_id, id) so the
    table can be partitioned or distributed by run; `id` still comes from one sequence on
    Postgres (from `store.database.next_id` on SQLite), so it is unique on its own too.
    """

    __tablename__ = "events"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    id: Mapped[int] = mapped_column(Integer, autoincrement=True)
    event_key: Mapped[str] = mapped_column(String(400))
    metric: Mapped[str | None] = mapped_column(String(256))
    kind: Mapped[str] = mapped_column(String(32))
    severity: Mapped[str] = mapped_column(String(16))
    score: Mapped[float] = mapped_column(Double)
    start_step: Mapped[int | None] = mapped_column(BigInteger)
    end_step: Mapped[int | None] = mapped_column(BigInteger)
    peak_step: Mapped[int | None] = mapped_column(BigInteger)
    period: Mapped[float | None] = mapped_column(Double)
    summary: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(16), default=EventStatus.OPEN.value)
    status_by: Mapped[str | None] = mapped_column(String(128))
    status_reason: Mapped[str | None] = mapped_column(Text)
    status_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    detector_version: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        PrimaryKeyConstraint("run_id", "id"),
        Index("uq_events_run_id_event_key", "run_id", "event_key", unique=True),
        Index("ix_events_run_id_status", "run_id", "status"),
        Index("ix_events_created_at", "created_at"),
    )


class MuteRow(Base):
    """A kind of event silenced for one metric of one run: later events arrive already muted."""

    __tablename__ = "mutes"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    metric: Mapped[str] = mapped_column(String(256), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_by: Mapped[str | None] = mapped_column(String(128))
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class DetectorStateRow(Base):
    """Where live detection of one metric stands: the detector's saved state and the last step fed.

    Saved in the same transaction as the events it produced, so a restart neither misses nor
    repeats an event.
    """

    __tablename__ = "detector_states"

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    metric_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    detected_step: Mapped[int] = mapped_column(BigInteger, default=-1)
    detector_version: Mapped[str | None] = mapped_column(String(16))
    state: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())

    # a state goes with its metric (and so with its run), like the metric's rollups
    __table_args__ = (
        ForeignKeyConstraint(["run_id", "metric_id"], ["metrics.run_id", "metrics.metric_id"], ondelete="CASCADE"),
    )
