"""The dashboard in a real browser: runs page, a run's charts with their events, notes, live points."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

import holter
from holter_server.demo.synthetic import SyntheticRun
from tests.servers import ServerProcess

pytestmark = pytest.mark.slow


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.2):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"gave up after {timeout} s waiting for {predicate}")


@pytest.fixture(scope="module")
def spiky_run(ui_server: ServerProcess) -> str:
    """A finished run with a planted gradient-norm and loss spike, once the live detector named it."""
    synthetic = SyntheticRun(600, seed=7)
    run = holter.init(project="ui", name="spiky", id=f"ui{uuid.uuid4().hex[:10]}", url=ui_server.url, tags=["ui-test"],
                      config={"lr": 3e-4})
    for step in range(600):
        run.log(synthetic.metrics(step), step=step)
        if step % 50 == 0:
            run.log({"eval_loss": synthetic.eval_loss(step)}, step=step)
    run.finish()

    def spike_found() -> bool:
        events = httpx.get(f"{ui_server.url}/api/v1/runs/{run.id}/events", timeout=10).json()["data"]
        return any(e["kind"] == "spike" for e in events)

    wait_for(spike_found, timeout=60)
    return run.id


def plotted_steps(page, metric: str) -> list[int]:  # type: ignore[no-untyped-def]
    """The x values the browser holds for `metric`'s raw trace, whichever chart draws it."""
    return page.evaluate(
        """(metric) => {
            for (const el of document.querySelectorAll('.js-plotly-plot')) {
                for (const t of (el.data || [])) if (t.name === metric && t.opacity !== undefined) return Array.from(t.x);
            }
            return [];
        }""",
        metric,
    )


def test_empty_service_says_how_to_start(page) -> None:  # type: ignore[no-untyped-def]
    page.goto("/")
    empty = page.locator(".empty-state")
    empty.wait_for()
    assert "No runs yet" in empty.inner_text()
    assert "holter demo" in empty.inner_text()


def test_runs_page_lists_the_run_and_opens_it(page, spiky_run: str) -> None:  # type: ignore[no-untyped-def]
    page.goto("/")
    row = page.locator(".run-row", has_text=spiky_run)
    row.wait_for()
    assert "finished" in row.inner_text().lower()
    assert "ui-test" in row.inner_text().lower()
    row.locator(".run-link").click()
    page.wait_for_url(f"**/runs/{spiky_run}")
    page.locator("#run-title", has_text="spiky").wait_for()


def test_run_page_draws_the_charts_with_the_event_label(page, spiky_run: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{spiky_run}")
    page.locator(".chart-card .js-plotly-plot").first.wait_for()
    assert page.locator(".chart-card .js-plotly-plot").count() >= 4  # loss, grad norm, mismatch, throughput, ...
    label = page.locator(".js-plotly-plot .annotation-text", has_text="spike").first
    label.wait_for()
    assert label.is_visible()
    assert page.locator(".event-item.event-spike").count() >= 1  # and in the side list
    assert wait_for(lambda: len(plotted_steps(page, "loss")) > 100)


def test_zooming_to_an_event_puts_the_range_in_the_url(page, spiky_run: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{spiky_run}")
    page.locator(".event-item.event-spike").first.get_by_role("button", name="Zoom").click()
    href = lambda: page.evaluate("() => window.location.href")  # noqa: E731 (page.url misses replaceState)
    wait_for(lambda: "start=" in href() and "end=" in href(), timeout=10)
    url = href()
    page.goto(url)  # the URL restores the view
    page.locator(".chart-card .js-plotly-plot").first.wait_for()
    start = int(url.split("start=")[1].split("&")[0])
    end = int(url.split("end=")[1].split("&")[0])
    x_range = wait_for(lambda: page.evaluate("() => { const el = document.querySelector('.chart-card .js-plotly-plot');"
                                             " return el && el.layout && el.layout.xaxis.range; }"), timeout=10)
    assert abs(x_range[0] - start) < 1 and abs(x_range[1] - end) < 1


def test_a_note_persists_after_reload(page, spiky_run: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{spiky_run}")
    page.locator(".chart-card .js-plotly-plot").first.wait_for()
    author = page.locator("#author")
    author.fill("ada")
    author.press("Enter")
    text = f"restarted the data loader here {uuid.uuid4().hex[:6]}"
    page.locator("#note-start").fill("200")
    page.locator("#note-end").fill("260")
    page.locator("#note-text").fill(text)
    page.locator("#note-add").click()
    page.locator(".note-item", has_text=text).wait_for()
    page.reload()
    page.locator(".note-item", has_text=text).wait_for()
    page.locator(".js-plotly-plot .annotation-text", has_text="restarted the data").first.wait_for()  # drawn on the charts


def test_a_logged_point_appears_live_without_reload(page, ui_server: ServerProcess) -> None:  # type: ignore[no-untyped-def]
    run = holter.init(project="ui", name="live", id=f"ui{uuid.uuid4().hex[:10]}", url=ui_server.url)
    for step in range(50):
        run.log({"loss": 3.0 - step * 0.01}, step=step)
    run.flush()
    try:
        page.goto(f"/runs/{run.id}")
        wait_for(lambda: 49 in plotted_steps(page, "loss"), timeout=15)
        page.evaluate("() => { window.__notReloaded = true; }")
        logged = time.monotonic()
        run.log({"loss": 2.0}, step=50)
        wait_for(lambda: 50 in plotted_steps(page, "loss"), timeout=10, interval=0.05)
        lag = time.monotonic() - logged
        assert page.evaluate("() => window.__notReloaded === true")
        assert lag <= 3.0, f"the point took {lag:.2f} s to appear"
    finally:
        run.finish()
