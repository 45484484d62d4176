"""Each channel's payload matches what that service documents, for one alert, a burst, and a
resolved follow-up."""

from __future__ import annotations

import json

import jsonschema
import pytest
from holter_server.alerts import formatters
from holter_server.alerts.message import LinkedAlert, stored_alert

from tests.chat_schemas import SCHEMAS

ALERT = {
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
    "link": "http://holter.local:8765/runs/r1?metrics=loss&start=8362&end=8481",
    "sparkline": "▁▁▂▃▅▇×",
    "image_url": "http://holter.local:8765/api/v1/runs/r1/events/7/sparkline.png",
    "event_id": 7,
}


def linked(flat: dict) -> LinkedAlert:
    """The alert these flat keys spell (the webhook's own shape, easy to vary here) with its links."""
    alert = stored_alert({k: v for k, v in flat.items() if k not in ("link", "image_url")})
    return alert.linked(link=flat["link"], image_url=flat["image_url"])


def render(kind: str, alerts: list[dict], purpose: str) -> dict:
    typed = [linked(a) for a in alerts]
    if kind == "webhook":
        return formatters.webhook(typed, purpose, delivery_key="k1")
    return formatters.FORMATTERS[kind](typed, purpose)


@pytest.mark.parametrize("kind", ["slack", "discord", "teams", "webhook"])
@pytest.mark.parametrize("purpose", ["alert", "resolved", "test"])
def test_payload_matches_the_channels_documented_schema(kind: str, purpose: str) -> None:
    jsonschema.validate(render(kind, [ALERT], purpose), SCHEMAS[kind])


@pytest.mark.parametrize("kind", ["slack", "discord", "teams", "webhook"])
def test_a_burst_of_fifteen_alerts_still_fits_the_channels_limits(kind: str) -> None:
    burst = [{**ALERT, "event_id": i, "summary": f"event {i} " + "x" * 400} for i in range(15)]
    jsonschema.validate(render(kind, burst, "alert"), SCHEMAS[kind])


@pytest.mark.parametrize("kind", ["slack", "discord", "teams"])
def test_every_message_carries_the_evidence_and_the_link(kind: str) -> None:
    text = str(render(kind, [ALERT], "alert"))
    for needed in (
        "gpt2",
        "baseline",
        "loss",
        "divergence",
        "NaN at step 8,412",
        "8,412",
        ALERT["link"],
        ALERT["sparkline"],
        ALERT["image_url"],
    ):
        assert needed in text, needed


def test_run_level_events_render_without_a_metric_or_picture() -> None:
    stalled = {
        **ALERT,
        "metric": None,
        "kind": "run_stalled",
        "severity": "warning",
        "image_url": None,
        "sparkline": "",
        "start_step": 900,
        "end_step": 900,
    }
    for kind in ("slack", "discord", "teams", "webhook"):
        jsonschema.validate(render(kind, [stalled], "alert"), SCHEMAS[kind])


def test_a_burst_is_titled_by_its_count_and_worst_severity() -> None:
    title = render("slack", [ALERT, {**ALERT, "severity": "warning"}], "alert")["text"]
    assert title.startswith("🔴 2 problems")


HOSTILE = {
    **ALERT,
    "project": "p <!here>",
    "run_name": "<!channel> <https://phish.example/login|Reset your password> @everyone",
    "metric": "loss [click](https://phish.example)",
    "summary": "**urgent** <@U123> see https://phish.example now",
}


def test_slack_shows_user_text_without_mentions_or_links() -> None:
    text = str(render("slack", [HOSTILE], "alert"))
    for live in ("<!channel>", "<!here>", "<@U123>", "<https://", "https://phish", "@everyone"):
        assert live not in text, live
    assert "&lt;!channel&gt;" in text and ALERT["link"] in text  # shown as text; Holter's own link intact


def test_discord_turns_mentions_off_and_escapes_markdown_links() -> None:
    body = render("discord", [HOSTILE, HOSTILE], "alert")
    assert body["allowed_mentions"] == {"parse": []}
    text = str(body)
    for live in ("[click](", "https://phish", "@everyone", "**urgent**"):
        assert live not in text, live
    assert body["embeds"][0]["url"] == ALERT["link"]


def test_teams_shows_user_text_without_markdown_links_or_mentions() -> None:
    text = str(render("teams", [HOSTILE], "alert"))
    for live in ("[click](", "https://phish", "<@U123>", "**urgent**"):
        assert live not in text, live
    assert ALERT["link"] in text


@pytest.mark.parametrize("kind", ["slack", "discord", "teams"])
def test_hostile_text_still_fits_the_channels_schema(kind: str) -> None:
    jsonschema.validate(render(kind, [HOSTILE], "alert"), SCHEMAS[kind])


def test_the_webhook_sends_each_alert_flat_as_documented() -> None:
    (sent,) = render("webhook", [ALERT], "alert")["alerts"]
    assert sent == ALERT and list(sent) == [
        "project",
        "run_id",
        "run_name",
        "metric",
        "kind",
        "severity",
        "summary",
        "step",
        "start_step",
        "end_step",
        "time",
        "sparkline",
        "event_id",
        "link",
        "image_url",
    ]


LINKING = {
    **ALERT,
    "run_name": "see evil.example/login",
    "summary": "mail mailto:help@evil.example or help@evil.example, call tel:+15550100",
}


@pytest.mark.parametrize("kind", ["slack", "teams", "discord"])
def test_bare_domains_and_mail_addresses_are_not_linked(kind: str) -> None:
    text = json.dumps(render(kind, [LINKING], "alert"), ensure_ascii=False)
    for live in ("evil.example", "mailto:help", "tel:+1"):
        assert live not in text, live
    assert ALERT["link"] in text  # Holter's own link, in the service's URL field, intact


@pytest.mark.parametrize("kind", ["slack", "discord", "teams", "webhook"])
def test_direction_controls_in_user_text_are_spelled_out_not_obeyed(kind: str) -> None:
    # issue 47: `loss\u202egnp.exe` showed in chat as "lossexe.png"
    hostile = {**ALERT, "metric": "loss\u202egnp.exe", "run_name": "run\u2066a\u2069\u200f", "summary": "x\u202dy"}
    body = json.dumps(render(kind, [hostile], "alert"), ensure_ascii=False)
    for invisible in ("\u202e", "\u2066", "\u2069", "\u200f", "\u202d"):
        assert invisible not in body
    assert "\\u202egnp" in body or "\\\\u202egnp" in body
