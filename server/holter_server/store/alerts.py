"""Channels, alert rules and the delivery outbox. All SQL about alerting lives here."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, select, update
from sqlalchemy.orm import Session

from holter_server.store.models import AlertRuleRow, ChannelRow, DeliveryRow, EventRow, RunRow
from holter_server.store.runs import now


def add_channel(
    *, session: Session, name: str, kind: str, project: str | None, target: str, signing_secret: str | None
) -> ChannelRow:
    row = ChannelRow(
        name=name,
        kind=kind,
        project=project,
        target=target,
        signing_secret=signing_secret,
        enabled=True,
        created_at=now(),
    )
    session.add(row)
    session.flush()
    return row


def list_channels(*, session: Session, project: str | None = None) -> Sequence[ChannelRow]:
    query = select(ChannelRow).order_by(ChannelRow.id)
    if project is not None:
        query = query.where((ChannelRow.project == project) | ChannelRow.project.is_(None))
    return session.scalars(query).all()


def get_channel(*, session: Session, channel_id: int) -> ChannelRow | None:
    return session.get(ChannelRow, channel_id)


def delete_channel(*, session: Session, channel: ChannelRow) -> None:
    session.delete(channel)
    session.flush()


def add_rule(*, session: Session, channel_id: int, fields: dict[str, Any]) -> AlertRuleRow:
    row = AlertRuleRow(channel_id=channel_id, enabled=True, created_at=now(), **fields)
    session.add(row)
    session.flush()
    return row


def list_rules(
    *, session: Session, channel_id: int | None = None, enabled_only: bool = False
) -> Sequence[AlertRuleRow]:
    query = select(AlertRuleRow).order_by(AlertRuleRow.id)
    if channel_id is not None:
        query = query.where(AlertRuleRow.channel_id == channel_id)
    if enabled_only:
        query = query.join(ChannelRow, ChannelRow.id == AlertRuleRow.channel_id).where(
            AlertRuleRow.enabled, ChannelRow.enabled
        )
    return session.scalars(query).all()


def enabled_rules_with_channel_project(*, session: Session) -> list[tuple[AlertRuleRow, str | None]]:
    """Enabled rules of enabled channels, each with its channel's project (which bounds what the rule sees)."""
    query = (
        select(AlertRuleRow, ChannelRow.project)
        .join(ChannelRow, ChannelRow.id == AlertRuleRow.channel_id)
        .where(AlertRuleRow.enabled, ChannelRow.enabled)
        .order_by(AlertRuleRow.id)
    )
    return [(rule, project) for rule, project in session.execute(query).all()]


def get_rule(*, session: Session, rule_id: int) -> AlertRuleRow | None:
    return session.get(AlertRuleRow, rule_id)


def set_rule_enabled(*, session: Session, rule: AlertRuleRow, enabled: bool) -> AlertRuleRow:
    """Switch a rule on or off."""
    rule.enabled = enabled
    session.flush()
    return rule


def delete_rule(*, session: Session, rule: AlertRuleRow) -> None:
    session.delete(rule)
    session.flush()


def last_delivery_time(*, session: Session, rule_id: int, run_id: str) -> datetime | None:
    """When the latest alert for this rule and run was queued (for the cooldown)."""
    return session.scalar(
        select(func.max(DeliveryRow.not_before)).where(DeliveryRow.rule_id == rule_id, DeliveryRow.run_id == run_id)
    )


def hasten_waiting(*, session: Session, rule_id: int, run_id: str, moment: datetime) -> None:
    """Alerts of this rule and run still waiting out a cooldown are due at `moment` instead."""
    session.execute(
        update(DeliveryRow)
        .where(
            DeliveryRow.rule_id == rule_id,
            DeliveryRow.run_id == run_id,
            DeliveryRow.status == "pending",
            DeliveryRow.not_before > moment,
        )
        .values(not_before=moment)
        .execution_options(synchronize_session=False)
    )


def delivered_for(*, session: Session, run_id: str, kind: str) -> Sequence[DeliveryRow]:
    """Alerts about events of `kind` on a run (to follow them with a "resolved")."""
    return session.scalars(
        select(DeliveryRow)
        .join(EventRow, and_(EventRow.run_id == DeliveryRow.run_id, EventRow.id == DeliveryRow.event_id))
        .where(DeliveryRow.run_id == run_id, EventRow.kind == kind, DeliveryRow.purpose == "alert")
    ).all()


QUEUED = "holter.deliveries_queued"  # in Session.info: this transaction added to the outbox


def told_channels(*, session: Session, run_id: str, event_ids: Sequence[int]) -> set[int]:
    """The channels with an alert queued or sent about one of these events of a run (failed ones
    left out: nobody heard them)."""
    if not event_ids:
        return set()
    return set(
        session.scalars(
            select(DeliveryRow.channel_id).where(
                DeliveryRow.run_id == run_id,
                DeliveryRow.event_id.in_(list(event_ids)),
                DeliveryRow.purpose == "alert",
                DeliveryRow.status != "failed",
            )
        )
    )


