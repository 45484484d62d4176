"""The run page's events panel in a real browser, for a real CPU training with a NaN planted in one
attention layer (the tripwire on): one incident, its first card naming the module, the loss and
norm divergences that followed folded under it until opened."""

from __future__ import annotations

import httpx
import pytest

from tests.servers import InProcessServer
from tests.waiting import wait_until

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

from tests.integration.test_tripwires import train_with_a_nan


@pytest.fixture(scope="module")
def nan_run(ui_server: InProcessServer) -> str:
    run_id = train_with_a_nan(ui_server.url, project="incidents")

    def settled() -> bool:
        answer = httpx.get(f"{ui_server.url}/api/v1/runs/{run_id}/incidents", timeout=30).json()
        return answer["count"] == 1 and answer["events"] >= 8

    wait_until(settled, timeout=60)
    return run_id


def test_the_first_card_of_a_nan_run_names_the_module(page, nan_run: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{nan_run}")
    first = page.locator("#run-events .incident").first
    first.wait_for()
    assert first.locator(".incident-title").inner_text() == "NaN from `layers.1.attn` at step 80"
    assert "forward pass of `layers.1.attn`" in first.locator(".incident-cause").inner_text()
    assert "head.bias" not in first.inner_text()
    assert page.locator("#run-events .incident").count() == 1  # every event of the run is in it


def test_what_followed_is_folded_until_opened(page, nan_run: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{nan_run}")
    incident = page.locator("#run-events .incident").first
    incident.wait_for()
    # the leader's card shows; the divergences it explains are behind a line that opens them
    assert incident.locator(".event-item").first.is_visible()
    assert "first non-finite" in incident.locator(".event-item").first.inner_text().lower()
    folded = incident.locator(".incident-folded .event-item")
    assert folded.count() >= 7 and not folded.first.is_visible()
    more = incident.locator(".incident-more")
    assert "more events that follow from it" in more.inner_text()
    more.click()
    wait_until(folded.first.is_visible)
    assert incident.locator(".incident-folded .event-divergence", has_text="holter/grad_norm/layers.1").count() == 1


def test_the_header_counts_one_problem_not_its_dozen_events(page, nan_run: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{nan_run}")
    badge = page.locator(".health-critical").first  # the header's health badge
    badge.wait_for()
    assert badge.inner_text().lower() == "critical · 1 problem"
