"""An ablation's verdict drawn (`GET /api/v1/compare`): each measure's difference, mean of arm B
minus mean of arm A, with its confidence interval, against zero (a forest plot). The primary
measure is on top; where the test found nothing, the smallest difference it would have found 80%
of the time at these seeds is marked either side of zero, so a reader sees what "not detected"
could still hide. Every number is the service's (`analysis/verdicts.py`, `analysis/inference.py`):
nothing is computed here but where to draw it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from holter_charts.series import View
from holter_charts.style import QUIET_COLOR, base_layout, plotly_text
from holter_charts.vocabulary import Vocabulary

ROW_HEIGHT = 44  # pixels per measure
DETECTABLE_NAME = "smallest difference these seeds find 80% of the time"


def ordered_verdicts(comparison: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The comparison's verdicts, the primary measure first, the others in the service's order."""
    verdicts = list(comparison.get("verdicts") or [])
    return sorted(verdicts, key=lambda v: not v.get("primary"))


def measure_label(verdict: Mapping[str, Any]) -> str:
    """A row's label: where the measure was read, and whether it is the primary one."""
    where = str(verdict.get("where") or verdict.get("measure") or "")
    return f"{where} (primary)" if verdict.get("primary") else where


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def verdict_hover(verdict: Mapping[str, Any]) -> str:
    """What a row says on hover: the difference, its interval, the effect size and the test."""
    difference = _number(verdict.get("difference"))
    low, high = _number(verdict.get("ci_low")), _number(verdict.get("ci_high"))
    lines = [f"<b>{plotly_text(measure_label(verdict))}</b>: {plotly_text(str(verdict.get('verdict')))}"]
    if difference is not None:
        lines.append(f"B − A = {difference:+.4g}")
    if low is not None and high is not None:
        lines.append(f"{float(verdict.get('confidence') or 0.95):.0%} CI {low:+.4g} to {high:+.4g}")
    effect = _number(verdict.get("effect_size"))
    if effect is not None:
        lines.append(f"{abs(effect):.2g} seed SDs")
    if verdict.get("test"):
        test = plotly_text(str(verdict["test"]))
        if verdict.get("p_value") is not None:
            test += f", p = {verdict['p_value']:.2g}"
        if not verdict.get("primary") and verdict.get("p_adjusted") is not None:
            test += f" (adjusted {verdict['p_adjusted']:.2g})"
        lines.append(test)
    detectable = _number(verdict.get("detectable_difference"))
    if detectable is not None:
        lines.append(f"would find ±{detectable:.3g} or more 80% of the time")
    return "<br>".join(lines)


def verdict_interval_figure(comparison: Mapping[str, Any], *, vocab: Vocabulary) -> dict:
    """The comparison's measures as a forest plot: a row per measure (the primary on top), its
    difference B − A as a dot in its verdict's colour and its confidence interval as whiskers,
    zero as a dotted line, and, where nothing was detected, ticks at ± the smallest difference
    the test finds 80% of the time. A measure that could not be tested is an open dot."""
    verdicts = ordered_verdicts(comparison)
    metric = str(comparison.get("metric") or "")
    traces: list[dict] = []
    shown_verdicts: set[str] = set()
    xs: list[float] = [0.0]
    detectable_shown = False
    for verdict in verdicts:
        label = measure_label(verdict)
        name = str(verdict.get("verdict") or "unknown")
        color = vocab.verdict_color(name)
        difference = _number(verdict.get("difference"))
        low, high = _number(verdict.get("ci_low")), _number(verdict.get("ci_high"))
        detectable = _number(verdict.get("detectable_difference"))
        if detectable is not None:
            xs += [-detectable, detectable]
            traces.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "x": [-detectable, detectable],
                    "y": [label, label],
                    "marker": {"symbol": "line-ns-open", "size": 16, "color": QUIET_COLOR, "line": {"width": 2}},
                    "name": DETECTABLE_NAME,
                    "legendgroup": "detectable",
                    "showlegend": not detectable_shown,
                    "hovertemplate": f"±{detectable:.3g}: {DETECTABLE_NAME}<extra></extra>",
                }
            )
            detectable_shown = True
        if difference is None:
            continue
        xs.append(difference)
        point: dict[str, Any] = {
            "type": "scatter",
            "mode": "markers",
            "x": [difference],
            "y": [label],
            "name": plotly_text(name),
            "legendgroup": name,
            "showlegend": name not in shown_verdicts,
            "marker": {
                "color": color,
                "size": 13 if verdict.get("primary") else 10,
                "symbol": "circle" if low is not None else "circle-open",
                "line": {"width": 2, "color": color},
            },
            "hovertext": [verdict_hover(verdict)],
            "hoverinfo": "text",
        }
        if low is not None and high is not None:
            xs += [low, high]
            point["error_x"] = {
                "type": "data",
                "symmetric": False,
                "array": [high - difference],
                "arrayminus": [difference - low],
                "color": color,
                "thickness": 2.5 if verdict.get("primary") else 1.5,
                "width": 7,
            }
        shown_verdicts.add(name)
        traces.append(point)
    title = f"{metric}: arm B against arm A, measure by measure"
    layout = base_layout(title, View(smoothing=0), height=150 + ROW_HEIGHT * max(1, len(verdicts)))
    layout["margin"] = {"l": 16, "r": 16, "t": 56, "b": 56}
    layout["xaxis"].update(
        title={
            "text": f"B − A on {plotly_text(metric)} (left of 0: B lower; right of 0: B higher)",
            "font": {"size": 11},
        },
        zeroline=False,
        range=padded(xs),
    )
    layout["yaxis"].update(
        type="category",
        autorange="reversed",
        categoryorder="array",
        categoryarray=[measure_label(v) for v in verdicts],
        automargin=True,
        showgrid=False,
    )
    layout["legend"] = {
        "orientation": "h",
        "x": 1,
        "xanchor": "right",
        "y": 1.02,
        "yanchor": "bottom",
        "font": {"size": 11},
    }
    layout["margin"]["r"] = 110
    # each row's p-value at its right: a secondary measure's adjusted one, which decides its verdict
    layout["annotations"] = [
        {
            "x": 1.01,
            "xref": "paper",
            "xanchor": "left",
            "y": measure_label(v),
            "yref": "y",
            "text": p_text(v),
            "showarrow": False,
            "font": {"size": 11, "color": vocab.verdict_color(v.get("verdict"))},
        }
        for v in verdicts
        if p_text(v)
    ]
    layout["shapes"] = [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": 0,
            "x1": 0,
            "y0": 0,
            "y1": 1,
            "line": {"color": "#495057", "width": 1, "dash": "dot"},
            "layer": "below",
        }
    ]
    return {"data": traces, "layout": layout}


def p_text(verdict: Mapping[str, Any]) -> str:
    """'p 0.0002' for the primary measure, 'adj. p 0.69' for a secondary one; '' untested."""
    if verdict.get("primary"):
        return f"p {verdict['p_value']:.2g}" if verdict.get("p_value") is not None else ""
    return f"adj. p {verdict['p_adjusted']:.2g}" if verdict.get("p_adjusted") is not None else ""


def padded(values: Sequence[float], share: float = 0.12) -> list[float]:
    """A range over `values` (zero among them) with `share` of its span to spare either side."""
    low, high = min(values), max(values)
    room = (high - low) * share or abs(high) * share or 1.0
    return [low - room, high + room]
