"""The shape of an alert on its way to chat: the event (`detect.Event`, the one shape of an event
from the detector to chat) with the run it happened on (`Alert`), then with the links the sender
adds (`LinkedAlert`). Formatters read these fields and no others.

A detector, a cross-signal finding, the lifecycle and a job's own alert each make an `Event`;
`store.events.upsert_event` stores it as an `EventRow` and `store.events.event_of` gives it back;
`services.alerting.describe_event` wraps it in an `Alert`. Each queued delivery keeps its alert
as JSON (`Alert.to_json`); `stored_alert` reads it back, also as older versions wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from holter_server.detect.events import Event


@dataclass(frozen=True)
class Alert:
    """One event as a chat message tells it: the event and the run it happened on."""

    event: Event
    project: str
    run_id: str
    run_name: str | None
    time: str  # ISO 8601: when the event was last updated
    sparkline: str = ""  # the curve around the event as block characters ("" when none)
    event_id: int | None = None  # the stored event's id; None: not a stored event (a test message)

    @property
    def step(self) -> int | None:
        """The step a message names: the event's peak, else its start."""
        return self.event.peak_step if self.event.peak_step is not None else self.event.start_step

    def to_json(self) -> dict[str, Any]:
        """The alert as a queued delivery stores it: the event as `Event.to_dict` writes it (its
        details JSON-safe as the event store keeps them), beside the run's fields."""
        return {
            "event": self.event.to_dict(),
            "project": self.project,
            "run_id": self.run_id,
            "run_name": self.run_name,
            "time": self.time,
            "sparkline": self.sparkline,
            "event_id": self.event_id,
        }

    def linked(self, *, link: str, image_url: str | None) -> LinkedAlert:
        """This alert with its links, as it is sent."""
        return LinkedAlert(**{f.name: getattr(self, f.name) for f in fields(Alert)}, link=link, image_url=image_url)


@dataclass(frozen=True, kw_only=True)
class LinkedAlert(Alert):
    """An alert as it is sent: with its dashboard link and, for metric events, its chart picture."""

    link: str
    image_url: str | None


def stored_alert(data: dict[str, Any]) -> Alert:
    """The `Alert` a queued delivery stores: as `Alert.to_json` writes it, or flat as versions
    before it did (the event's fields beside the run's, `step` for the peak, and from the oldest
    no `sparkline` nor `event_id`)."""
    if "event" in data:
        return Alert(
            event=Event.from_dict(data["event"]),
            project=data["project"],
            run_id=data["run_id"],
            run_name=data["run_name"],
            time=data["time"],
            sparkline=data["sparkline"],
            event_id=data["event_id"],
        )
    # flat: `step` was the peak, else the start; as the peak it names the same step again
    event = Event(
        kind=data["kind"],
        metric=data["metric"],
        start_step=data["start_step"],
        end_step=data["end_step"],
        severity=data["severity"],
        score=0.0,
        summary=data["summary"],
        peak_step=data["step"],
    )
    return Alert(
        event=event,
        project=data["project"],
        run_id=data["run_id"],
        run_name=data["run_name"],
        time=data["time"],
        sparkline=data.get("sparkline", ""),
        event_id=data.get("event_id"),
    )
