"""How each channel shows alerts. Pure functions: a list of alerts in, the JSON body out.

An alert is the dict `services.alerting.describe_event` builds: project, run_id, run_name,
metric, kind, severity, summary, step, start_step, end_step, time (ISO 8601), link,
sparkline (text), image_url (or None), event_id. Several alerts for one run and channel go out
as one message (a burst is grouped). `purpose` is "alert", "resolved" or "test".
"""

from __future__ import annotations

from typing import Any

SEVERITY_EMOJI = {"critical": "🔴", "warning": "🟠", "info": "🔵"}
SEVERITY_COLOR = {"critical": 0xD92D20, "warning": 0xF79009, "info": 0x2E90FA}
RESOLVED_COLOR = 0x12B76A


def _title(alerts: list[dict[str, Any]], purpose: str) -> str:
    first = alerts[0]
    where = f"{first['project']} / {first.get('run_name') or first['run_id']}"
    if purpose == "resolved":
        return f"✅ Resolved: {where}"
    if purpose == "test":
        return "Holter test message"
    if len(alerts) == 1:
        return f"{SEVERITY_EMOJI.get(first['severity'], '')} {first['kind'].replace('_', ' ')} on {first.get('metric') or 'the run'} — {where}"
    worst = max(alerts, key=lambda a: ("info", "warning", "critical").index(a["severity"]))
    return f"{SEVERITY_EMOJI.get(worst['severity'], '')} {len(alerts)} problems — {where}"


def _where(alert: dict[str, Any]) -> str:
    steps = f"step {alert['start_step']:,}" if alert.get("start_step") is not None else ""
    if alert.get("end_step") not in (None, alert.get("start_step")):
        steps = f"steps {alert['start_step']:,}–{alert['end_step']:,}"
    return steps


def text_body(alerts: list[dict[str, Any]], purpose: str) -> str:
    """Plain text (Apprise and fallbacks)."""
    lines = [_title(alerts, purpose)]
    for alert in alerts:
        lines.append(f"[{alert['severity']}] {alert['summary']}")
        if alert.get("sparkline"):
            lines.append(alert["sparkline"])
        if alert.get("link"):
            lines.append(alert["link"])
    return "\n".join(lines)


def slack(alerts: list[dict[str, Any]], purpose: str) -> dict[str, Any]:
    """Slack incoming webhook, Block Kit."""
    blocks: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": _title(alerts, purpose)[:150], "emoji": True}}]
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
            blocks.append({"type": "image", "image_url": alert["image_url"], "alt_text": f"{alert.get('metric')} around the event"})
        if alert.get("link"):
            blocks.append({"type": "actions", "elements": [{"type": "button", "text": {"type": "plain_text", "text": "Open in Holter"}, "url": alert["link"]}]})
    if len(alerts) > 10:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"and {len(alerts) - 10} more"}]})
    return {"text": _title(alerts, purpose), "blocks": blocks[:50]}


def discord(alerts: list[dict[str, Any]], purpose: str) -> dict[str, Any]:
    """Discord webhook with embeds."""
    embeds = []
    for alert in alerts[:10]:
        color = RESOLVED_COLOR if purpose == "resolved" else SEVERITY_COLOR.get(alert["severity"], 0)
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
    body: dict[str, Any] = {"username": "Holter", "embeds": embeds}
    if content:
        body["content"] = content[:2000]
    return body


def teams(alerts: list[dict[str, Any]], purpose: str) -> dict[str, Any]:
    """Microsoft Teams Workflows webhook: a message with one Adaptive Card."""
    body: list[dict[str, Any]] = [{"type": "TextBlock", "text": _title(alerts, purpose), "weight": "Bolder", "size": "Medium", "wrap": True}]
    actions = []
    for alert in alerts[:10]:
        body.append({"type": "TextBlock", "text": alert["summary"], "wrap": True,
                     "color": "Attention" if alert["severity"] == "critical" else "Warning" if alert["severity"] == "warning" else "Default"})
        body.append({"type": "FactSet", "facts": [
            {"title": "Project", "value": alert["project"]},
            {"title": "Run", "value": alert.get("run_name") or alert["run_id"]},
            {"title": "Metric", "value": alert.get("metric") or "—"},
            {"title": "Where", "value": f"{_where(alert) or '—'} · {alert['time']}"},
        ]})
        if alert.get("sparkline"):
            body.append({"type": "TextBlock", "text": alert["sparkline"], "fontType": "Monospace", "wrap": True})
        if alert.get("image_url"):
            body.append({"type": "Image", "url": alert["image_url"], "altText": f"{alert.get('metric')} around the event"})
        if alert.get("link") and len(actions) < 5:
            actions.append({"type": "Action.OpenUrl", "title": "Open in Holter", "url": alert["link"]})
    card: dict[str, Any] = {"$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard", "version": "1.4", "body": body}
    if actions:
        card["actions"] = actions
    return {"type": "message", "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None, "content": card}]}


def webhook(alerts: list[dict[str, Any]], purpose: str, *, delivery_key: str) -> dict[str, Any]:
    """The generic JSON webhook (signed by the sender)."""
    return {"type": f"holter.{purpose}", "idempotency_key": delivery_key, "title": _title(alerts, purpose), "alerts": alerts}


FORMATTERS = {"slack": slack, "discord": discord, "teams": teams}
