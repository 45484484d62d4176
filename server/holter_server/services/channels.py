"""Chat channels, their alert rules and the delivery outbox as the API manages them: add, list
and remove channels and rules, switch a rule on or off, list deliveries and queue a failed one
again. (Turning events into alerts is `services/alerting.py`; sending them `services/dispatch.py`.)

The routes call these rather than the store (the import contract `routes reach the store through
a service`); who may see what is the route's question (it knows the caller's key), except the
set of channels a key sees, which several routes filter by."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from holter_server.services.alerting import add_default_rules
from holter_server.services.auth import Principal
from holter_server.store import alerts as alerts_store
from holter_server.store.models import AlertRuleRow, ChannelRow, DeliveryRow

# A channel as the services hand it to the API: the store's row, until the schemas are built from
# domain objects (issue 34).
StoredChannel = ChannelRow


def add_channel(
    *,
    session: Session,
    name: str,
    kind: str,
    project: str | None,
    target: str,
    signing_secret: str | None,
    default_rules: bool,
) -> ChannelRow:
    """Store a channel (its target already checked by the caller), with the rules a new channel
    starts with when `default_rules` (`alerting.add_default_rules`)."""
    channel = alerts_store.add_channel(
        session=session, name=name, kind=kind, project=project, target=target, signing_secret=signing_secret
    )
    if default_rules:
        add_default_rules(session=session, channel_id=channel.id, project=project)
    return channel


def channels(*, session: Session, project: str | None) -> Sequence[ChannelRow]:
    """The channels, by id: of one project (with the channels of no project), or all."""
    return alerts_store.list_channels(session=session, project=project)


def channel_ids_seen_by(*, session: Session, principal: Principal) -> set[int]:
    """The ids of the channels a key may see (all of them with auth off or for an admin key)."""
    return {c.id for c in alerts_store.list_channels(session=session) if principal.sees(c.project)}


def find_channel(*, session: Session, channel_id: int) -> ChannelRow | None:
    """The channel of that id, or None."""
    return alerts_store.get_channel(session=session, channel_id=channel_id)


def delete_channel(*, session: Session, channel: ChannelRow) -> None:
    """Remove the channel with its rules."""
    alerts_store.delete_channel(session=session, channel=channel)


def add_rule(*, session: Session, channel_id: int, fields: dict[str, Any]) -> AlertRuleRow:
    """Store an alert rule of the channel (enabled)."""
    return alerts_store.add_rule(session=session, channel_id=channel_id, fields=fields)


def rules(*, session: Session, channel_id: int | None) -> Sequence[AlertRuleRow]:
    """The alert rules, by id: of one channel, or all."""
    return alerts_store.list_rules(session=session, channel_id=channel_id)


def find_rule(*, session: Session, rule_id: int) -> AlertRuleRow | None:
    """The rule of that id, or None."""
    return alerts_store.get_rule(session=session, rule_id=rule_id)


def set_rule_enabled(*, session: Session, rule: AlertRuleRow, enabled: bool) -> AlertRuleRow:
    """Switch a rule on or off."""
    return alerts_store.set_rule_enabled(session=session, rule=rule, enabled=enabled)


def delete_rule(*, session: Session, rule: AlertRuleRow) -> None:
    """Remove a rule."""
    alerts_store.delete_rule(session=session, rule=rule)


def deliveries(
    *, session: Session, channel_id: int | None, status: str | None, run_id: str | None, limit: int, project: str | None
) -> Sequence[DeliveryRow]:
    """Deliveries, newest first; `project`: only those to its channels about its runs."""
    return alerts_store.list_deliveries(
        session=session, channel_id=channel_id, status=status, run_id=run_id, limit=limit, project=project
    )


def find_delivery(*, session: Session, delivery_id: int) -> DeliveryRow | None:
    """The delivery of that id, or None."""
    return alerts_store.get_delivery(session=session, delivery_id=delivery_id)


def retry_delivery(*, session: Session, delivery: DeliveryRow) -> DeliveryRow:
    """Queue a failed delivery again (same idempotency key, so a receiver can still drop a repeat)."""
    return alerts_store.retry_delivery(session=session, delivery=delivery)
