"""The post-mortem page in a real browser: the written summary and the timeline of a finished
run, its report as a download, and a drifting run against the reference set from the page."""

from __future__ import annotations

import uuid
from pathlib import Path

import holter
import pytest
from holter.demo.synthetic import SyntheticRun

from tests.integration.test_live_detection import settled_events
from tests.integration.test_reference_runs import stream
from tests.servers import InProcessServer
from tests.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reviewed_run(ui_server: InProcessServer) -> str:
    """A finished run with the demo's planted problems, once detection has named them."""
    synthetic = SyntheticRun(1200, seed=11)
    run = holter.init(
        project="ui-postmortem", name="planted", url=ui_server.url, config={"lr": 3e-4, "rollouts_num": 64}
    )
    for step in range(1200):
        run.log(synthetic.metrics(step), step=step)
    run.finish()
    settled_events(ui_server.url, run.id)
    return run.id


def test_the_run_page_links_to_a_post_mortem_with_summary_and_timeline(page, reviewed_run: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{reviewed_run}")
    page.locator("#run-postmortem-link").click()
    page.wait_for_url(f"**/runs/{reviewed_run}/postmortem")
    summary = page.locator("#pm-summary-text")
    summary.wait_for()
    assert summary.inner_text().startswith("planted ran to step 1,199 and finished")
    entries = page.locator(".timeline-entry")
    assert entries.count() >= 4
    assert "finished" in entries.last.inner_text().lower()
    assert "rollouts_num" in page.locator("#pm-config").inner_text()
    page.locator(".chart-card .js-plotly-plot").first.wait_for()  # the annotated curves

    first = page.locator(".timeline-entry .timeline-link").first
    href = first.get_attribute("href")
    assert href.startswith(f"/runs/{reviewed_run}?") and "start=" in href and "end=" in href
    first.click()
    page.wait_for_url(f"**/runs/{reviewed_run}?*")
    page.locator(".chart-card .js-plotly-plot").first.wait_for()


def test_the_report_downloads_as_a_self_contained_html_file(page, reviewed_run: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"/runs/{reviewed_run}/postmortem")
    page.locator("#pm-summary-text").wait_for()
    with page.expect_download() as download:
        page.locator("#pm-report").click()
    assert download.value.suggested_filename == f"holter-{reviewed_run}.html"
    saved = tmp_path / "report.html"
    download.value.save_as(saved)
    text = saved.read_text()
    assert text.lower().startswith("<!doctype html>") and "Plotly.newPlot" in text and "planted" in text


def test_a_drifting_run_is_drawn_against_the_reference_band(page, ui_server: InProcessServer) -> None:  # type: ignore[no-untyped-def]
    project = f"ui-ref-{uuid.uuid4().hex[:6]}"
    reference = stream(ui_server, project, eval_gap=0.0, seed=1, name="baseline").id
    drifting = stream(ui_server, project, eval_gap=0.12, seed=2, name="drifting").id

    page.goto(f"/runs/{drifting}/postmortem")
    page.locator(".empty-state", has_text="has no reference run").wait_for()

    page.goto(f"/runs/{reference}/postmortem")
    page.get_by_role("button", name="Make this the project's reference").click()
    page.locator(".reference-set").wait_for()
    page.locator(".is-reference").wait_for()

    page.goto(f"/runs/{drifting}/postmortem")
    page.locator(".drift-item").first.wait_for()
    assert "eval_loss" in page.locator(".drift-item").first.inner_text()
    assert "above the reference" in page.locator(".drift-item").first.inner_text()
    traces = wait_until(
        lambda: page.evaluate(
            "() => { const el = document.querySelector('#pm-ref-graph .js-plotly-plot') || "
            "document.querySelector('#pm-ref-graph');"
            " return el && el.data && el.data.map(t => [t.name, t.fill || null]); }"
        ),
        timeout=10,
    )
    assert ["reference band", "tonexty"] in traces
    shapes = page.evaluate(
        "() => { const el = document.querySelector('#pm-ref-graph .js-plotly-plot') || "
        "document.querySelector('#pm-ref-graph');"
        " return el.layout.shapes.map(s => [s.x0, s.x1]); }"
    )
    assert len(shapes) == 1 and 1900 <= shapes[0][0] <= 2200
