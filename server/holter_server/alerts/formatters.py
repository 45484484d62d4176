"""How each channel shows alerts. Pure functions: a list of alerts in, the JSON body out.

An alert is the dict `services.alerting.describe_event` builds: project, run_id, run_name,
metric, kind, severity, summary, step, start_step, end_step, time (ISO 8601), link,
sparkline (text), image_url (or None), event_id. Several alerts for one run and channel go out
as one message (a burst is grouped). `purpose` is "alert", "resolved" or "test".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from holter_server.alerts.message import LinkedAlert
from holter_server.vocabulary import events as event_kinds
from holter_server.vocabulary import severities

RESOLVED_COLOR = int(severities.HEALTHY_COLOR.lstrip("#"), 16)

# --- user text in chat ----------------------------------------------------------------------
# Run names, projects, metric names and summaries come from whoever holds an ingest key. In chat
# they must stay text: no mentions (@everyone, <!channel>), no links (<url|text>, [text](url), a
# bare URL the client links by itself), no markup. Each platform gets its own escaping; the links
# Holter makes itself go in the platforms' URL fields, never through these.

ZWSP = "\u200b"  # breaks a pattern for the chat client without changing what a person reads
_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*):/(?=/)")  # http://, javascript://, ...


def _no_autolink(text: str) -> str:
    """`https://x` as `https:/\u200b/x`: read the same, linked by no client."""
    return _SCHEME.sub(lambda m: f"{m.group(1)}:/{ZWSP}", text)


def slack_text(text: str) -> str:
    """Text for Slack mrkdwn: &, < and > escaped as Slack documents (so no <!channel>, <@U…>,
    <url|text>), formatting characters and @ broken, URLs not linked."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = re.sub(r"([*_~`])", lambda m: m.group(1) + ZWSP, text)
    return _no_autolink(text.replace("@", "@" + ZWSP))


def slack_plain(text: str) -> str:
    """Text for a Slack plain_text field: nothing there is parsed, but angle brackets are shown as
    look-alikes so no text of ours carries `<!channel>` to wherever it is copied."""
    return _no_autolink(text).replace("<", "\u2039").replace(">", "\u203a").replace("@", "@" + ZWSP)


def plain_text(text: str) -> str:
    """Text for a field the client shows as is (Slack plain_text, Discord titles): only links broken."""
    return _no_autolink(text)


_DISCORD_MARKDOWN = re.compile(r"([\\*_~`|>\[\]()#<-])")


def discord_text(text: str) -> str:
    """Text for Discord markdown: every markdown character backslash-escaped (no [text](url), no
    formatting), @ broken (pings are also off for the whole message: allowed_mentions), URLs not linked."""
    text = _no_autolink(text)
    return _DISCORD_MARKDOWN.sub(r"\\\1", text).replace("@", "@" + ZWSP)


def teams_text(text: str) -> str:
    """Text for Teams' Adaptive Card markdown: no link syntax ([text](url)), no emphasis, no bare
    URL, no <at> mention."""
    text = _no_autolink(text).replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\[\]()*_~`#])", lambda m: m.group(1) + ZWSP, text)


def _escaped(alert: LinkedAlert, escape: Callable[[str], str]) -> LinkedAlert:
    """The alert with every text a person or a client could have written escaped (links Holter made stay as they are)."""
    out: dict[str, Any] = dict(alert)
    for name in ("project", "run_name", "run_id", "metric", "summary", "kind", "severity"):
        if isinstance(out.get(name), str):
            out[name] = escape(out[name])
    return out  # type: ignore[return-value]


def _title(alerts: list[LinkedAlert], purpose: str) -> str:
    first = alerts[0]
    where = f"{first['project']} / {first.get('run_name') or first['run_id']}"
    if purpose == "resolved":
        return f"✅ Resolved: {where}"
    if purpose == "test":
        return "Holter test message"
    if len(alerts) == 1:
        return f"{severities.severity(first['severity']).emoji} {event_kinds.label(first['kind'])} on {first.get('metric') or 'the run'} — {where}"
    worst = severities.worst(a["severity"] for a in alerts)
    return f"{severities.severity(worst).emoji} {len(alerts)} problems — {where}"


def _where(alert: LinkedAlert) -> str:
    steps = f"step {alert['start_step']:,}" if alert.get("start_step") is not None else ""
    if alert.get("end_step") not in (None, alert.get("start_step")):
        steps = f"steps {alert['start_step']:,}–{alert['end_step']:,}"
    return steps


def text_body(alerts: list[LinkedAlert], purpose: str) -> str:
    """Plain text (Apprise and fallbacks; URLs in user text not linked)."""
    alerts = [_escaped(a, plain_text) for a in alerts]
    lines = [_title(alerts, purpose)]
    for alert in alerts:
        lines.append(f"[{alert['severity']}] {alert['summary']}")
        if alert.get("sparkline"):
            lines.append(alert["sparkline"])
        if alert.get("link"):
            lines.append(alert["link"])
    return "\n".join(lines)


def slack(alerts: list[LinkedAlert], purpose: str) -> dict[str, Any]:
    """Slack incoming webhook, Block Kit."""
    header = _title([_escaped(a, slack_plain) for a in alerts], purpose)
    alerts = [_escaped(a, slack_text) for a in alerts]
    blocks: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": header[:150], "emoji": True}}]
    for alert in alerts[:10]:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"*{alert['severity'].upper()}* · {alert['summary']}"[:3000]},
                       "fields": [
                           {"type": "mrkdwn", "text": f"*Project*\n{alert['project']}"},
                           {"type": "mrkdwn", "text": f"*Run*\n{alert.get('run_name') or alert['run_id']}"},
                           {"type": "mrkdwn", "text": f"*Metric*\n{alert.get('metric') or '—'}"},
                           {"type": "mrkdwn", "text": f"*Where*\n{_where(alert) or '—'} · {alert['time']}"},
                       ]})
        if alert.get("sparkline"):
            blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"`{alert['sparkline']}`"}]})
        if alert.get("image_url"):
            blocks.append({"type": "image", "image_url": alert["image_url"], "alt_text": "the curve around the event"})
        if alert.get("link"):
            blocks.append({"type": "actions", "elements": [{"type": "button", "text": {"type": "plain_text", "text": "Open in Holter"}, "url": alert["link"]}]})
    if len(alerts) > 10:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"and {len(alerts) - 10} more"}]})
    return {"text": _title(alerts, purpose), "blocks": blocks[:50]}


def discord(alerts: list[LinkedAlert], purpose: str) -> dict[str, Any]:
    """Discord webhook with embeds; mentions off (`allowed_mentions`), user text escaped."""
    alerts = [_escaped(a, discord_text) for a in alerts]
    embeds = []
    for alert in alerts[:10]:
        color = RESOLVED_COLOR if purpose == "resolved" else severities.severity(alert["severity"]).color_int
        description = alert["summary"] + (f"\n`{alert['sparkline']}`" if alert.get("sparkline") else "")
        embed: dict[str, Any] = {
            "title": _title([alert], purpose)[:256],
            "description": description[:4096],
            "color": color,
            "fields": [
                {"name": "Project", "value": alert["project"][:1024], "inline": True},
                {"name": "Run", "value": (alert.get("run_name") or alert["run_id"])[:1024], "inline": True},
                {"name": "Metric", "value": (alert.get("metric") or "—")[:1024], "inline": True},
                {"name": "Where", "value": _where(alert) or "—", "inline": True},
            ],
            "timestamp": alert["time"],
            "footer": {"text": f"Holter · {alert['kind']} · {alert['severity']}"},
        }
        if alert.get("link"):
            embed["url"] = alert["link"]
        if alert.get("image_url"):
            embed["image"] = {"url": alert["image_url"]}
        embeds.append(embed)
    content = _title(alerts, purpose) if len(alerts) > 1 else None
    body: dict[str, Any] = {"username": "Holter", "embeds": embeds, "allowed_mentions": {"parse": []}}
    if content:
        body["content"] = content[:2000]
    return body


def teams(alerts: list[LinkedAlert], purpose: str) -> dict[str, Any]:
    """Microsoft Teams Workflows webhook: a message with one Adaptive Card; user text escaped."""
    alerts = [_escaped(a, teams_text) for a in alerts]
    body: list[dict[str, Any]] = [{"type": "TextBlock", "text": _title(alerts, purpose), "weight": "Bolder", "size": "Medium", "wrap": True}]
    actions = []
    for alert in alerts[:10]:
        body.append({"type": "TextBlock", "text": alert["summary"], "wrap": True,
                     "color": severities.severity(alert["severity"]).card_color})
        body.append({"type": "FactSet", "facts": [
            {"title": "Project", "value": alert["project"]},
            {"title": "Run", "value": alert.get("run_name") or alert["run_id"]},
            {"title": "Metric", "value": alert.get("metric") or "—"},
            {"title": "Where", "value": f"{_where(alert) or '—'} · {alert['time']}"},
        ]})
        if alert.get("sparkline"):
            body.append({"type": "TextBlock", "text": alert["sparkline"], "fontType": "Monospace", "wrap": True})
        if alert.get("image_url"):
            body.append({"type": "Image", "url": alert["image_url"], "altText": "the curve around the event"})
        if alert.get("link") and len(actions) < 5:
            actions.append({"type": "Action.OpenUrl", "title": "Open in Holter", "url": alert["link"]})
    card: dict[str, Any] = {"$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard", "version": "1.4", "body": body}
    if actions:
        card["actions"] = actions
    return {"type": "message", "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None, "content": card}]}


def webhook(alerts: list[LinkedAlert], purpose: str, *, delivery_key: str) -> dict[str, Any]:
    """The generic JSON webhook (signed by the sender)."""
    return {"type": f"holter.{purpose}", "idempotency_key": delivery_key, "title": _title(alerts, purpose), "alerts": alerts}


FORMATTERS = {"slack": slack, "discord": discord, "teams": teams}
