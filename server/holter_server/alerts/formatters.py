"""How each channel shows alerts. Pure functions: a list of alerts in, the JSON body out.

An alert is an `alerts.message.LinkedAlert`: the event (`alert.event`: kind, metric, severity,
summary, steps) with its run (project, run_id, run_name), time (ISO 8601), sparkline (text),
event_id, and the links the sender added (link, image_url). Several alerts for one run and
channel go out as one message (a burst is grouped). `purpose` is "alert", "resolved" or "test".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from holter_server.alerts.message import LinkedAlert
from holter_server.vocabulary import events as event_kinds
from holter_server.vocabulary import severities
from holter_server.wire import visible

RESOLVED_COLOR = int(severities.HEALTHY_COLOR.lstrip("#"), 16)

# --- user text in chat ----------------------------------------------------------------------
# Run names, projects, metric names and summaries come from whoever holds an ingest key. In chat
# they must stay text: no mentions (@everyone, <!channel>), no links (<url|text>, [text](url), a
# bare URL the client links by itself), no markup. Each platform gets its own escaping; the links
# Holter makes itself go in the platforms' URL fields, never through these.

ZWSP = "\u200b"  # breaks a pattern for the chat client without changing what a person reads
# What a client links by itself in text: `scheme:` before anything but a space (https://x,
# mailto:a@b, tel:123, javascript:...), and a bare domain (`evil.example`, `www.x.co/path`): a dot
# between a word and two or more letters.
_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*):(?=[^\s\u200b])")
_DOMAIN_DOT = re.compile(r"(?i)(?<=[a-z0-9-])\.(?=[a-z]{2,}\b)")


def _no_autolink(text: str) -> str:
    """`https://x`, `mailto:a@b.co` and `evil.example` with a zero-width space after the colon and
    the dot: read the same, linked by no client."""
    text = _SCHEME.sub(lambda m: f"{m.group(1)}:{ZWSP}", text)
    return _DOMAIN_DOT.sub("." + ZWSP, text)


def slack_text(text: str) -> str:
    """Text for Slack mrkdwn: &, < and > escaped as Slack documents (so no <!channel>, <@U…>,
    <url|text>), formatting characters and @ broken, URLs, mail addresses and domains not linked."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = re.sub(r"([*_~`])", lambda m: m.group(1) + ZWSP, text)
    return _no_autolink(text.replace("@", "@" + ZWSP))


def slack_plain(text: str) -> str:
    """Text for a Slack plain_text field: nothing there is parsed, but angle brackets are shown as
    look-alikes so no text of ours carries `<!channel>` to wherever it is copied."""
    return _no_autolink(text).replace("<", "\u2039").replace(">", "\u203a").replace("@", "@" + ZWSP)


def plain_text(text: str) -> str:
    """Text for a field the client shows as is (Discord titles): only links broken."""
    return _no_autolink(text)


def chat_text(text: str) -> str:
    """Text for whichever chat service an Apprise URL names (Slack mrkdwn, Discord and Telegram
    markdown, Teams, Pushover...), safe on each: no mention (`<!channel>`; `!here>`, which
    Apprise's Slack makes `<!here>`; `@everyone` and `<@123>`, which Apprise's Discord makes
    pings), no link (angle-bracket, markdown or bare), no markup. Angle brackets become
    look-alikes; `&`, `@`, `!` and markup characters get a zero-width space after them."""
    text = _no_autolink(text).replace("<", "\u2039").replace(">", "\u203a")
    return re.sub(r"([&@!*_~`|\[\]()#])", lambda m: m.group(1) + ZWSP, text)


_DISCORD_MARKDOWN = re.compile(r"([\\*_~`|>\[\]()#<-])")


def discord_text(text: str) -> str:
    """Text for Discord markdown: every markdown character backslash-escaped (no [text](url), no
    formatting), @ broken (pings are also off for the whole message: allowed_mentions), URLs not linked."""
    text = _no_autolink(text)
    return _DISCORD_MARKDOWN.sub(r"\\\1", text).replace("@", "@" + ZWSP)


def teams_text(text: str) -> str:
    """Text for Teams' Adaptive Card markdown: no link syntax ([text](url)), no emphasis, no bare
    URL, mail address or domain, no <at> mention."""
    text = _no_autolink(text).replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\[\]()*_~`#])", lambda m: m.group(1) + ZWSP, text)


def _escaped(alert: LinkedAlert, escape: Callable[[str], str]) -> LinkedAlert:
    """The alert with every text a person or a client could have written escaped, its direction
    controls and zero-width characters spelled out first (links Holter made stay as they are)."""

    def shown(text: str) -> str:
        return escape(visible(text))

    event = alert.event
    return replace(
        alert,
        project=shown(alert.project),
        run_id=shown(alert.run_id),
        run_name=_maybe(shown, alert.run_name),
        event=replace(
            event,
            metric=_maybe(shown, event.metric),
            summary=shown(event.summary),
            kind=shown(event.kind),
            severity=shown(event.severity),
        ),
    )


def _maybe(escape: Callable[[str], str], text: str | None) -> str | None:
    return escape(text) if text is not None else None


def _title(alerts: list[LinkedAlert], purpose: str) -> str:
    first = alerts[0]
    where = f"{first.project} / {first.run_name or first.run_id}"
    if purpose == "resolved":
        return f"✅ Resolved: {where}"
    if purpose == "test":
        return "Holter test message"
    if len(alerts) == 1:
        emoji, label = severities.severity(first.event.severity).emoji, event_kinds.label(first.event.kind)
        return f"{emoji} {label} on {first.event.metric or 'the run'} — {where}"
    worst = severities.worst(a.event.severity for a in alerts)
    return f"{severities.severity(worst).emoji} {len(alerts)} problems — {where}"


def _where(alert: LinkedAlert) -> str:
    start, end = alert.event.start_step, alert.event.end_step
    steps = f"step {start:,}" if start is not None else ""
    if end not in (None, start):
        steps = f"steps {start:,}–{end:,}"
    return steps


def text_body(alerts: list[LinkedAlert], purpose: str) -> str:
    """Plain text for Apprise, whichever chat service its URL names: user text as `chat_text`
    (no mention, link or markup on any of them); the link Holter made stays as it is."""
    alerts = [_escaped(a, chat_text) for a in alerts]
    lines = [_title(alerts, purpose)]
    for alert in alerts:
        lines.append(f"[{alert.event.severity}] {alert.event.summary}")
        if alert.sparkline:
            lines.append(alert.sparkline)
        if alert.link:
            lines.append(alert.link)
    return "\n".join(lines)


def slack(alerts: list[LinkedAlert], purpose: str) -> dict[str, Any]:
    """Slack incoming webhook, Block Kit."""
    header = _title([_escaped(a, slack_plain) for a in alerts], purpose)
    alerts = [_escaped(a, slack_text) for a in alerts]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": header[:150], "emoji": True}}
    ]
    for alert in alerts[:10]:
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"*{alert.event.severity.upper()}* · {alert.event.summary}"[:3000]},
                "fields": [
                    {"type": "mrkdwn", "text": f"*Project*\n{alert.project}"},
                    {"type": "mrkdwn", "text": f"*Run*\n{alert.run_name or alert.run_id}"},
                    {"type": "mrkdwn", "text": f"*Metric*\n{alert.event.metric or '—'}"},
                    {"type": "mrkdwn", "text": f"*Where*\n{_where(alert) or '—'} · {alert.time}"},
                ],
            }
        )
        if alert.sparkline:
            blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"`{alert.sparkline}`"}]})
        if alert.image_url:
            blocks.append({"type": "image", "image_url": alert.image_url, "alt_text": "the curve around the event"})
        if alert.link:
            blocks.append(
                {
                    "type": "actions",
                    "elements": [
                        {"type": "button", "text": {"type": "plain_text", "text": "Open in Holter"}, "url": alert.link}
                    ],
                }
            )
    if len(alerts) > 10:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"and {len(alerts) - 10} more"}]})
    return {"text": _title(alerts, purpose), "blocks": blocks[:50]}


def discord(alerts: list[LinkedAlert], purpose: str) -> dict[str, Any]:
    """Discord webhook with embeds; mentions off (`allowed_mentions`), user text escaped."""
    alerts = [_escaped(a, discord_text) for a in alerts]
    embeds = []
    for alert in alerts[:10]:
        color = RESOLVED_COLOR if purpose == "resolved" else severities.severity(alert.event.severity).color_int
        description = alert.event.summary + (f"\n`{alert.sparkline}`" if alert.sparkline else "")
        embed: dict[str, Any] = {
            "title": _title([alert], purpose)[:256],
            "description": description[:4096],
            "color": color,
            "fields": [
                {"name": "Project", "value": alert.project[:1024], "inline": True},
                {"name": "Run", "value": (alert.run_name or alert.run_id)[:1024], "inline": True},
                {"name": "Metric", "value": (alert.event.metric or "—")[:1024], "inline": True},
                {"name": "Where", "value": _where(alert) or "—", "inline": True},
            ],
            "timestamp": alert.time,
            "footer": {"text": f"Holter · {alert.event.kind} · {alert.event.severity}"},
        }
        if alert.link:
            embed["url"] = alert.link
        if alert.image_url:
            embed["image"] = {"url": alert.image_url}
        embeds.append(embed)
    content = _title(alerts, purpose) if len(alerts) > 1 else None
    body: dict[str, Any] = {"username": "Holter", "embeds": embeds, "allowed_mentions": {"parse": []}}
    if content:
        body["content"] = content[:2000]
    return body


def teams(alerts: list[LinkedAlert], purpose: str) -> dict[str, Any]:
    """Microsoft Teams Workflows webhook: a message with one Adaptive Card; user text escaped."""
    alerts = [_escaped(a, teams_text) for a in alerts]
    body: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": _title(alerts, purpose), "weight": "Bolder", "size": "Medium", "wrap": True}
    ]
    actions = []
    for alert in alerts[:10]:
        body.append(
            {
                "type": "TextBlock",
                "text": alert.event.summary,
                "wrap": True,
                "color": severities.severity(alert.event.severity).card_color,
            }
        )
        body.append(
            {
                "type": "FactSet",
                "facts": [
                    {"title": "Project", "value": alert.project},
                    {"title": "Run", "value": alert.run_name or alert.run_id},
                    {"title": "Metric", "value": alert.event.metric or "—"},
                    {"title": "Where", "value": f"{_where(alert) or '—'} · {alert.time}"},
                ],
            }
        )
        if alert.sparkline:
            body.append({"type": "TextBlock", "text": alert.sparkline, "fontType": "Monospace", "wrap": True})
        if alert.image_url:
            body.append({"type": "Image", "url": alert.image_url, "altText": "the curve around the event"})
        if alert.link and len(actions) < 5:
            actions.append({"type": "Action.OpenUrl", "title": "Open in Holter", "url": alert.link})
    card: dict[str, Any] = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": body,
    }
    if actions:
        card["actions"] = actions
    return {
        "type": "message",
        "attachments": [
            {"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None, "content": card}
        ],
    }


def webhook(alerts: list[LinkedAlert], purpose: str, *, delivery_key: str) -> dict[str, Any]:
    """The generic JSON webhook (signed by the sender): text as written, its direction controls
    and zero-width characters spelled out."""
    alerts = [_escaped(a, str) for a in alerts]
    return {
        "type": f"holter.{purpose}",
        "idempotency_key": delivery_key,
        "title": _title(alerts, purpose),
        "alerts": [webhook_alert(a) for a in alerts],
    }


def webhook_alert(alert: LinkedAlert) -> dict[str, Any]:
    """One alert as the generic webhook documents it: flat, the event's fields beside the run's
    (receivers read these keys; the nested `Alert` is the service's own shape)."""
    event = alert.event
    return {
        "project": alert.project,
        "run_id": alert.run_id,
        "run_name": alert.run_name,
        "metric": event.metric,
        "kind": event.kind,
        "severity": event.severity,
        "summary": event.summary,
        "step": alert.step,
        "start_step": event.start_step,
        "end_step": event.end_step,
        "time": alert.time,
        "sparkline": alert.sparkline,
        "event_id": alert.event_id,
        "link": alert.link,
        "image_url": alert.image_url,
    }


FORMATTERS = {"slack": slack, "discord": discord, "teams": teams}
