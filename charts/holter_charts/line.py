"""Line panels: each metric raw and smoothed (EMA), NaN/Inf crosses along the top, event peaks
circled, events and notes drawn; the live appends that extend such a chart in place; and the
band chart of a logged histogram's quantiles.

A line panel's traces always come in the same order, so live updates can append by index:
for each metric a raw trace then its smoothed trace, then one trace of non-finite points and one
trace of event peak markers (`panels.trace_indexes`, `panels.nonfinite_trace_index`).

A metric timing the step's own work (`Panel.compute_only`) is dashed, in the colour of its whole
step's counterpart where there is one, so the gap between the two lines is the step's wait for
data. A panel of shares (`Panel.share`) has a percentage axis, a metric logged in percent drawn
as the fraction it is (`Panel.percent`), in the figure and in its live appends alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from holter_charts.marks import event_color, event_label, event_shapes, note_shapes, stagger
from holter_charts.panels import HISTOGRAM_QUANTILES, Panel, nonfinite_trace_index, trace_indexes, whole_step_partner
from holter_charts.series import Series, View, ema, gaps, spell, step_to_x, value_at, x_values
from holter_charts.style import PALETTE, base_layout, empty_note, plotly_text, rgba
from holter_charts.vocabulary import Vocabulary

NONFINITE_Y = 0.96  # where NaN/Inf crosses sit, in the chart's height (a second y axis from 0 to 1)
# A series drawn with more points than this is drawn with WebGL (scattergl): SVG slows down with
# tens of thousands of points, and a chart read at full resolution (a zoom, a long live tail)
# can hold that many. Below it SVG is cheaper (a WebGL context costs more to set up than it saves).
WEBGL_POINTS = 5_000
Y_PAD = 0.06  # a compact chart's y range reaches this share of its span beyond the data, so a flat line is not clipped


def line_traces(
    metric: str,
    color: str,
    series: Series,
    view: View,
    ema_state: tuple[float, float] | None = None,
    *,
    dash: bool = False,
    share: bool = False,
) -> tuple[dict, dict, tuple[float, float]]:
    """The raw and smoothed traces of one metric (raw faint when smoothing is on); `dash`: a
    dashed line (the step's own work); `share`: its values read as percentages on hover."""
    x = x_values(series, view)
    smoothed, state = ema(series.values, view.smoothing, ema_state)
    smoothing_on = view.smoothing > 0
    trace_type = trace_type_for(len(series))
    shown = "%{y:.1%}" if share else "%{y:.4g}"
    raw = {
        "type": trace_type,
        "mode": "lines",
        "name": plotly_text(metric),
        "x": x,
        "y": gaps(series.values),
        "line": {"color": color, "width": 1 if smoothing_on else 1.6, **({"dash": "dash"} if dash else {})},
        "opacity": 0.3 if smoothing_on else 1.0,
        "legendgroup": plotly_text(metric),
        "showlegend": not smoothing_on,
        "hovertemplate": f"{plotly_text(metric)}<br>step %{{x}}: {shown}<extra></extra>",
        "connectgaps": False,
    }
    smooth = {
        "type": trace_type,
        "mode": "lines",
        "name": plotly_text(metric),
        "x": x,
        "y": gaps(smoothed),
        "visible": smoothing_on,
        "line": {"color": color, "width": 2, **({"dash": "dash"} if dash else {})},
        "legendgroup": plotly_text(metric),
        "showlegend": smoothing_on,
        "hovertemplate": f"{plotly_text(metric)} (EMA)<br>step %{{x}}: {shown}<extra></extra>",
    }
    return raw, smooth, state


def trace_type_for(points: int) -> str:
    """`scattergl` for a long series, `scatter` (SVG) otherwise."""
    return "scattergl" if points > WEBGL_POINTS else "scatter"


def nonfinite_points(metric: str, series: Series, view: View) -> tuple[list[Any], list[str]]:
    """x positions and hover texts of the NaN/Inf points of a series."""
    xs: list[Any] = []
    texts: list[str] = []
    x = x_values(series, view)
    for xi, step, value in zip(x, series.steps, series.values):
        if not math.isfinite(value):
            xs.append(xi)
            texts.append(f"{plotly_text(metric)} = {spell(value)} at step {step:,}")
    return xs, texts


def line_figure(
    panel: Panel,
    series: Mapping[str, Series],
    events: Sequence[Mapping[str, Any]] = (),
    notes: Sequence[Mapping[str, Any]] = (),
    view: View | None = None,
    *,
    vocab: Vocabulary,
    compact: bool = False,
) -> tuple[dict, dict[str, list[float]]]:
    """A line panel: each metric raw + smoothed, NaN/Inf crosses, events and notes drawn on it.
    `compact`: a small multiple, its y range padded so that a flat line at its extreme is drawn whole.

    Returns the figure and each metric's EMA state, which live updates continue from.
    """
    view = view or View()
    series = as_drawn(panel, series)
    colors = panel_colors(panel)
    traces: list[dict] = []
    states: dict[str, list[float]] = {}
    for metric in panel.metrics:
        s = series.get(metric) or Series([], [])
        raw, smooth, state = line_traces(
            metric, colors[metric], s, view, dash=metric in panel.compute_only, share=panel.share
        )
        traces += [raw, smooth]
        states[metric] = list(state)
    bad_x: list[Any] = []
    bad_text: list[str] = []
    for metric in panel.metrics:
        xs, texts = nonfinite_points(metric, series.get(metric) or Series([], []), view)
        bad_x += xs
        bad_text += texts
    traces.append(
        {
            "type": "scatter",
            "mode": "markers",
            "name": "NaN / Inf",
            "x": bad_x,
            "y": [NONFINITE_Y] * len(bad_x),
            "yaxis": "y2",
            "marker": {"symbol": "x", "color": vocab.worst_color, "size": 9},
            "text": bad_text,
            "hovertemplate": "%{text}<extra></extra>",
            "showlegend": bool(bad_x),
        }
    )
    panel_events = [e for e in events if e.get("metric") in panel.metrics or e.get("metric") is None]
    peak_x, peak_y, peak_text, peak_ids, peak_colors = [], [], [], [], []
    for event in panel_events:
        if event.get("metric") is None or vocab.is_hidden(event.get("status")):
            continue
        step = event.get("peak_step") if event.get("peak_step") is not None else event.get("start_step")
        y = value_at(series.get(event["metric"]) or Series([], []), step) if step is not None else None
        if y is None:
            continue
        peak_x.append(step_to_x(step, series.values(), view))
        peak_y.append(y)
        peak_text.append(
            f"<b>{event_label(event, vocab)}</b> · {event.get('severity')}<br>{plotly_text(event.get('summary') or '')}"
        )
        peak_ids.append(event.get("id"))
        peak_colors.append(event_color(event, vocab))
    traces.append(
        {
            "type": "scatter",
            "mode": "markers",
            "name": "events",
            "x": peak_x,
            "y": peak_y,
            "marker": {"symbol": "circle-open", "size": 13, "color": peak_colors, "line": {"width": 2.5}},
            "text": peak_text,
            "customdata": peak_ids,
            "hovertemplate": "%{text}<extra></extra>",
            "showlegend": False,
        }
    )
    layout = base_layout(panel.title, view, compact=compact)
    if panel.share:
        layout["yaxis"]["tickformat"] = ".0%"
    if not compact and len(panel.compute_only) < len(panel.metrics) and panel.compute_only:
        # what the dashed lines are, as the legend's title (above the chart, event labels need the room)
        layout["legend"]["title"] = {"text": COMPUTE_ONLY_NOTE, "side": "top", "font": {"size": 11}}
    if compact and not view.log_y:
        padded = padded_range([v for m in panel.metrics for v in (series.get(m) or Series([], [])).values])
        if padded is not None:
            layout["yaxis"]["range"] = padded
    if view.x_axis == "time" and view.start is not None and view.end is not None and view.end > view.start:
        layout["xaxis"]["range"] = [
            step_to_x(view.start, series.values(), view),
            step_to_x(view.end, series.values(), view),
        ]
        layout["xaxis"]["autorange"] = False
    shapes, labels = event_shapes(panel_events, series.values(), view, vocab)
    note_s, note_l = note_shapes([n for n in notes if n.get("metric") in (None, *panel.metrics)], series.values(), view)
    layout["shapes"] = shapes + note_s
    layout["annotations"] = stagger(labels, series.values(), view) + note_l
    if not any(len(series.get(m) or ()) for m in panel.metrics):
        layout["annotations"].append(empty_note("no points yet"))
    return {"data": traces, "layout": layout}, states


COMPUTE_ONLY_NOTE = "dashed: the step's own work only; the gap between it and the solid line is the wait for data"


def as_drawn(panel: Panel, series: Mapping[str, Series]) -> dict[str, Series]:
    """The series as the panel draws them: on a share panel, one logged in percent as its fraction."""
    if not panel.percent:
        return dict(series)
    return {m: (as_fraction(s) if m in panel.percent else s) for m, s in series.items()}


def as_fraction(series: Series) -> Series:
    """A share logged in percent (41) as the fraction it is (0.41); NaN and ±Inf kept."""
    return Series(series.steps, [v / 100 for v in series.values], series.times, series.downsampled)


def panel_colors(panel: Panel) -> dict[str, str]:
    """Each metric's colour on a line panel: the palette in order, a compute-only metric taking its
    whole step's counterpart's (its dashed line beside that solid one) where the panel has it."""
    partners = {m: p for m in panel.compute_only if (p := whole_step_partner(m, panel.metrics)) is not None}
    colors: dict[str, str] = {}
    for metric in panel.metrics:
        if metric not in partners:
            colors[metric] = PALETTE[len(colors) % len(PALETTE)]
    return {m: colors[partners[m]] if m in partners else colors[m] for m in panel.metrics}


def padded_range(values: Sequence[float]) -> list[float] | None:
    """The finite values' range widened by `Y_PAD` of its span each way (a flat series: ±1% of its
    level, or ±1 at zero); None when nothing is finite."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return None
    low, high = min(finite), max(finite)
    pad = (high - low) * Y_PAD if high > low else (abs(high) * 0.01 or 1.0)
    return [low - pad, high + pad]


Extension = tuple[int, list[Any], list[Any]]  # (trace index, x to append, y to append)


def line_appends(
    panel: Panel, fresh: Mapping[str, Series], view: View, states: Mapping[str, Sequence[float]]
) -> tuple[list[Extension], dict[str, list[float]]]:
    """What to append to a line panel drawn earlier (`line_figure`) for the new points `fresh`
    holds: each trace's extension, with x, gaps and smoothing exactly as the figure drew them, and
    each metric's EMA state to continue from next time."""
    extensions: list[Extension] = []
    new_states: dict[str, list[float]] = {}
    bad_x: list[Any] = []
    fresh = as_drawn(panel, fresh)
    for metric in panel.metrics:
        s = fresh.get(metric)
        if s is None or not len(s):
            continue
        raw, smooth = trace_indexes(panel, metric)
        x = x_values(s, view)
        smoothed, state = ema(s.values, view.smoothing, tuple(states[metric]) if metric in states else None)  # type: ignore[arg-type]
        new_states[metric] = list(state)
        extensions += [(raw, x, gaps(s.values)), (smooth, x, gaps(smoothed))]
        bad_x += [xi for xi, v in zip(x, s.values) if not math.isfinite(v)]
    if bad_x:
        extensions.append((nonfinite_trace_index(panel), bad_x, [NONFINITE_Y] * len(bad_x)))
    return extensions, new_states


def band_figure(
    panel: Panel, series: Mapping[str, Series], view: View | None = None, *, color: str = PALETTE[0]
) -> dict:
    """A histogram's quantiles over steps: the 5–95% band, the 25–75% band inside it, the median
    as a line, and the min and max dotted."""
    view = view or View()
    by_quantile = dict(zip(HISTOGRAM_QUANTILES, panel.metrics))
    base = panel.title.removesuffix(" (distribution)")

    def trace(quantile: str, **style: Any) -> dict:
        s = series.get(by_quantile[quantile]) or Series([], [])
        return {
            "type": "scatter",
            "mode": "lines",
            "x": x_values(s, view),
            "y": gaps(s.values),
            "name": f"{base} {quantile}",
            "legendgroup": base,
            "hovertemplate": f"{quantile}<br>step %{{x}}: %{{y:.4g}}<extra></extra>",
            **style,
        }

    edge = {"width": 0, "color": color}
    traces = [
        trace("p5", line=edge, showlegend=False),
        trace("p95", line=edge, fill="tonexty", fillcolor=rgba(color, 0.15), name=f"{base} 5–95%"),
        trace("p25", line=edge, showlegend=False),
        trace("p75", line=edge, fill="tonexty", fillcolor=rgba(color, 0.35), name=f"{base} 25–75%"),
        trace("median", line={"width": 2, "color": color}),
        trace("min", line={"width": 1, "color": color, "dash": "dot"}, showlegend=False),
        trace("max", line={"width": 1, "color": color, "dash": "dot"}, name=f"{base} min / max"),
    ]
    layout = base_layout(panel.title, view)
    layout["annotations"] = (
        [] if any(len(series.get(m) or ()) for m in panel.metrics) else [empty_note("no points yet")]
    )
    return {"data": traces, "layout": layout}
