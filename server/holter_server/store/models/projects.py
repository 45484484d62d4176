"""What a project declares about its runs' configs."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, String
from sqlalchemy.orm import Mapped, mapped_column

from holter_server.store.models.base import Base, UTCDateTime


class ProjectSettingsRow(Base):
    """A project's own seed keys (beyond `seed`, `data_seed`, `*_seed`) and which of them set the
    data order: seed groups and twin runs read configs through them."""

    __tablename__ = "project_settings"

    project: Mapped[str] = mapped_column(String(128), primary_key=True)
    seed_keys: Mapped[list[str]] = mapped_column(JSON, default=list)
    data_seed_keys: Mapped[list[str]] = mapped_column(JSON, default=list)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
