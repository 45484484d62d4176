"""The tables, as SQLAlchemy 2 typed models.

Every table that grows with the data is keyed by `run_id` first, and every unique constraint
includes it, so the points table can be hash-partitioned or distributed (Citus) by run without
changing a query: each hot query names one run.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Double, ForeignKey, Index, Integer, MetaData, String
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

# Constraint names from a convention, so migrations can refer to them on SQLite and Postgres alike.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on both stores (SQLite keeps no zone; this puts UTC back)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class RunRow(Base):
    """A training run. Its id is chosen by the client so that `init` can resume it."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project: Mapped[str] = mapped_column(String(128), index=True)
    name: Mapped[str | None] = mapped_column(String(256))
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    tags: Mapped[list[str]] = mapped_column(JSON, default=list)
    status: Mapped[str] = mapped_column(String(16), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_step: Mapped[int | None] = mapped_column(BigInteger)


class MetricRow(Base):
    """A metric series of a run, with its latest value so run pages need not touch the points."""

    __tablename__ = "metrics"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    metric_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(256))
    count: Mapped[int] = mapped_column(BigInteger, default=0)
    first_step: Mapped[int | None] = mapped_column(BigInteger)
    last_step: Mapped[int | None] = mapped_column(BigInteger)
    last_value: Mapped[float | None] = mapped_column(Double)

    __table_args__ = (Index("uq_metrics_run_id_name", "run_id", "name", unique=True),)


class PointRow(Base):
    """One value of one metric at one step: identified by (run, metric, step), stored once.

    `value` is never absent; SQLite turns a stored NaN into NULL, so NULL reads back as NaN.
    `wall_time` is seconds since the epoch, as the client saw it. No foreign key: a per-row
    reference check would halve bulk-insert speed, and the store deletes a run's points itself.
    """

    __tablename__ = "points"

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    metric_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    value: Mapped[float | None] = mapped_column(Double)
    wall_time: Mapped[float | None] = mapped_column(Double)

