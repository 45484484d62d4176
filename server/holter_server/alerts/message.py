"""The shape of an alert on its way to chat: what the alerting service says about an event
(`Alert`, stored with each queued delivery as JSON), and what the formatters get once the sender
added the links (`LinkedAlert`). Formatters read these keys and no others.

The event itself is `detect.Event` from a detector, `store.events.EventFields` when stored, an
`EventRow` in the store; `services.alerting.describe_event` turns a row into an `Alert`.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class Alert(TypedDict):
    """One event as a chat message tells it."""

    project: str
    run_id: str
    run_name: str | None
    metric: str | None  # None: an event of the whole run (stalled, crashed, a job's own alert)
    kind: str
    severity: str
    summary: str
    step: int | None  # the peak, else the start
    start_step: int | None
    end_step: int | None
    time: str  # ISO 8601: when the event was last updated
    # Deliveries queued by an older version lack these two.
    sparkline: NotRequired[str]  # the curve around the event as block characters ("" when none)
    event_id: NotRequired[int | None]  # None: not an event (a test message)


class LinkedAlert(Alert):
    """An alert as it is sent: with its dashboard link and, for metric events, its chart picture."""

    link: str
    image_url: str | None
