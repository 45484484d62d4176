"""The alert dispatcher: sends what the outbox holds, one message per group, with retries.

* Due deliveries are first grouped (one message per channel, run and purpose) in a committed
  transaction, so a retry after a crash sends the same group under the same idempotency key.
* Each group is claimed (SKIP LOCKED on Postgres), sent, and marked in one transaction.
  A crash after sending but before marking resends it after the restart; the receiver sees the
  same `Idempotency-Key` header twice and can drop the repeat.
* 2xx: delivered. 429: wait what Retry-After says. Other failures: exponential backoff up to
  five minutes, until `give_up_after` has passed since the alert was queued: then failed,
  visible in the API, and retryable by hand.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

import httpx
from sqlalchemy.orm import Session, sessionmaker

from holter_server.alerts import formatters, image_links
from holter_server.alerts.message import Alert, stored_alert
from holter_server.alerts.signing import HEADER as SIGNATURE_HEADER
from holter_server.alerts.signing import sign
from holter_server.alerts.targets import TargetGuard, TargetRefused
from holter_server.detect.events import Event
from holter_server.services.alerting import ImageLink, with_links
from holter_server.store import alerts as alerts_store
from holter_server.store.database import session_scope
from holter_server.store.models import ChannelRow, DeliveryRow
from holter_server.store.runs import now
from holter_server.vocabulary import severities

log = logging.getLogger("holter.dispatch")
MAX_BACKOFF = timedelta(minutes=5)
# the kind of a channel's test message: sent, never stored, so no kind of the vocabulary's
TEST_MESSAGE_KIND = "test"


class DeliveryError(Exception):
    """A send that did not get a 2xx; `retry_after` when the receiver said how long to wait."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def group_key_to_idempotency_key(rows: list[DeliveryRow]) -> str:
    """One key per message: the delivery's own key, or the group's when alerts were grouped."""
    return (
        rows[0].idempotency_key if len(rows) == 1 else f"group:{rows[0].group_key}:{','.join(str(r.id) for r in rows)}"
    )


def _image_link(session: Session, base_url: str, ttl: float) -> ImageLink:
    def link(alert: Alert) -> str:
        issued = datetime.fromisoformat(alert.time).timestamp() if alert.time else None
        assert alert.event_id is not None  # with_links asks only for stored events' pictures
        return image_links.signed_url(
            session=session, base_url=base_url, run_id=alert.run_id, event_id=alert.event_id, ttl=ttl, issued_at=issued
        )

    return link


def render(
    channel: ChannelRow, rows: list[DeliveryRow], base_url: str, image_link: ImageLink | None = None
) -> tuple[bytes, dict[str, str], str]:
    """The request body and headers for a group, and the idempotency key they carry.
    `image_link`: makes the signed URL of an event's chart picture (chat services fetch it without a key)."""
    alerts = [with_links(stored_alert(row.alert), base_url, image_link) for row in one_per_event(rows)]
    purpose = rows[0].purpose
    key = group_key_to_idempotency_key(rows)
    headers = {"Content-Type": "application/json", "Idempotency-Key": key, "User-Agent": "Holter"}
    if channel.kind == "webhook":
        body = json.dumps(formatters.webhook(alerts, purpose, delivery_key=key)).encode()
        if channel.signing_secret:
            headers[SIGNATURE_HEADER] = sign(channel.signing_secret, body)
    elif channel.kind == "apprise":
        body = json.dumps(
            {
                "title": formatters.text_body(alerts, purpose).split("\n", 1)[0],
                "body": formatters.text_body(alerts, purpose),
            }
        ).encode()
    else:
        body = json.dumps(formatters.FORMATTERS[channel.kind](alerts, purpose)).encode()
    return body, headers, key


def one_per_event(rows: list[DeliveryRow]) -> list[DeliveryRow]:
    """The deliveries of a group with one per event, its latest (an event that got worse while the
    message waited out a cooldown was queued once per severity; queues older than one delivery per
    channel held one per rule): a message lists an event once, however many rules matched it."""
    latest: dict[tuple[str | None, int], DeliveryRow] = {}
    kept: list[DeliveryRow] = []
    for row in rows:
        if row.event_id is None:
            kept.append(row)
        else:
            latest[(row.run_id, row.event_id)] = row
    return [row for row in rows if row in kept or latest.get((row.run_id, row.event_id or -1)) is row]


