"""Charts across runs: one metric of several runs with the service's reference band and each
run's drifts from it (`GET /runs/{id}/compare`: median ± 4·MAD), two arms' seed bands
(`GET /compare`), and one run against its reference (the post-mortem).

The band and the drifts are the service's: the dashboard draws them, it computes no band of its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from holter_charts.line import line_traces
from holter_charts.marks import event_label
from holter_charts.series import Series, View, decode_values, gaps, value_at
from holter_charts.style import PALETTE, QUIET_COLOR, base_layout, empty_note, plotly_text, rgba
from holter_charts.vocabulary import Vocabulary

DRIFT_COLOR = "#e8590c"
BAND_FILL = "rgba(134,142,150,0.22)"
DRIFT_STRIP = 0.03  # the height of a run's row of drift strips, in the chart's height
TAIL_SHARE = 0.5  # two arms' seed bands open on the last half of the steps, where the curves flatten


def compare_figure(
    metric: str,
    runs: Sequence[tuple[str, str, Series, Sequence[Mapping[str, Any]]]],
    reference: str | None = None,
    view: View | None = None,
    *,
    vocab: Vocabulary,
    comparisons: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict:
    """One metric across runs, aligned by step. `runs` holds (run id, label, series, events).
    With a reference, the band the service puts around it is drawn (`comparisons`: each other
    run's `GET /runs/{id}/compare` against it) and each run's drifts out of the band are shaded
    in that run's colour."""
    view = view or View()
    view = View(smoothing=view.smoothing, log_y=view.log_y, x_axis="step", start=view.start, end=view.end)
    comparisons = comparisons or {}
    traces: list[dict] = []
    shapes: list[dict] = []
    for i, (run_id, label, s, events) in enumerate(runs):
        color = PALETTE[i % len(PALETTE)]
        raw, smooth, _ = line_traces(label, color, s, view)
        raw["legendgroup"] = smooth["legendgroup"] = run_id
        if run_id == reference:
            smooth["line"]["width"] = 3
            smooth["name"] = raw["name"] = f"{plotly_text(label)} (reference)"
        traces += [raw, smooth]
        traces += event_markers(metric, label, s, events, color, vocab)
        # a run's drifts: a strip of its colour along the bottom, one row per run, under the steps
        # where it stayed outside the band (shading the chart's whole height, a run outside from
        # start to end shaded everything, the band and the other runs included)
        row = sum(1 for r, *_ in runs[:i] if r in comparisons)
        for drift in (comparisons.get(run_id) or {}).get("drifts") or []:
            start, end = int(drift["start_step"]), int(drift["end_step"])
            shapes.append(
                {
                    "type": "rect",
                    "xref": "x",
                    "yref": "paper",
                    "x0": start,
                    "x1": max(end, start + 1),
                    "y0": DRIFT_STRIP * row,
                    "y1": DRIFT_STRIP * (row + 0.8),
                    "fillcolor": color,
                    "opacity": 0.7,
                    "line": {"width": 0},
                    "layer": "above",
                    "name": f"drift of {label}",
                }
            )
    band = widest_band(comparisons.values())
    if reference is not None and band is not None:
        traces[:0] = band_traces(band)
    layout = base_layout(metric, view, height=460)
    layout["shapes"] = shapes
    layout["annotations"] = [] if runs else [empty_note("pick runs on the runs page to compare them")]
    return {"data": traces, "layout": layout}


def event_markers(
    metric: str, label: str, series: Series, events: Sequence[Mapping[str, Any]], color: str, vocab: Vocabulary
) -> list[dict]:
    """One marker per step where the run `label` has events of `metric` (a spike, the drift and
    its precursor share it)."""
    at_step: dict[int, list[Mapping[str, Any]]] = {}
    for event in events:
        if event.get("metric") == metric and not vocab.is_hidden(event.get("status")):
            step = event.get("peak_step") if event.get("peak_step") is not None else event.get("start_step")
            if step is not None:
                at_step.setdefault(step, []).append(event)
    markers = []
    for step, found in sorted(at_step.items()):
        y = value_at(series, step)
        if y is None:
            continue
        names = [event_label(e, vocab) for e in found]
        text = " · ".join(names) if len(names) <= 2 else f"{names[0]} +{len(names) - 1}"
        markers.append(
            {
                "type": "scatter",
                "mode": "markers+text",
                "x": [step],
                "y": [y],
                "showlegend": False,
                "marker": {"symbol": "circle-open", "size": 12, "color": color, "line": {"width": 2.5}},
                "text": [text],
                "textposition": "top center",
                "textfont": {"color": color, "size": 10},
                "hovertext": [
                    "<br>".join(
                        f"{plotly_text(label)}: {plotly_text(e.get('summary') or event_label(e, vocab))}" for e in found
                    )
                ],
                "hoverinfo": "text",
            }
        )
    return markers


def widest_band(comparisons: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The comparison whose band covers the most steps: the reference's band is the same in each,
    over the steps it shares with that run."""
    found = [c for c in comparisons if c.get("steps")]
    return max(found, key=lambda c: len(c["steps"])) if found else None


def finite_band(
    steps: Sequence[Any], low: Sequence[float], high: Sequence[float]
) -> tuple[list[Any], list[float], list[float]]:
    """A band's points where both edges are finite: a gap in an edge would let Plotly's fill run
    to the axis or across the chart, shading what the band does not cover."""
    kept = [(x, lo, hi) for x, lo, hi in zip(steps, low, high) if math.isfinite(lo) and math.isfinite(hi)]
    return [k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept]


def band_traces(comparison: Mapping[str, Any]) -> list[dict]:
    """The reference's band from a comparison: the upper edge (no fill), then the lower edge filled up to it."""
    steps, low, high = finite_band(
        [int(s) for s in comparison.get("steps") or []],
        decode_values(comparison.get("low") or []),
        decode_values(comparison.get("high") or []),
    )
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "x": steps,
            "y": high,
            "line": {"width": 0},
            "hoverinfo": "skip",
            "showlegend": False,
            "legendgroup": "band",
            "name": "band high",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "x": steps,
            "y": low,
            "line": {"width": 0},
            "fill": "tonexty",
            "fillcolor": BAND_FILL,
            "name": "reference band",
            "legendgroup": "band",
            "hoverinfo": "skip",
        },
    ]


