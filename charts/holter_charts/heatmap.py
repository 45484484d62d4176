"""Per-layer families as a layer × step heatmap, the worst layer outlined and named."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from holter_charts.marks import event_shapes, stagger
from holter_charts.panels import Panel
from holter_charts.series import Series, View
from holter_charts.style import base_layout, empty_note, plotly_text
from holter_charts.vocabulary import Vocabulary


def family_matrix(
    layers: Mapping[int, Series], bins: int = 400
) -> tuple[list[float], list[int], list[list[float | None]]]:
    """Per-layer series resampled onto one step grid: (step of each column, layer of each row,
    rows of values). Each cell holds the max of its layer's values in the column's step range,
    so a one-step excursion still colours its cell; a non-finite value makes the cell empty. A
    cell no point falls in (a downsampled read has a point or two per bucket, and the grid's
    columns need not line up with the buckets) holds the cell before it: nothing happened there,
    which an empty cell would say otherwise."""
    present = {layer: s for layer, s in layers.items() if len(s)}
    if not present:
        return [], sorted(layers), [[] for _ in layers]
    lo = min(s.steps[0] for s in present.values())
    hi = max(s.steps[-1] for s in present.values())
    bins = max(1, min(bins, hi - lo + 1))
    edges = np.linspace(lo, hi + 1, bins + 1)
    centers = ((edges[:-1] + edges[1:]) / 2).tolist()
    rows: list[list[float | None]] = []
    order = sorted(layers)
    for layer in order:
        s = layers[layer]
        row: list[float | None] = [None] * bins
        if len(s):
            steps = np.asarray(s.steps, dtype=np.float64)
            values = np.asarray(s.values, dtype=np.float64)
            idx = np.clip(np.searchsorted(edges, steps, side="right") - 1, 0, bins - 1)
            filled = np.zeros(bins, dtype=bool)
            for col in np.unique(idx):
                chunk = values[idx == col]
                finite = chunk[np.isfinite(chunk)]
                row[int(col)] = float(finite.max()) if len(finite) == len(chunk) else None
                filled[int(col)] = True
            first, last = int(idx.min()), int(idx.max())
            for col in range(first + 1, last):
                if not filled[col]:
                    row[col] = row[col - 1]
        rows.append(row)
    return centers, order, rows


def worst_layer(layers: Mapping[int, Series]) -> tuple[int, float] | None:
    """The layer whose latest finite value is largest, with that value (None when all are empty)."""
    best: tuple[int, float] | None = None
    for layer, s in layers.items():
        finite = [v for v in s.values[-20:] if math.isfinite(v)]
        if finite and (best is None or finite[-1] > best[1]):
            best = (layer, finite[-1])
    return best


def row_outline(row: float, color: str, *, width: int = 2, dash: str = "solid") -> dict:
    """A rectangle around one row of a heatmap, across the whole plot (the worst layer, a named rank).
    `row` is the row's place on the y axis (its layer, its rank)."""
    return {
        "type": "rect",
        "xref": "paper",
        "yref": "y",
        "x0": 0,
        "x1": 1,
        "y0": row - 0.5,
        "y1": row + 0.5,
        "line": {"color": color, "width": width, "dash": dash},
        "fillcolor": "rgba(0,0,0,0)",
    }


def heatmap_figure(
    panel: Panel,
    series: Mapping[str, Series],
    events: Sequence[Mapping[str, Any]] = (),
    view: View | None = None,
    bins: int = 400,
    *,
    vocab: Vocabulary,
) -> dict:
    """A per-layer family as a layer × step heatmap with the worst layer outlined and named."""
    view = view or View()
    layers = {layer: series.get(name) or Series([], []) for layer, name in zip(panel.layers, panel.metrics)}
    x, order, z = family_matrix(layers, bins)
    layout = base_layout(
        panel.title, View(smoothing=view.smoothing, x_axis="step", start=view.start, end=view.end), height=280
    )
    layout["yaxis"] = {
        "title": {"text": "layer"},
        "tickmode": "array",
        "tickvals": order,
        "ticktext": [str(layer) for layer in order],
    }
    trace = {
        "type": "heatmap",
        "x": x,
        "y": order,
        "z": z,
        "colorscale": "Viridis",
        "zsmooth": False,
        "colorbar": {"thickness": 10, "len": 0.9},
        "hovertemplate": "layer %{y}<br>step %{x:.0f}: %{z:.4g}<extra></extra>",
    }
    if view.log_y:
        trace["z"] = [[math.log10(v) if v is not None and v > 0 else None for v in row] for row in z]
        trace["colorbar"]["title"] = {"text": "log10"}
    worst = worst_layer(layers)
    shapes, labels = event_shapes([e for e in events if e.get("metric") in panel.metrics], [], View(), vocab)
    if worst is not None and x:
        layer, value = worst
        shapes.append(row_outline(layer, vocab.worst_color))
        layout["title"]["text"] = (
            f"{plotly_text(panel.title)} · "
            f"<span style='color:{vocab.worst_color}'>worst: layer {layer} ({value:.3g})</span>"
        )
    if not x:
        labels.append(empty_note("no points yet"))
    layout["shapes"] = [
        dict(shape, layer="above", opacity=0.25) if shape["type"] == "rect" else shape for shape in shapes
    ]
    layout["annotations"] = stagger(labels, layers.values(), View())
    return {"data": [trace], "layout": layout}
