"""API schemas for alert channels, rules and deliveries. Secrets go in, never come out."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from holter_server.alerts.message import stored_alert
from holter_server.store.models import AlertRuleRow, ChannelRow, DeliveryRow
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.severities import DEFAULT_MIN_SEVERITY, Level

ChannelKind = Literal["slack", "discord", "teams", "webhook", "apprise"]


def mask_secret(target: str) -> str:
    """Enough of a webhook URL to recognise it, never enough to use it: scheme, host, last 4 characters."""
    parts = urlsplit(target)
    tail = target[-4:] if len(target) > 12 else ""
    if parts.scheme and parts.hostname:
        return f"{parts.scheme}://{parts.hostname}/…{tail}"
    return f"…{tail}"


class ChannelCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128)
    kind: ChannelKind
    target: str = Field(
        min_length=1,
        max_length=2000,
        description="the webhook URL (an Apprise URL for kind apprise); stored, never shown again",
    )
    signing_secret: str | None = Field(
        default=None, min_length=16, max_length=256, description="webhook kind: HMAC-SHA256 key"
    )
    project: str | None = Field(
        default=None, max_length=128, description="only this project's alerts (default: every project)"
    )
    default_rules: bool = Field(
        default=True, description="start with divergence/NaN, stalled/crashed and logprob-mismatch rules"
    )

    @model_validator(mode="after")
    def _target_fits_kind(self) -> ChannelCreate:
        if self.kind != "apprise" and urlsplit(self.target).scheme not in ("http", "https"):
            raise ValueError("target must be an http(s) URL")
        if self.signing_secret is not None and self.kind != "webhook":
            raise ValueError("only webhook channels are signed")
        return self


class ChannelPublic(BaseModel):
    id: int
    name: str
    kind: str
    project: str | None
    target: str = Field(description="masked")
    signed: bool
    enabled: bool
    created_at: datetime

    @classmethod
    def from_row(cls, row: ChannelRow) -> ChannelPublic:
        return cls(
            id=row.id,
            name=row.name,
            kind=row.kind,
            project=row.project,
            target=mask_secret(row.target),
            signed=bool(row.signing_secret),
            enabled=row.enabled,
            created_at=row.created_at,
        )


class RuleCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # a JSON number and nothing else (strict): "1", 1.0 or true must not become channel 1 after the
    # gate found no channel by that spelling (api/gate.py)
    channel_id: int = Field(ge=1, le=2**31 - 1, strict=True)
    name: str = Field(min_length=1, max_length=128)
    project: str | None = Field(default=None, max_length=128)
    run_tag: str | None = Field(default=None, max_length=128)
    metric_pattern: str | None = Field(default=None, max_length=256, description="glob, e.g. 'loss*' or 'act_norm/*'")
    kinds: list[EventKind] | None = Field(
        default=None,
        description="event kinds (any when empty), including run_stalled, run_crashed (GET /vocabulary lists them)",
    )
    min_severity: Level = DEFAULT_MIN_SEVERITY
    threshold_op: Literal["above", "below", "nonfinite"] | None = Field(
        default=None, description="a threshold rule instead of an event rule"
    )
    threshold_value: float | None = None
    cooldown_s: float = Field(default=300.0, ge=0, le=86_400)

    @model_validator(mode="after")
    def _threshold_complete(self) -> RuleCreate:
        if self.threshold_op in ("above", "below") and self.threshold_value is None:
            raise ValueError(f"threshold_op {self.threshold_op!r} needs a threshold_value")
        if self.threshold_op is None and self.threshold_value is not None:
            raise ValueError("threshold_value needs a threshold_op")
        return self


class RuleUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool


class RulePublic(BaseModel):
    id: int
    channel_id: int
    name: str
    project: str | None
    run_tag: str | None
    metric_pattern: str | None
    kinds: list[str] | None
    min_severity: str
    threshold_op: str | None
    threshold_value: float | None
    cooldown_s: float
    enabled: bool

    @classmethod
    def from_row(cls, row: AlertRuleRow) -> RulePublic:
        return cls(
            id=row.id,
            channel_id=row.channel_id,
            name=row.name,
            project=row.project,
            run_tag=row.run_tag,
            metric_pattern=row.metric_pattern,
            kinds=row.kinds,
            min_severity=row.min_severity,
            threshold_op=row.threshold_op,
            threshold_value=row.threshold_value,
            cooldown_s=row.cooldown_s,
            enabled=row.enabled,
        )


class DeliveryPublic(BaseModel):
    id: int
    channel_id: int
    rule_id: int | None
    run_id: str | None
    event_id: int | None
    purpose: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    last_error: str | None
    idempotency_key: str
    summary: str
    created_at: datetime
    not_before: datetime
    delivered_at: datetime | None

    @classmethod
    def from_row(cls, row: DeliveryRow) -> DeliveryPublic:
        summary = stored_alert(row.alert).event.summary if row.alert else ""
        return cls(
            id=row.id,
            channel_id=row.channel_id,
            rule_id=row.rule_id,
            run_id=row.run_id,
            event_id=row.event_id,
            purpose=row.purpose,
            status=row.status,
            attempts=row.attempts,
            last_error=row.last_error,  # type: ignore[arg-type]
            idempotency_key=row.idempotency_key,
            summary=summary,
            created_at=row.created_at,
            not_before=row.not_before,
            delivered_at=row.delivered_at,
        )