def seed_group_traces(metric: str, band: Mapping[str, Any]) -> list[dict]:
    """A run's seed group on `metric` (its other seeds' min–max filled, their median dashed), to
    be drawn before, so behind, the run's own curve. `band`: `steps`, `low`, `high`, `median` and
    how many `seeds` (services.postmortem.seed_group_of)."""
    shown, seeds = plotly_text(metric), band.get("seeds")
    group = f"{seeds}-seed group" if seeds else "seed group"
    steps = [int(s) for s in band.get("steps") or []]

    def edge(key: str) -> list[float | None]:
        return gaps(decode_values(band.get(key) or []))

    return [
        {
            "type": "scatter",
            "mode": "lines",
            "x": steps,
            "y": edge("low"),
            "line": {"width": 0, "color": rgba(QUIET_COLOR, 0.3)},
            "showlegend": False,
            "hoverinfo": "skip",
            "legendgroup": f"band {shown}",
            "name": f"{shown}: {group} min",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "x": steps,
            "y": edge("high"),
            "fill": "tonexty",
            "fillcolor": rgba(QUIET_COLOR, 0.18),
            "line": {"width": 0, "color": rgba(QUIET_COLOR, 0.3)},
            "legendgroup": f"band {shown}",
            "name": f"{shown}: {group} min–max",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "x": steps,
            "y": edge("median"),
            "line": {"width": 1.2, "dash": "dash", "color": rgba(QUIET_COLOR, 0.9)},
            "legendgroup": f"band {shown}",
            "name": f"{shown}: {group} median",
        },
    ]