def queue_delivery(
    *,
    session: Session,
    channel_id: int,
    rule_id: int | None,
    run_id: str | None,
    event_id: int | None,
    purpose: str,
    idempotency_key: str,
    alert: dict[str, Any],
    not_before: datetime,
) -> DeliveryRow | None:
    """Add a message to the outbox unless one with the same key is there (then None)."""
    if session.scalar(select(DeliveryRow.id).where(DeliveryRow.idempotency_key == idempotency_key)) is not None:
        return None
    row = DeliveryRow(
        channel_id=channel_id,
        rule_id=rule_id,
        run_id=run_id,
        event_id=event_id,
        purpose=purpose,
        idempotency_key=idempotency_key,
        alert=alert,
        status="pending",
        attempts=0,
        not_before=not_before,
        created_at=now(),
    )
    session.add(row)
    session.flush()
    session.info[QUEUED] = True
    return row


def record_test_delivery(
    *, session: Session, channel_id: int, idempotency_key: str, alert: dict[str, Any]
) -> DeliveryRow:
    """A test message, listed with the channel's deliveries: sent at once (never by the
    dispatcher, which takes pending rows only), its outcome marked by the caller."""
    moment = now()
    row = DeliveryRow(
        channel_id=channel_id,
        rule_id=None,
        run_id=None,
        event_id=None,
        purpose="test",
        idempotency_key=idempotency_key,
        alert=alert,
        status="pending",  # never committed so: the caller marks it delivered or failed first
        attempts=0,
        not_before=moment,
        created_at=moment,
    )
    session.add(row)
    session.flush()
    return row


def group_due_deliveries(*, session: Session, limit: int) -> int:
    """Give due, ungrouped deliveries a group: one message per channel, run and purpose.

    Committed before anything is sent, so a retry after a crash sends the same group under
    the same key.
    """
    due = session.scalars(
        select(DeliveryRow)
        .where(DeliveryRow.status == "pending", DeliveryRow.group_key.is_(None), DeliveryRow.not_before <= now())
        .order_by(DeliveryRow.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    leaders: dict[tuple[int, str | None, str], int] = {}
    for row in due:
        leader = leaders.setdefault((row.channel_id, row.run_id, row.purpose), row.id)
        row.group_key = f"g{leader}"
    session.flush()
    return len(due)


def due_group_keys(*, session: Session, limit: int) -> list[str]:
    """Keys of grouped deliveries that are due now, oldest first."""
    rows = session.execute(
        select(DeliveryRow.group_key, func.min(DeliveryRow.id))
        .where(DeliveryRow.status == "pending", DeliveryRow.group_key.is_not(None), DeliveryRow.not_before <= now())
        .group_by(DeliveryRow.group_key)
        .order_by(func.min(DeliveryRow.id))
        .limit(limit)
    ).all()
    return [key for key, _ in rows if key is not None]  # the query keeps grouped deliveries only


def claim_group(*, session: Session, group_key: str) -> list[DeliveryRow]:
    """The pending deliveries of a group, locked for this transaction (SKIP LOCKED on Postgres,
    so two dispatchers never send the same group at once)."""
    return list(
        session.scalars(
            select(DeliveryRow)
            .where(DeliveryRow.group_key == group_key, DeliveryRow.status == "pending", DeliveryRow.not_before <= now())
            .order_by(DeliveryRow.id)
            .with_for_update(skip_locked=True)
        ).all()
    )


def mark_group(
    *, session: Session, rows: list[DeliveryRow], status: str, error: str | None, not_before: datetime | None
) -> None:
    """Record an attempt on every delivery of a group still stored: one deleted with its run while
    it was being sent (on SQLite nothing held it) is passed over, not a failed round."""
    moment = now()
    values: dict[str, Any] = {"attempts": DeliveryRow.attempts + 1, "status": status, "last_error": error}
    if status == "delivered":
        values["delivered_at"] = moment
    if not_before is not None:
        values["not_before"] = not_before
    session.execute(
        update(DeliveryRow)
        .where(DeliveryRow.id.in_([row.id for row in rows]))
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    for row in rows:
        session.expire(row)


def list_deliveries(
    *,
    session: Session,
    channel_id: int | None,
    status: str | None,
    run_id: str | None,
    limit: int,
    project: str | None = None,
) -> Sequence[DeliveryRow]:
    """Newest first. `project`: only deliveries to that project's channels about that project's runs."""
    query = select(DeliveryRow).order_by(DeliveryRow.id.desc()).limit(limit)
    if project is not None:
        query = (
            query.join(ChannelRow, ChannelRow.id == DeliveryRow.channel_id)
            .outerjoin(RunRow, RunRow.id == DeliveryRow.run_id)
            .where(ChannelRow.project == project, (RunRow.project == project) | DeliveryRow.run_id.is_(None))
        )
    if channel_id is not None:
        query = query.where(DeliveryRow.channel_id == channel_id)
    if status is not None:
        query = query.where(DeliveryRow.status == status)
    if run_id is not None:
        query = query.where(DeliveryRow.run_id == run_id)
    return session.scalars(query).all()


def get_delivery(*, session: Session, delivery_id: int) -> DeliveryRow | None:
    return session.get(DeliveryRow, delivery_id)


def retry_delivery(*, session: Session, delivery: DeliveryRow) -> DeliveryRow:
    """Put a failed delivery back in the queue (same key, so receivers can still dedupe)."""
    session.execute(
        update(DeliveryRow)
        .where(DeliveryRow.id == delivery.id)
        .values(status="pending", not_before=now(), last_error=None)
    )
    session.flush()
    session.refresh(delivery)
    return delivery
