"""Rollups: per metric, summaries of power-of-two step buckets, kept current on ingest."""

from __future__ import annotations

from sqlalchemy import BigInteger, Double, ForeignKeyConstraint, Integer, SmallInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from holter_server.store.models.base import Base


class RollupRow(Base):
    """What the points of one step bucket add up to: bucket `b` of level `L` holds steps
    `b * 2**L` to `(b + 1) * 2**L - 1`.

    Chart reads merge these instead of scanning points, so a read touches a bounded number of
    rows however long the run. The extremes keep their steps (`min_step`, `max_step`) so a
    downsampled chart draws a spike where it happened. `min_value`, `max_value` and `finite_sum`
    are over finite values only; NaN, +Inf and -Inf are counted apart so no average hides them.
    `first_value` and `last_value` are the values at `first_step` and `last_step` as stored
    (NaN reads back from SQLite as NULL). Rows go when their metric goes (the cascade), so a
    run deleted and logged again starts from clean sums.
    """

    __tablename__ = "rollups"

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    metric_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    level: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    bucket: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    count: Mapped[int] = mapped_column(BigInteger)
    finite_sum: Mapped[float] = mapped_column(Double)
    min_value: Mapped[float | None] = mapped_column(Double)
    min_step: Mapped[int | None] = mapped_column(BigInteger)
    max_value: Mapped[float | None] = mapped_column(Double)
    max_step: Mapped[int | None] = mapped_column(BigInteger)
    first_step: Mapped[int] = mapped_column(BigInteger)
    first_value: Mapped[float | None] = mapped_column(Double)
    last_step: Mapped[int] = mapped_column(BigInteger)
    last_value: Mapped[float | None] = mapped_column(Double)
    nan_count: Mapped[int] = mapped_column(BigInteger)
    posinf_count: Mapped[int] = mapped_column(BigInteger)
    neginf_count: Mapped[int] = mapped_column(BigInteger)

    __table_args__ = (
        ForeignKeyConstraint(["run_id", "metric_id"], ["metrics.run_id", "metrics.metric_id"], ondelete="CASCADE"),
    )
