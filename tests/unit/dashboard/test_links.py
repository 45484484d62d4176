"""An event opens on the same steps wherever it is clicked: the chat message's link and its
picture, the run page's Zoom button and chart clicks, the post-mortem's timeline and the compare
chart's first view all use the window the service serves with it (`zoom`, from `vocabulary/zoom.py`)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from holter_charts.compare import reference_figure
from holter_dashboard.links import zoom_href, zoom_range
from holter_server.schemas.events import EventPublic
from holter_server.schemas.postmortem import DriftPublic
from holter_server.services.alerting import dashboard_link, picture_window

NOW = datetime(2026, 11, 23, tzinfo=timezone.utc)


def served(start: int | None, end: int | None, metric: str | None = "loss") -> dict[str, Any]:
    """An event as `GET /runs/{id}/events` serves it."""
    event = EventPublic(
        id=7,
        run_id="r1",
        metric=metric,
        kind="spike",
        severity="warning",
        score=3.0,
        start_step=start,
        end_step=end,
        peak_step=start,
        period=None,
        summary="loss spiked",
        details={},
        status="open",
        status_by=None,
        status_reason=None,
        detector_version="1",
        created_at=NOW,
        updated_at=NOW,
    )
    return event.model_dump(mode="json")


@pytest.mark.parametrize("start, end", [(800, 810), (1000, 2000), (5, 5), (3, None)])
def test_a_chat_link_and_the_pages_open_an_event_on_the_same_steps(start: int, end: int | None) -> None:
    event = served(start, end)
    chat = parse_qs(urlsplit(dashboard_link("http://holter.example", "r1", "loss", start, end)).query)
    timeline = parse_qs(urlsplit(zoom_href("r1", event, "loss")).query)
    run_page = zoom_range(event)  # what the run page's Zoom button and a click on the event's marker set the view to
    assert run_page is not None
    assert chat == timeline == {"start": [str(run_page[0])], "end": [str(run_page[1])], "metrics": ["loss"]}
    assert run_page[0] <= start and run_page[1] >= (end if end is not None else start)


def test_the_window_has_context_either_side() -> None:
    assert zoom_range(served(800, 810)) == (780, 830)  # at least 20 steps either side
    assert zoom_range(served(1000, 2000)) == (500, 2500)  # half the span either side
    assert zoom_range(served(5, 5)) == (0, 25)  # never before step 0


def test_a_run_level_event_opens_the_whole_run() -> None:
    event = served(None, None, metric=None)
    assert zoom_range(event) is None and zoom_href("r1", event) == "/runs/r1"
    assert "start=" not in dashboard_link("http://holter.example", "r1", None, None, None)


@pytest.mark.parametrize("start, end", [(800, 810), (1000, 2000), (2500, 4000), (5, 5)])
def test_every_former_rule_now_opens_the_same_window(start: int, end: int) -> None:
    # the alert's picture had its own lead and tail, the compare chart its own share of the
    # drift and of the run: each now shows the served window (the picture within the metric's points)
    run_page = zoom_range(served(start, end))
    assert run_page is not None
    chat = parse_qs(urlsplit(dashboard_link("http://holter.example", "r1", "loss", start, end)).query)
    assert (int(chat["start"][0]), int(chat["end"][0])) == run_page
    assert picture_window(start, end, 0, 100_000) == run_page
    assert picture_window(start, end, start, end) == (start, end)  # a metric with no points around it
    drift = DriftPublic(start_step=start, end_step=end, mean_gap=0.1, direction="above", points=3)
    steps = list(range(0, 6000, 5))
    comparison = {
        "run_id": "r1",
        "reference_id": "r0",
        "metric": "loss",
        "steps": steps,
        "values": [1.0 + (0.2 if start <= s <= end else 0.0) for s in steps],
        "reference": [1.0] * len(steps),
        "low": [0.95] * len(steps),
        "high": [1.05] * len(steps),
        "drifts": [drift.model_dump(mode="json")],
    }
    compare_view = reference_figure(comparison)["layout"]["xaxis"]["range"]
    assert tuple(compare_view) == run_page
