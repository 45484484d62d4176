"""Annotations: people's notes on a run, a step range of a metric, or an event."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, ForeignKeyConstraint, Index, Integer, PrimaryKeyConstraint, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from holter_server.store.models.base import Base, UTCDateTime


class AnnotationRow(Base):
    """A note by `author`. With `event_id` it is a comment on that event of the same run: the
    foreign key is (run_id, event_id), so notes live beside their run's events on any shard."""

    __tablename__ = "annotations"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    id: Mapped[int] = mapped_column(Integer, autoincrement=True)
    metric: Mapped[str | None] = mapped_column(String(256))
    start_step: Mapped[int | None] = mapped_column(BigInteger)
    end_step: Mapped[int | None] = mapped_column(BigInteger)
    event_id: Mapped[int | None] = mapped_column(Integer)
    author: Mapped[str] = mapped_column(String(128))
    key_id: Mapped[int | None] = mapped_column(Integer)  # the API key that wrote it; only it may change it
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        PrimaryKeyConstraint("run_id", "id"),
        ForeignKeyConstraint(["run_id", "event_id"], ["events.run_id", "events.id"], ondelete="CASCADE"),
        Index("ix_annotations_run_id", "run_id"),
    )
