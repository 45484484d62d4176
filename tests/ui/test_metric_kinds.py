"""The run page says how each metric was understood, and a person can say what a metric is."""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

import holter
import httpx
import pytest

from tests.servers import InProcessServer
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def probe_run(ui_server: InProcessServer) -> str:
    """A finished run with a recognised loss, a verl mismatch and a custom metric that goes NaN."""
    run = holter.init(project="ui", name="kinds", id=f"ui{uuid.uuid4().hex[:10]}", url=ui_server.url)
    for step in range(300):
        run.log(
            {
                "loss": 3.0 - step / 300,
                "rollout_corr/k3_kl": 0.001,
                "my_probe": 1.0 + step / 1000 if step < 250 else math.nan,
            },
            step=step,
        )
    run.finish()
    wait_until(lambda: events(ui_server, run.id), timeout=60)
    return run.id


def events(server: InProcessServer, run_id: str) -> list[dict]:
    return httpx.get(f"{server.url}/api/v1/runs/{run_id}/events", timeout=10).json()["data"]


def kind_select(page, metric: str):  # type: ignore[no-untyped-def]
    element_id = json.dumps({"metric": metric, "type": "metric-kind"}, separators=(",", ":"))
    return page.locator(f"[id='{element_id}']")


def test_the_run_page_says_how_each_metric_was_understood(page, probe_run: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{probe_run}")

    def item(name: str) -> Any:
        return page.locator(".metric-item", has=page.locator(".metric-name", has_text=name))

    item("my_probe").wait_for()
    assert "unknown" in item("my_probe").locator(".understood").inner_text()
    assert "recognised (verl)" in item("rollout_corr/k3_kl").locator(".understood").inner_text()
    assert kind_select(page, "rollout_corr/k3_kl").input_value() == "logprob_mismatch — logprob mismatch"


def test_choosing_a_kind_on_the_run_page_has_the_metric_analysed_again(
    page, probe_run: str, ui_server: InProcessServer
) -> None:  # type: ignore[no-untyped-def]
    assert [(e["metric"], e["severity"]) for e in events(ui_server, probe_run)] == [("my_probe", "info")]
    page.goto(f"/runs/{probe_run}")
    select = kind_select(page, "my_probe")
    select.click()
    page.get_by_role("option", name="loss — training loss", exact=True).click()
    page.locator("#kind-message", has_text="my_probe is now read as loss").wait_for()
    run = httpx.get(f"{ui_server.url}/api/v1/runs/{probe_run}", timeout=10).json()
    probe = next(m for m in run["metrics"] if m["name"] == "my_probe")
    assert probe["kind"] == "loss" and probe["understood"]["source"] == "declared"
    wait_until(
        lambda: (
            [(e["metric"], e["severity"]) for e in events(ui_server, probe_run) if e["status"] == "open"]
            == [("my_probe", "critical")]
        ),
        timeout=30,
    )
    # the chart follows: my_probe now shares the Loss chart
    page.locator(".understood-declared").first.wait_for()
    wait_until(
        lambda: page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')].some(el =>
        (el.layout && el.layout.title && el.layout.title.text || '').startsWith('Loss') &&
        (el.data || []).some(t => t.name === 'my_probe'))"""),
        timeout=20,
    )
