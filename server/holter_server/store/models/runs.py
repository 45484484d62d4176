"""Runs and their metric series."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Double, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from holter_server.store.models.base import Base, UTCDateTime


class RunRow(Base):
    """A training run. Its id is chosen by the client so that `init` can resume it."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project: Mapped[str] = mapped_column(String(128), index=True)
    name: Mapped[str | None] = mapped_column(String(256))
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    tags: Mapped[list[str]] = mapped_column(JSON, default=list)
    notes: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # set when the run finishes, cleared once its losses were compared with its reference
    drift_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), index=True)
    last_step: Mapped[int | None] = mapped_column(BigInteger)
    # Batches of points stored, and how many of them live detection has read all of: a run is due
    # for detection while the first is ahead, so a pass never looks at the metrics of the runs a
    # lab has finished (store/events.py: `settle_detected_runs`, `claim_detection_work`).
    stored_batches: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    detected_batches: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # what was declared about its metrics, per name or glob: {"kind", "summary", "step_metric"}
    metric_definitions: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # what the client said sums the run up (wandb's `run.summary`): {"best_acc": 0.93, ...}
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # the code and machine it ran on, as the client recorded them at start: {"code": {...}, "environment": {...}}
    provenance: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # pre-flight checks the job ran before training, by name: {"checks": {"causal_mask": {...}}}
    preflight: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # when someone archived it: kept whole, left out of the runs list unless asked for (None: not archived)
    archived_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


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
