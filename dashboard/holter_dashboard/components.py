"""Small building blocks shared by the pages: badges, empty states, error messages, the theme."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import dash_mantine_components as dmc
from dash import html
from holter_charts.vocabulary import Vocabulary

from holter_dashboard.api import current_key

THEME: dict[str, Any] = {
    "primaryColor": "indigo",
    "fontFamily": "Inter, -apple-system, 'Segoe UI', Roboto, sans-serif",
    "defaultRadius": "md",
    "components": {"Card": {"defaultProps": {"withBorder": True, "shadow": "xs"}}},
}

# a badge in a table cell or a tight row otherwise lets its label be squeezed to "FAIL…", "UNKNO…"
UNCLIPPED = {"root": {"overflow": "visible"}, "label": {"overflow": "visible"}}


def status_badge(status: str | None, vocab: Vocabulary) -> dmc.Badge:
    status = status or "unknown"
    return dmc.Badge(
        status,
        color=vocab.run_status_badge(status),
        variant="dot" if vocab.is_live(status) else "light",
        className=f"status-{status}",
        styles=UNCLIPPED,
    )


def health_badge(
    health: str | None, vocab: Vocabulary, open_events: int | None = None, problems: dict[str, int] | None = None
) -> dmc.Badge:
    """Worst open event of a run, with how many problems it has: the incidents its warning and
    critical events make, so that one creeping failure reads "critical · 1 problem" however many
    events it made (a service that does not count problems: the open events). Runs from a
    service without events show as unknown."""
    if health is None:
        return dmc.Badge("—", color="gray", variant="outline")
    if problems is not None:
        count = sum(problems.values())
        label = health if not count else f"{health} · {count} problem{'' if count == 1 else 's'}"
    else:
        label = health if not open_events else f"{health} · {open_events}"
    return dmc.Badge(
        label,
        color=vocab.health_badge(health),
        variant="filled" if vocab.is_loudest(health) else "light",
        className=f"health-{health}",
        styles=UNCLIPPED,
    )


def severity_badge(
    label: str, severity: str | None, vocab: Vocabulary, *, quiet: bool = False, **kwargs: Any
) -> dmc.Badge:
    """A badge in the colour of an event's severity (light once someone handled it)."""
    return dmc.Badge(label, color=vocab.severity_badge(severity), variant="light" if quiet else "filled", **kwargs)


def empty_state(title: str, text: Any = None, command: str | None = None) -> dmc.Paper:
    children: list[Any] = [dmc.Title(title, order=4, c="dimmed")]
    if text:
        children.append(dmc.Text(text, c="dimmed", size="sm"))
    if command:
        children.append(dmc.Code(command, block=True, w="fit-content"))
    return dmc.Paper(
        dmc.Stack(children, align="center", gap="xs"),
        p="xl",
        withBorder=True,
        radius="md",
        className="empty-state",
        style={"borderStyle": "dashed"},
    )


def error_alert(message: str, title: str = "Something went wrong") -> dmc.Alert:
    return dmc.Alert(message, title=title, color="red", variant="light", className="error-alert")


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def age(value: str | None, now: datetime | None = None) -> str:
    """'12 s ago', '5 min ago', '3 h ago', '2 d ago'."""
    then = parse_time(value)
    if then is None:
        return "—"
    seconds = max(0, int(((now or datetime.now(timezone.utc)) - then).total_seconds()))
    if seconds < 60:
        return f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} d ago"


def link(text: Any, href: str, **kwargs: Any) -> dmc.Anchor:
    return dmc.Anchor(text, href=href, underline="hover", **kwargs)


def sign_out_link() -> dmc.Anchor | None:
    """The header's sign-out link, when someone signed in (auth on): a full page load, not Dash's routing."""
    if current_key() is None:
        return None
    return dmc.Anchor("Sign out", href="/logout", refresh=True, size="sm", c="dimmed", id="sign-out")


def section(title: str, *children: Any, right: Any = None) -> dmc.Card:
    head = dmc.Group(
        [dmc.Text(title, fw=600, size="sm")] + ([right] if right is not None else []), justify="space-between"
    )
    return dmc.Card([head, html.Div(list(children), style={"marginTop": 8})], padding="sm", radius="md")
