"""The ranks of a distributed job's run: who joined, where each stands, what each last said."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Double, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from holter_server.store.models.base import Base, UTCDateTime


class RankRow(Base):
    """One rank of a run made by a distributed job, updated in place by each of its beats.

    A job of a thousand ranks is a thousand small rows, one per rank, each rewritten every few
    seconds by its own rank: no two ranks write the same row, and no beat touches the run's row.
    `status` is the rank's own (running, finished, crashed: `RunStatus` values); `step` is the
    step it is in, `step_at` when that step last moved (the service's clock: the beat's arrival
    less the quiet time the rank reported), `collective` the collective it is inside (with
    `collective_since`) and `stack` its main thread's top frames when its step stopped moving.
    `timing` holds the medians of its last steps (whole step, wait in collectives, own work).
    """

    __tablename__ = "run_ranks"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    rank: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    world_size: Mapped[int | None] = mapped_column(Integer)
    local_rank: Mapped[int | None] = mapped_column(Integer)
    node_rank: Mapped[int | None] = mapped_column(Integer)
    host: Mapped[str | None] = mapped_column(String(256))
    pid: Mapped[int | None] = mapped_column(BigInteger)
    launcher: Mapped[str | None] = mapped_column(String(32))
    job: Mapped[str | None] = mapped_column(String(256))
    restart: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    joined_at: Mapped[datetime] = mapped_column(UTCDateTime())
    beat_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    beat_interval: Mapped[float | None] = mapped_column(Double)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    step: Mapped[int | None] = mapped_column(BigInteger)
    step_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    collective: Mapped[str | None] = mapped_column(String(128))
    collective_since: Mapped[datetime | None] = mapped_column(UTCDateTime())
    stack: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    timing: Mapped[dict[str, Any] | None] = mapped_column(JSON)
