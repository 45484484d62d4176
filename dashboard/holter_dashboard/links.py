"""Links between the dashboard's pages, and the step window a chart opens on around an event,
a note or a drift: the service's (`zoom` on each, `vocabulary/zoom.py` on the server), the same
window its chat messages link to. The dashboard pads nothing on its own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode


def zoom_range(item: Mapping[str, Any]) -> tuple[int, int] | None:
    """The steps the service says show `item` (an event, note or drift as the API serves it), or None."""
    window = item.get("zoom")
    if not window:
        return None
    return int(window["start"]), int(window["end"])


def zoom_href(run_id: str, item: Mapping[str, Any], metric: str | None = None) -> str:
    """The run page opened on `item`'s zoom window (and on one metric's chart)."""
    query: dict[str, Any] = {}
    window = zoom_range(item)
    if window is not None:
        query["start"], query["end"] = window
        if metric:
            query["metrics"] = metric
    return f"/runs/{quote(run_id, safe='')}" + (f"?{urlencode(query)}" if query else "")
