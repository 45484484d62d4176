"""A panel's figure, whichever kind it is: the one place that says a line panel gets lines, a
per-layer family a heatmap and a histogram its band chart. The run page, the post-mortem page
and the service's `report.html` all draw their panels through `panel_figure`, so the three
cannot disagree about what a chart shows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from holter_charts.heatmap import heatmap_figure
from holter_charts.line import band_figure, line_figure
from holter_charts.panels import Panel
from holter_charts.series import Series, View
from holter_charts.vocabulary import Vocabulary


def panel_figure(
    panel: Panel,
    series: Mapping[str, Series],
    events: Sequence[Mapping[str, Any]] = (),
    notes: Sequence[Mapping[str, Any]] = (),
    view: View | None = None,
    *,
    vocab: Vocabulary,
    compact: bool = False,
) -> tuple[dict, dict[str, list[float]]]:
    """The figure of one panel, and the EMA state of each metric a line panel smoothed (what live
    appends continue from; empty for the other kinds). Notes are drawn on line panels only.
    `compact`: a line panel as a small multiple (the run page's System section)."""
    if panel.kind == "heatmap":
        return heatmap_figure(panel, series, events, view, vocab=vocab), {}
    if panel.kind == "band":
        return band_figure(panel, series, view), {}
    return line_figure(panel, series, events, notes, view, vocab=vocab, compact=compact)
