"""Reference runs: the trusted run a project (or a tag within it) is compared against."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from holter_server.store.models.base import Base, UTCDateTime


class ReferenceRow(Base):
    """`tag` is "" for the project-wide reference.

    A small table keyed by (project, tag), like projects' other settings (a reference table on
    Citus): `run_id` has no foreign key into runs, which are distributed by run; the store
    removes a run's references when it deletes the run.
    """

    __tablename__ = "references"

    project: Mapped[str] = mapped_column(String(128), primary_key=True)
    tag: Mapped[str] = mapped_column(String(128), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(64))
    set_by: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
