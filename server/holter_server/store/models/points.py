"""Points: one value of one metric at one step."""

from __future__ import annotations

from sqlalchemy import BigInteger, Double, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from holter_server.store.models.base import Base


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
