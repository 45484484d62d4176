"""Zooming on a stretch of steps: the one rule for every place that opens a chart around an
event, a drift or a note (the chat message's link and its picture, the run page's Zoom button and
chart clicks, the post-mortem's timeline, notes and drifts, the compare chart's opening view), so
an alert, its picture and a click land on the same range.

The API carries each window (`zoom` on events, annotations and drifts; `schemas/zoom.py`): the
dashboard opens the range the service gives, it does not pad on its own.
"""

from __future__ import annotations

CONTEXT_STEPS = 20  # at least this many steps either side, so a one-step spike has a curve around it


def zoom_window(start: int | None, end: int | None = None) -> tuple[int, int] | None:
    """The step range showing `start`..`end` with context: half the stretch's span either side, at
    least `CONTEXT_STEPS`, never before step 0. None for something with no step (a run-level event)."""
    if start is None:
        return None
    end = start if end is None or end < start else end
    pad = max(CONTEXT_STEPS, (end - start) // 2)
    return max(0, start - pad), end + pad
