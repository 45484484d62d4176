"""What Apprise posts for an alert whose run name, project, metric and summary carry mentions
and links: nothing a chat client would ping or link, on each service, as Apprise's own Slack and
Discord plugins format it. Slack and Discord cannot be reached here, so the one stub is the HTTP
call their plugins make (`requests`): the payload is captured, never sent."""

from __future__ import annotations

import json
import re
from typing import Any
from unittest import mock

import pytest
from holter_server.alerts import formatters

from tests.unit.server.alerts.test_formatters import HOSTILE, linked

apprise = pytest.importorskip("apprise")
requests = pytest.importorskip("requests")

SLACK = "slack://T1A2B3C4D/B1A2B3C4D/abcdefghijklmnopqrstuvwx"
DISCORD = "discord://1234567890/abcdefghijklmnop"
MENTIONS = {
    **HOSTILE,
    "run_name": "<!channel> !here> &lt;!everyone&gt; <@U012345> @everyone @here <@&123> <@123>",
    "summary": "see evil.example or mailto:x@evil.example <https://phish.example|reset>",
}


def posted(url: str, alert: dict[str, Any]) -> list[str]:
    """The bodies Apprise would post to `url` for Holter's message about `alert`."""
    text = formatters.text_body([linked(alert)], "alert")
    bodies: list[str] = []

    def capture(*_args: Any, **kwargs: Any) -> requests.Response:
        bodies.append(kwargs.get("data") or json.dumps(kwargs.get("json")))
        answer = requests.Response()
        answer.status_code, answer._content = 200, b"ok"  # what Slack answers a webhook
        return answer

    with mock.patch("requests.post", capture), mock.patch("requests.request", lambda *a, **k: capture(**k)):
        notifier = apprise.Apprise()
        assert notifier.add(url)
        assert notifier.notify(title=text.split("\n", 1)[0], body=text)
    assert bodies, "apprise posted nothing"
    return bodies


def test_apprise_slack_gets_no_channel_or_user_mention() -> None:
    for body in posted(SLACK, MENTIONS):
        text = json.loads(body)["attachments"][0]["text"] + json.loads(body)["attachments"][0]["title"]
        assert re.search(r"<[!@]", text) is None, text
        assert "<https://" not in text and "https://phish" not in text


@pytest.mark.parametrize("url", [DISCORD, DISCORD + "?format=markdown"])  # plain content, and embeds (pings detected)
def test_apprise_discord_gets_no_ping(url: str) -> None:
    for body in posted(url, MENTIONS):
        payload = json.loads(body)
        assert "allow_mentions" not in payload and "allowed_mentions" not in payload
        text = json.dumps(payload, ensure_ascii=False)
        assert re.search(r"@(everyone|here)\b", text) is None, text
        assert re.search(r"<@&?\d", text) is None, text
        assert "https://phish" not in text


@pytest.mark.parametrize("url", [SLACK, DISCORD])
def test_apprise_messages_link_no_bare_domain_or_mail_address(url: str) -> None:
    for body in posted(url, MENTIONS):
        text = json.dumps(json.loads(body), ensure_ascii=False)
        for live in ("evil.example", "mailto:x", "x@evil"):
            assert live not in text, live
