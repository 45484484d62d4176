"""The config keys a project's runs were created with: what the runs table offers as columns."""

from __future__ import annotations

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from holter_server.store.models.base import Base

# longer keys are not offered as columns (nobody picks a 512-character column)
MAX_CONFIG_KEY_LENGTH = 512


class ConfigKeyRow(Base):
    """One dotted config key (`optimizer.lr`) some run of the project was created or resumed with.

    The runs page chooses its config columns from these, a bounded page at a time, instead of
    reading every run's config to list them (200 runs of 10,000 keys each offered two million
    options and no table was drawn). Keys are added, never removed: a deleted run's keys stay
    offered until the project has no run left to show them for."""

    __tablename__ = "config_keys"

    project: Mapped[str] = mapped_column(String(128), primary_key=True)
    key: Mapped[str] = mapped_column(String(MAX_CONFIG_KEY_LENGTH), primary_key=True)
