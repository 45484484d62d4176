"""The run page's events panel: what Holter found on the run, most urgent first, each with its
evidence and what can be done about it (zoom to it, acknowledge, dismiss).

Drawn with the page (never a placeholder) and again whenever the run's events change. The list
is built in two steps so that later groupings (events folded into incidents) replace one of
them: `ordered` decides what is shown in which order, `event_card` how one event looks.
"""

from __future__ import annotations

from typing import Any

import dash_mantine_components as dmc
from holter_charts.marks import event_label
from holter_charts.vocabulary import Vocabulary

from holter_dashboard.components import severity_badge


def events_panel(events: list[dict[str, Any]], vocab: Vocabulary, *, live: bool) -> Any:
    """The events of a run, or a line saying there are none yet (a live run) or none at all."""
    if not events:
        text = "No events yet: every curve looks healthy so far." if live else "No events: every curve looked healthy."
        return dmc.Text(text, size="sm", c="dimmed", className="no-events")
    cards = [event_card(e, vocab) for e in ordered(events, vocab)]
    return dmc.ScrollArea(dmc.Stack(cards, gap=6, className="events-list"), mah=520, type="auto")


def ordered(events: list[dict[str, Any]], vocab: Vocabulary) -> list[dict[str, Any]]:
    """Open events first, the worst first, then the latest."""
    return sorted(
        events,
        key=lambda e: (
            vocab.event_status_rank(e.get("status")),
            -vocab.severity_rank(e.get("severity")),
            -(e.get("start_step") or 0),
        ),
    )


def steps_text(event: dict[str, Any]) -> str:
    start, end = event.get("start_step"), event.get("end_step")
    if start is None:
        return "whole run"
    return f"step {start:,}" if end in (None, start) else f"steps {start:,}–{end:,}"


def event_card(event: dict[str, Any], vocab: Vocabulary) -> Any:
    """One event: its kind and severity, metric, summary, steps, who handled it, and its buttons."""
    handled = event.get("status") != "open"
    status = ""
    if handled:
        status = f" · {event['status']} by {event.get('status_by')}" + (
            f": {event['status_reason']}" if event.get("status_reason") else ""
        )
    return dmc.Paper(
        [
            dmc.Group(
                [
                    severity_badge(event_label(event, vocab), event.get("severity"), vocab, quiet=handled, size="sm"),
                    dmc.Text(event.get("metric") or "run", size="xs", c="dimmed", ff="monospace"),
                ],
                justify="space-between",
            ),
            dmc.Text(event.get("summary") or "", size="xs", mt=4),
            dmc.Text(steps_text(event) + status, size="xs", c="dimmed"),
            dmc.Group(
                [
                    dmc.Button(
                        "Zoom", id={"type": "event-zoom", "id": event["id"]}, size="compact-xs", variant="subtle"
                    ),
                    dmc.Button(
                        "Acknowledge",
                        id={"type": "event-ack", "id": event["id"]},
                        size="compact-xs",
                        variant="subtle",
                        color="teal",
                        disabled=handled,
                    ),
                    dmc.Button(
                        "Dismiss",
                        id={"type": "event-dismiss", "id": event["id"]},
                        size="compact-xs",
                        variant="subtle",
                        color="gray",
                        disabled=event.get("status") == "dismissed",
                    ),
                ],
                gap=2,
                mt=4,
            ),
        ],
        p="xs",
        withBorder=True,
        radius="sm",
        className=f"event-item event-{event.get('kind')}",
        style={"opacity": 0.6 if event.get("status") == "dismissed" else 1},
    )