def seed_band_figure(comparison: Mapping[str, Any]) -> dict:
    """Two arms of `GET /api/v1/compare` as the service drew them: each arm's median, its min–max
    band (light) and its median ± robust spread (darker). A one-run arm is its own median."""
    traces: list[dict] = []
    for i, key in enumerate(("a", "b")):
        arm = comparison[key]
        band, color = arm["band"], PALETTE[i % len(PALETTE)]
        steps = band["steps"]
        median = decode_values(band["median"])
        group = len(arm["run_ids"]) > 1
        if group:
            low, high, spread = decode_values(band["low"]), decode_values(band["high"]), decode_values(band["spread"])
            edge_steps, low_edge, high_edge = finite_band(steps, low, high)
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": edge_steps + edge_steps[::-1],
                    "y": high_edge + low_edge[::-1],
                    "fill": "toself",
                    "fillcolor": rgba(color, 0.12),
                    "line": {"width": 0},
                    "legendgroup": key,
                    "name": f"{arm['label']}: min–max",
                    "hoverinfo": "skip",
                }
            )
            spread_steps, lower, upper = finite_band(
                steps, [m - s for m, s in zip(median, spread)], [m + s for m, s in zip(median, spread)]
            )
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": spread_steps + spread_steps[::-1],
                    "y": upper + lower[::-1],
                    "fill": "toself",
                    "fillcolor": rgba(color, 0.3),
                    "line": {"width": 0},
                    "legendgroup": key,
                    "name": f"{arm['label']}: median ± robust spread",
                    "hoverinfo": "skip",
                }
            )
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": steps,
                "y": gaps(median),
                "line": {"color": color, "width": 2},
                "legendgroup": key,
                "name": f"{arm['label']}{': median' if group else ''}",
            }
        )
    layout = base_layout(comparison["metric"], View(), height=420)
    # the arms part where the curves flatten: open on the last TAIL_SHARE of the steps, the y axis
    # fitted to the bands there (the whole run is a double-click away)
    ends = [
        (arm["band"]["steps"], decode_values(arm["band"]["low"]), decode_values(arm["band"]["high"]))
        for arm in (comparison["a"], comparison["b"])
        if arm["band"]["steps"]
    ]
    if ends:
        first, last = min(e[0][0] for e in ends), max(e[0][-1] for e in ends)
        start = last - TAIL_SHARE * (last - first)
        shown = [
            v
            for steps, low, high in ends
            for x, lo, hi in zip(steps, low, high)
            if x >= start
            for v in (lo, hi)
            if math.isfinite(v)
        ]
        if shown and last > first:
            pad = 0.1 * (max(shown) - min(shown) or abs(max(shown)) or 1.0)
            layout["xaxis"]["range"] = [start, last]
            layout["yaxis"]["range"] = [min(shown) - pad, max(shown) + pad]
    return {"data": traces, "layout": layout}


def drift_sentence(metric: str, drift: Mapping[str, Any]) -> str:
    """'eval_loss 0.12 above the reference from step 2,000 to 3,950 (40 points)'."""
    gap = abs(float(drift.get("mean_gap") or 0.0))
    where = drift.get("direction", "away from")
    return (
        f"{metric} {gap:.3g} {where} the reference from step {int(drift['start_step']):,} "
        f"to {int(drift['end_step']):,} ({drift.get('points', 0)} points)"
    )