def send(
    client: httpx.Client, channel: ChannelRow, body: bytes, headers: dict[str, str], *, guard: TargetGuard
) -> None:
    """POST one message to the address the guard checked; raise DeliveryError unless the receiver took it."""
    try:
        if channel.kind == "apprise":
            guard.check_apprise(channel.target)
        else:
            target = guard.check(channel.target)
    except TargetRefused as exc:
        raise DeliveryError(str(exc)) from exc
    if channel.kind == "apprise":
        _send_apprise(channel, json.loads(body))
        return
    # to the checked address itself, the name in Host and SNI: no second resolution to rebind
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    try:
        response = client.post(
            target.pinned_url, content=body, headers={**headers, "Host": target.host_header}, extensions=extensions
        )
    except httpx.HTTPError as exc:
        raise DeliveryError(f"{type(exc).__name__}: {exc}") from exc
    if response.status_code == 429:
        raise DeliveryError("HTTP 429 Too Many Requests", retry_after=_retry_after(response.headers.get("retry-after")))
    if not 200 <= response.status_code < 300:
        raise DeliveryError(f"HTTP {response.status_code}: {response.text[:300]}")


def _send_apprise(channel: ChannelRow, message: dict[str, str]) -> None:
    try:
        import apprise
    except ImportError as exc:
        raise DeliveryError("apprise is not installed: pip install apprise") from exc
    notifier = apprise.Apprise()
    if not notifier.add(channel.target):
        raise DeliveryError("apprise does not understand this channel's URL")
    if not notifier.notify(title=message["title"], body=message["body"]):
        raise DeliveryError("apprise could not deliver the message")


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, (parsedate_to_datetime(value) - now()).total_seconds())
        except (TypeError, ValueError):
            return None


def next_attempt(
    rows: list[DeliveryRow], error: DeliveryError, give_up_after: timedelta
) -> tuple[str, datetime | None]:
    """After a failed attempt: ("pending", when to try again) or ("failed", None)."""
    first = min(row.created_at for row in rows)
    if now() - first >= give_up_after:
        return "failed", None
    if error.retry_after is not None:
        return "pending", now() + timedelta(seconds=error.retry_after)
    attempts = max(row.attempts for row in rows) + 1
    return "pending", now() + min(MAX_BACKOFF, timedelta(seconds=2 ** min(attempts, 12) * 0.5))


def dispatch_due(
    *,
    session_factory: sessionmaker[Session],
    client: httpx.Client,
    base_url: str,
    give_up_after: timedelta,
    guard: TargetGuard,
    image_ttl: float = 7 * 86_400.0,
    limit: int = 100,
) -> int:
    """Send every due group once; returns how many messages were attempted."""
    with session_scope(session_factory) as session:
        alerts_store.group_due_deliveries(session=session, limit=limit)
    with session_scope(session_factory) as session:
        keys = alerts_store.due_group_keys(session=session, limit=limit)
    attempted = 0
    for key in keys:
        with session_scope(session_factory) as session:
            rows = alerts_store.claim_group(session=session, group_key=key)
            if not rows:
                continue  # another dispatcher has it
            channel = alerts_store.get_channel(session=session, channel_id=rows[0].channel_id)
            attempted += 1
            if channel is None or not channel.enabled:
                alerts_store.mark_group(
                    session=session, rows=rows, status="failed", error="channel removed or disabled", not_before=None
                )
                continue
            try:
                body, headers, _ = render(channel, rows, base_url, image_link=_image_link(session, base_url, image_ttl))
                send(client, channel, body, headers, guard=guard)
            except DeliveryError as exc:
                status, when = next_attempt(rows, exc, give_up_after)
                log.warning(
                    "delivery to channel %s failed (%s); %s",
                    channel.name,
                    exc,
                    "giving up" if status == "failed" else f"retrying at {when}",
                )
                alerts_store.mark_group(session=session, rows=rows, status=status, error=str(exc), not_before=when)
                continue
            alerts_store.mark_group(session=session, rows=rows, status="delivered", error=None, not_before=None)
    return attempted


def send_test(
    *, session: Session, channel: ChannelRow, client: httpx.Client, base_url: str, guard: TargetGuard
) -> DeliveryRow:
    """Send a test message right away (not through the outbox), and list it with the channel's
    deliveries, delivered or failed with the channel's answer; raises DeliveryError when it failed.
    The caller commits in both cases."""
    event = Event(
        kind=TEST_MESSAGE_KIND,
        metric=None,
        start_step=None,
        end_step=None,
        severity=severities.LOWEST.name,
        score=0.0,
        summary=f"Channel {channel.name!r} is connected to Holter.",
    )
    alert = Alert(
        event=event,
        project=channel.project or "any project",
        run_id="test",
        run_name="Holter test",
        time=now().isoformat(),
        sparkline="▁▂▃▅▇█▇▅▃▂▁",
        event_id=None,
    )
    row = alerts_store.record_test_delivery(
        session=session,
        channel_id=channel.id,
        idempotency_key=f"test:{channel.id}:{now().timestamp()}",
        alert=alert.to_json(),
    )
    body, headers, _ = render(channel, [row], base_url)
    try:
        send(client, channel, body, headers, guard=guard)
    except DeliveryError as exc:
        alerts_store.mark_group(session=session, rows=[row], status="failed", error=str(exc), not_before=None)
        raise
    alerts_store.mark_group(session=session, rows=[row], status="delivered", error=None, not_before=None)
    return row
