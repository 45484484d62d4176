"""The run's events panel: what Holter found on the run, one incident per problem, most urgent
first. Each incident opens with its root cause (the event that leads it, and a sentence saying
the cause); the events that follow from it are folded under it, a click away. Each event keeps
its evidence and what can be done about it (zoom to it, acknowledge, dismiss). An event about
the ranks of a distributed job names its ranks, each a link that picks the rank in the run page's
Ranks section (assets/run_page.js `pickRank`).

The grouping is the service's (`GET /runs/{id}/incidents`): the page shows what the API says.
Against a service without incidents, or for an event the incidents read a moment earlier did
not have yet, each event is an incident of its own. Drawn with the page (never a placeholder)
and again whenever the run's events change.
"""

from __future__ import annotations

from typing import Any

import dash_mantine_components as dmc
from dash import html
from holter_charts.marks import event_label
from holter_charts.ranks import event_ranks
from holter_charts.vocabulary import Vocabulary

from holter_dashboard.components import severity_badge


def events_panel(
    events: list[dict[str, Any]], vocab: Vocabulary, *, live: bool, incidents: list[dict[str, Any]] | None = None
) -> Any:
    """The incidents of a run, or a line saying there are no events yet (a live run) or none at all."""
    if not events and not incidents:
        text = "No events yet: every curve looks healthy so far." if live else "No events: every curve looked healthy."
        return dmc.Text(text, size="sm", c="dimmed", className="no-events")
    cards = [incident_card(i, vocab) for i in ordered(with_every_event(incidents or [], events), vocab)]
    return dmc.ScrollArea(dmc.Stack(cards, gap=8, className="events-list"), mah=640, type="auto")


def with_every_event(incidents: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The incidents, and each event none of them holds as an incident of its own."""
    held = {e["id"] for inc in incidents for e in [inc["leader"], *inc.get("folded", [])]}
    alone = [single(e) for e in events if e["id"] not in held]
    return [*incidents, *alone]


def single(event: dict[str, Any]) -> dict[str, Any]:
    """An event that shares no cause, shaped as an incident (as the service words one)."""
    return {
        "id": event["id"],
        "rule": "single",
        "title": None,
        "cause": event.get("summary") or "",
        "severity": event.get("severity"),
        "status": event.get("status"),
        "start_step": event.get("start_step"),
        "end_step": event.get("end_step"),
        "leader": event,
        "folded": [],
    }


def ordered(incidents: list[dict[str, Any]], vocab: Vocabulary) -> list[dict[str, Any]]:
    """Open incidents first, the worst first, root causes before lone readings, then the earliest."""
    return sorted(
        incidents,
        key=lambda i: (
            vocab.event_status_rank(i.get("status")),
            -vocab.severity_rank(i.get("severity")),
            i.get("rule") == "single",
            i.get("start_step") or 0,
        ),
    )


def incident_card(incident: dict[str, Any], vocab: Vocabulary) -> Any:
    """One problem: its root cause's event (with a title and the cause above it when others
    follow from it), then the folded events behind a summary line that opens them."""
    folded = incident.get("folded") or []
    leader = event_card(incident["leader"], vocab)
    if not folded:
        return html.Div(leader, className=f"incident incident-{incident.get('rule')}", **{"data-id": incident["id"]})
    handled = not vocab.is_open(incident.get("status"))
    count = len(folded)
    return dmc.Paper(
        [
            dmc.Group(
                [
                    severity_badge("incident", incident.get("severity"), vocab, quiet=handled, size="sm"),
                    dmc.Text(steps_text(incident), size="xs", c="dimmed"),
                ],
                justify="space-between",
            ),
            dmc.Text(incident.get("title") or "", fw=600, size="sm", mt=4, className="incident-title"),
            dmc.Text(incident.get("cause") or "", size="xs", mb=6, className="incident-cause"),
            leader,
            html.Details(
                [
                    html.Summary(
                        f"{count} more event{'s' if count != 1 else ''} that follow from it",
                        className="incident-more",
                        style={"cursor": "pointer", "fontSize": "12px", "margin": "6px 0"},
                    ),
                    dmc.Stack([event_card(e, vocab) for e in folded], gap=6),
                ],
                className="incident-folded",
            ),
        ],
        p="xs",
        withBorder=True,
        radius="sm",
        className=f"incident incident-{incident.get('rule')}",
        **{"data-id": incident["id"]},
    )


def steps_text(event: dict[str, Any]) -> str:
    start, end = event.get("start_step"), event.get("end_step")
    if start is None:
        return "whole run"
    return f"step {start:,}" if end in (None, start) else f"steps {start:,}–{end:,}"


def event_card(event: dict[str, Any], vocab: Vocabulary) -> Any:
    """One event: its kind and severity, metric, summary, steps, who handled it, and its buttons."""
    handled = not vocab.is_open(event.get("status"))
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
            rank_links(event) if vocab.is_rank_event(event.get("kind")) else None,
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
                        disabled=vocab.is_hidden(event.get("status")),
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
        style={"opacity": 0.6 if vocab.is_hidden(event.get("status")) else 1},
    )


RANK_LINKS = 8  # ranks an event links to; the rest are counted (a node's many ranks)


def rank_links(event: dict[str, Any]) -> Any:
    """The ranks an event about ranks names, each a link to it in the Ranks section (on the
    event's metric, when it has one: the loss a rank left its peers' band on)."""
    ranks = event_ranks(event)
    if not ranks:
        return None
    links: list[Any] = [
        dmc.Button(
            f"rank {rank}",
            size="compact-xs",
            variant="light",
            className="event-rank-link",
            # picked in the browser (assets/run_page.js `pickRank`): open the section on this rank
            **{"data-pick-rank": str(rank), "data-pick-open": "1", "data-pick-metric": event.get("metric") or ""},
        )
        for rank in ranks[:RANK_LINKS]
    ]
    if len(ranks) > RANK_LINKS:
        links.append(dmc.Text(f"and {len(ranks) - RANK_LINKS} more", size="xs", c="dimmed"))
    return dmc.Group(links, gap=4, mt=4, className="event-ranks")