def reference_figure(
    comparison: Mapping[str, Any], *, run_label: str | None = None, reference_label: str | None = None
) -> dict:
    """A run's metric against its reference run (`GET /runs/{id}/compare`): the reference's band
    filled between `low` and `high`, the reference's curve dashed, the run's curve on top, and
    each drift stretch shaded with its direction labelled."""
    metric = str(comparison.get("metric") or "")
    steps = [int(s) for s in comparison.get("steps") or []]
    values = decode_values(comparison.get("values") or [])
    low = decode_values(comparison.get("low") or [])
    high = decode_values(comparison.get("high") or [])
    reference = decode_values(comparison.get("reference") or [])
    run_label = run_label or str(comparison.get("run_id") or "run")
    reference_label = reference_label or str(comparison.get("reference_id") or "reference")
    traces = [
        *band_traces(comparison),
        {
            "type": "scatter",
            "mode": "lines",
            "x": steps,
            "y": gaps(reference),
            "name": f"{plotly_text(reference_label)} (reference)",
            "line": {"color": QUIET_COLOR, "width": 1.5, "dash": "dash"},
            "hovertemplate": "reference<br>step %{x}: %{y:.4g}<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "x": steps,
            "y": gaps(values),
            "name": plotly_text(run_label),
            "line": {"color": PALETTE[0], "width": 2},
            "hovertemplate": f"{plotly_text(run_label)}<br>step %{{x}}: %{{y:.4g}}<extra></extra>",
        },
    ]
    shapes: list[dict] = []
    labels: list[dict] = []
    for drift in comparison.get("drifts") or []:
        start, end = int(drift["start_step"]), int(drift["end_step"])
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": start,
                "x1": max(end, start + 1),
                "y0": 0,
                "y1": 1,
                "fillcolor": DRIFT_COLOR,
                "opacity": 0.12,
                "line": {"width": 0},
                "layer": "below",
            }
        )
        labels.append(
            {
                "x": start,
                "xref": "x",
                "xanchor": "left",
                "y": 0.98,
                "yref": "paper",
                "yanchor": "top",
                "text": f"drift {drift.get('direction', '')}".strip(),
                "hovertext": drift_sentence(metric, drift),
                "showarrow": False,
                "font": {"color": DRIFT_COLOR, "size": 11},
                "bgcolor": "rgba(255,255,255,0.85)",
                "bordercolor": DRIFT_COLOR,
                "borderwidth": 1,
                "borderpad": 2,
            }
        )
    layout = base_layout(f"{metric} against the reference", View(smoothing=0), height=380)
    focus = drift_focus(steps, [values, low, high, reference], comparison.get("drifts") or [])
    if focus is not None:
        # a gap of 0.1 is invisible on a loss falling from 10 to 2: open on the drifts (double-click shows everything)
        (x0, x1), (y0, y1) = focus
        layout["xaxis"].update(range=[x0, x1], autorange=False)
        layout["yaxis"].update(range=[y0, y1], autorange=False)
        layout["title"]["text"] += (
            " <span style='font-size:11px;color:#868e96'>(zoomed on the drift; double-click for the whole run)</span>"
        )
    layout["shapes"] = shapes
    layout["annotations"] = labels if steps else [empty_note("the runs share no steps of this metric")]
    return {"data": traces, "layout": layout}


def drift_focus(
    steps: Sequence[int],
    curves: Sequence[Sequence[float]],
    drifts: Sequence[Mapping[str, Any]],
    *,
    margin: float = 0.1,
) -> tuple[tuple[int, int], tuple[float, float]] | None:
    """The x range the service serves with the drifts (`zoom` on each, the one window every page
    opens an event, a note or a drift on; several drifts: from the first window's start to the
    last one's end) and the y range of the curves there (plus `margin`), or None without a drift
    window or finite values there."""
    windows = [d["zoom"] for d in drifts if d.get("zoom")]
    if not windows or not steps:
        return None
    x0, x1 = min(int(w["start"]) for w in windows), max(int(w["end"]) for w in windows)
    x = np.asarray(steps)
    inside = (x >= x0) & (x <= x1)
    ys = np.concatenate(
        [np.asarray(c, dtype=np.float64)[inside] for c in curves if len(c) == len(steps)] or [np.array([])]
    )
    ys = ys[np.isfinite(ys)]
    if not len(ys) or x1 <= x0:
        return None
    lo, hi = float(ys.min()), float(ys.max())
    room = (hi - lo) * margin or abs(hi) * margin or 1.0
    return (x0, x1), (lo - room, hi + room)
