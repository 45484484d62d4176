"""The alerts page in a real browser: add a channel (its URL masked), send a test message to a
real receiver, manage rules, and see a failed delivery with its error, then retry it."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from pathlib import Path

import holter
import httpx
import pytest
from holter_server.alerts.rules import DEFAULT_RULES

from tests.conftest import migrated_sqlite
from tests.receivers import Receiver
from tests.servers import InProcessServer
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ui_server(chromium: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    """As conftest's, but an undeliverable alert is marked failed after 4 s instead of a day."""
    database = migrated_sqlite(tmp_path_factory.mktemp("ui-alerts") / "holter.db")
    server = InProcessServer(database, settings={"alert_give_up_after": 4}, dashboard=True).start()
    yield server
    server.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    hook = Receiver().start()
    yield hook
    hook.stop()


@pytest.fixture
def api(ui_server: InProcessServer) -> Iterator[httpx.Client]:
    with ui_server.api() as client:
        yield client


def test_an_empty_page_says_what_to_do(page) -> None:  # type: ignore[no-untyped-def]
    page.goto("/")
    page.locator("#nav-alerts").click()
    page.wait_for_url("**/alerts")
    # The URL changes before Dash swaps the page in: wait for the alerts page's own empty state.
    page.locator(".empty-state", has_text="No channels yet").first.wait_for(timeout=15_000)


def test_a_new_channel_is_listed_masked_and_takes_a_test_message(page, receiver: Receiver) -> None:  # type: ignore[no-untyped-def]
    secret_path = f"T0P-SECRET-{uuid.uuid4().hex[:8]}"
    name = f"#alerts-{uuid.uuid4().hex[:6]}"
    page.goto("/alerts")
    page.locator("#ch-name").fill(name)
    page.locator("#ch-target").fill(f"{receiver.url}/{secret_path}")
    page.locator("#ch-project").fill("ui-alerts")
    page.locator("#ch-add").click()
    card = page.locator(".channel-item", has_text=name)
    card.wait_for()
    assert card.locator(".channel-target").inner_text().startswith("http://127.0.0.1/…")
    assert secret_path not in page.content()
    assert card.locator(".rule-row").count() == len(DEFAULT_RULES)  # started with the default rules

    card.get_by_role("button", name="Send test").click()
    card.locator(".test-delivered").wait_for()
    assert len(receiver.messages()) == 1 and secret_path in receiver.messages()[0].path

    receiver.answers = [(500, {})]
    card.get_by_role("button", name="Send test").click()
    card.locator(".test-failed").wait_for()
    assert "500" in card.locator(".test-failed").inner_text()


def test_a_rule_is_added_disabled_and_deleted(page, api: httpx.Client, receiver: Receiver) -> None:  # type: ignore[no-untyped-def]
    name = f"rules-{uuid.uuid4().hex[:6]}"
    channel = api.post(
        "/channels", json={"name": name, "kind": "discord", "target": receiver.url, "default_rules": False}
    ).json()
    page.goto("/alerts")
    card = page.locator(".channel-item", has_text=name)
    card.locator(".no-rules").wait_for()
    page.locator("#rule-channel").click()
    page.get_by_role("option", name=name, exact=True).click()
    page.locator("#rule-name").fill("loss spikes")
    page.locator("#rule-metric").fill("loss*")
    page.locator("#rule-add").click()
    row = card.locator(".rule-row", has_text="loss spikes")
    row.wait_for()
    assert "loss* · any event · warning or worse" in row.inner_text()
    row.get_by_role("button", name="Disable").click()
    card.locator(".rule-row.rule-disabled", has_text="loss spikes").wait_for()
    assert api.get("/rules", params={"channel_id": channel["id"]}).json()[0]["enabled"] is False
    card.locator(".rule-row", has_text="loss spikes").get_by_role("button", name="Delete").click()
    card.locator(".no-rules").wait_for()


def test_a_failed_delivery_shows_its_error_and_can_be_retried(
    page, api: httpx.Client, ui_server: InProcessServer, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    project = f"ui-alerts-{uuid.uuid4().hex[:6]}"
    down = Receiver()  # not started: the port refuses connections
    channel = api.post(
        "/channels", json={"name": f"down-{project}", "kind": "webhook", "target": down.url, "project": project}
    ).json()
    run = holter.init(project=project, name="diverging", url=ui_server.url, spool_dir=tmp_path)
    for step in range(240):
        run.log({"loss": math.nan if step >= 200 else 3.0 - step / 300}, step=step)
    run.finish()
    wait_until(
        lambda: (
            [d["status"] for d in api.get("/deliveries", params={"channel_id": channel["id"]}).json()] == ["failed"]
        ),
        timeout=60,
    )

    page.goto("/alerts")
    row = page.locator(".delivery-row.delivery-failed", has_text=run.id).first
    row.wait_for()
    assert row.locator(".delivery-error").inner_text().strip()
    down.start()
    try:
        row.get_by_role("button", name="Retry").click()
        page.get_by_text("Queued again").wait_for()
        wait_until(lambda: len(down.messages()) == 1, timeout=30)
        page.locator(".delivery-row.delivery-delivered", has_text=f"down-{project}").first.wait_for()
    finally:
        down.stop()
