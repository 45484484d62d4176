"""Retry timing of the dispatcher, and what it sends for deliveries older versions queued."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from holter_server.alerts.message import stored_alert
from holter_server.services.dispatch import DeliveryError, _retry_after, next_attempt, render
from holter_server.store.models import ChannelRow, DeliveryRow
from holter_server.store.runs import now


def rows(attempts: int, age_s: float) -> list[DeliveryRow]:
    return [DeliveryRow(attempts=attempts, created_at=now() - timedelta(seconds=age_s))]


def test_retry_after_is_respected() -> None:
    status, when = next_attempt(rows(0, 1), DeliveryError("429", retry_after=7), timedelta(hours=1))
    assert status == "pending" and 6 <= (when - now()).total_seconds() <= 7


def test_backoff_grows_and_is_capped_at_five_minutes() -> None:
    waits = [
        (next_attempt(rows(n, 1), DeliveryError("503"), timedelta(days=1))[1] - now()).total_seconds()
        for n in (0, 3, 20)
    ]
    assert waits[0] < waits[1] < waits[2] <= 300


def test_after_give_up_the_delivery_fails_visibly() -> None:
    assert next_attempt(rows(3, 120), DeliveryError("down"), timedelta(seconds=60)) == ("failed", None)


def test_retry_after_reads_seconds_and_dates() -> None:
    assert _retry_after("3") == 3.0
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert _retry_after("soon") is None


# A delivery queued by the version before `Alert` carried its event: flat, without sparkline and event_id.
OLD_FLAT = {
    "project": "gpt2",
    "run_id": "r1",
    "run_name": "baseline",
    "metric": "loss",
    "kind": "divergence",
    "severity": "critical",
    "summary": "loss became NaN at step 8,412; 20 non-finite points",
    "step": 8412,
    "start_step": 8412,
    "end_step": 8431,
    "time": "2026-11-21T23:59:00+00:00",
}
# what that version sent to Slack for it
OLD_SLACK = {
    "text": "🔴 divergence on loss — gpt2 / baseline",
    "blocks": [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": "🔴 divergence on loss — gpt2 / baseline", "emoji": True},
        },
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": "*CRITICAL* · loss became NaN at step 8,412; 20 non-finite points"},
            "fields": [
                {"type": "mrkdwn", "text": "*Project*\ngpt2"},
                {"type": "mrkdwn", "text": "*Run*\nbaseline"},
                {"type": "mrkdwn", "text": "*Metric*\nloss"},
                {"type": "mrkdwn", "text": "*Where*\nsteps 8,412–8,431 · 2026-11-21T23:59:00+00:00"},
            ],
        },
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Open in Holter"},
                    "url": "http://holter.local:8765/runs/r1?metrics=loss&start=8392&end=8451",
                }
            ],
        },
    ],
}


def body_for(kind: str, stored: dict) -> bytes:
    channel = ChannelRow(id=1, name="c", kind=kind, target="http://x", signing_secret=None)
    row = DeliveryRow(id=1, idempotency_key="k", group_key="g", alert=stored, purpose="alert", attempts=0)
    return render(channel, [row], "http://holter.local:8765")[0]


def test_a_delivery_queued_flat_by_an_older_version_sends_the_message_that_version_sent() -> None:
    assert json.loads(body_for("slack", OLD_FLAT)) == OLD_SLACK


@pytest.mark.parametrize("kind", ["slack", "discord", "teams", "apprise", "webhook"])
def test_a_delivery_queued_flat_sends_what_the_same_alert_stored_nested_does(kind: str) -> None:
    assert body_for(kind, OLD_FLAT) == body_for(kind, stored_alert(OLD_FLAT).to_json())
