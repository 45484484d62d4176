"""Alerting: channels (where messages go), rules (which events notify which channel), and the
delivery outbox (what to send, written in the same transaction as the event it reports)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Double, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from holter_server.store.models.base import Base, UTCDateTime
from holter_server.vocabulary.severities import DEFAULT_MIN_SEVERITY

CHANNEL_KINDS = ("slack", "discord", "teams", "webhook", "apprise")
DELIVERY_STATUSES = ("pending", "delivered", "failed")


class ChannelRow(Base):
    """A chat destination. `target` (the webhook URL) and `signing_secret` are secrets: stored,
    never returned by the API in full."""

    __tablename__ = "channels"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(16))
    project: Mapped[str | None] = mapped_column(String(128), index=True)
    target: Mapped[str] = mapped_column(Text)
    signing_secret: Mapped[str | None] = mapped_column(Text)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class AlertRuleRow(Base):
    """Which events notify a channel: filters on project, run tag, metric pattern, kinds and
    minimum severity, or a threshold on a metric's values."""

    __tablename__ = "alert_rules"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    channel_id: Mapped[int] = mapped_column(ForeignKey("channels.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(128))
    project: Mapped[str | None] = mapped_column(String(128))
    run_tag: Mapped[str | None] = mapped_column(String(128))
    metric_pattern: Mapped[str | None] = mapped_column(String(256))
    kinds: Mapped[list[str] | None] = mapped_column(JSON)
    min_severity: Mapped[str] = mapped_column(String(16), default=DEFAULT_MIN_SEVERITY)
    threshold_op: Mapped[str | None] = mapped_column(String(16))
    threshold_value: Mapped[float | None] = mapped_column(Double)
    cooldown_s: Mapped[float] = mapped_column(Double, default=300.0)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class DeliveryRow(Base):
    """One message owed to a channel. `idempotency_key` travels with every attempt so that a
    receiver can drop a repeat after a crash between sending and recording it.

    The outbox belongs to its channel, not to a run: a test message has no run, and a delivery
    outlives the run it reported (it is the channel's history). So it is one small table that
    stays whole (on Citus, a local table on the coordinator, where the dispatcher claims rows with
    SKIP LOCKED), and `run_id`/`event_id` name the event it reports without a foreign key: a key
    into events (keyed by run) is one such a table cannot hold.
    """

    __tablename__ = "deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    channel_id: Mapped[int] = mapped_column(ForeignKey("channels.id", ondelete="CASCADE"))
    rule_id: Mapped[int | None] = mapped_column(ForeignKey("alert_rules.id", ondelete="SET NULL"))
    run_id: Mapped[str | None] = mapped_column(String(64))
    event_id: Mapped[int | None] = mapped_column(Integer)
    purpose: Mapped[str] = mapped_column(String(16), default="alert")  # alert, resolved, test
    idempotency_key: Mapped[str] = mapped_column(String(128), unique=True)
    alert: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    not_before: Mapped[datetime] = mapped_column(UTCDateTime())
    last_error: Mapped[str | None] = mapped_column(Text)
    group_key: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        Index("ix_deliveries_status_not_before", "status", "not_before"),
        Index("ix_deliveries_rule_id_run_id", "rule_id", "run_id"),
    )
