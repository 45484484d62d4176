"""An event opens on the same steps wherever it is clicked: the chat message's link, the run
page's Zoom button and chart clicks, and the post-mortem's timeline all use the window the
service serves with it (`zoom`, from `vocabulary/zoom.py`)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from holter_dashboard.links import zoom_href, zoom_range
from holter_server.schemas.events import EventPublic
from holter_server.services.alerting import dashboard_link

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
