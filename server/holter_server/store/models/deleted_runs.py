"""Runs deleted, remembered by id so that a job still writing one cannot bring it back."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from holter_server.store.models.base import Base, UTCDateTime


class DeletedRunRow(Base):
    """A run someone deleted: its id, project and when. A client that registers the id again (a
    job still running when its run was deleted re-registers it after a 404) is told the run was
    deleted (410) instead of making it anew with only the points logged after the delete."""

    __tablename__ = "deleted_runs"

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project: Mapped[str] = mapped_column(String(128))
    deleted_at: Mapped[datetime] = mapped_column(UTCDateTime())
