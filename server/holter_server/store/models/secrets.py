"""Secrets the service makes for itself, shared by every process on the store."""

from __future__ import annotations

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from holter_server.store.models.base import Base


class ServiceSecretRow(Base):
    """One named secret (e.g. `image_links`: the key that signs chart links in chat messages)."""

    __tablename__ = "service_secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(128))
