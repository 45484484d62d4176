"""A distributed job's ranks side by side: one metric across the ranks as a rank × step heatmap
(`GET /runs/{id}/ranks/matrix`), on which a straggler is a stripe (its own work longer at every
step, its wait in the collectives shorter than its peers'), and the ranks the job's standing
events name, outlined in their severity's colour.

Pure: the API's JSON in, Plotly figure dicts and plain values out. The run page's Ranks section
draws with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from holter_charts.heatmap import row_outline
from holter_charts.marks import event_color, event_label
from holter_charts.series import View, decode_values, gaps
from holter_charts.style import base_layout, empty_note, plotly_text, rgba
from holter_charts.vocabulary import Vocabulary

SELECTED_COLOR = "#4c6ef5"  # the rank the reader picked (a link from an event, a click): the theme's indigo
ROW_PX = 24  # height of a rank's row, while the chart is within its bounds
MIN_HEIGHT, MAX_HEIGHT = 240, 720
LABELLED_ROWS = 64  # beyond this many ranks, Plotly picks which rows to label (a label a row would overlap)


def rank_label(rank: int, host: str | None = None) -> str:
    """A rank as the ranks view names it: "rank 2 (node-1)", or "rank 2" when its host is unknown."""
    return f"rank {rank} ({host})" if host else f"rank {rank}"


def ranks_named(events: Sequence[Mapping[str, Any]], vocab: Vocabulary) -> dict[int, list[Mapping[str, Any]]]:
    """Each rank the job's standing events about ranks name (`details.ranks` of an open event of
    the vocabulary's ranks group: a straggler, a hung or lost rank, one out of its peers' band),
    with those events, the worst first."""
    named: dict[int, list[Mapping[str, Any]]] = {}
    for event in events:
        if not vocab.is_rank_event(event.get("kind")) or not vocab.is_open(event.get("status")):
            continue
        for rank in event_ranks(event):
            named.setdefault(rank, []).append(event)
    for found in named.values():
        found.sort(key=lambda e: -vocab.severity_rank(e.get("severity")))
    return named


def event_ranks(event: Mapping[str, Any]) -> list[int]:
    """The ranks an event names (`details.ranks`), in order; none for an event that names none."""
    ranks = (event.get("details") or {}).get("ranks") or []
    return sorted({int(r) for r in ranks if isinstance(r, int) and not isinstance(r, bool)})


def matrix_cells(matrix: Mapping[str, Any]) -> tuple[list[float], list[int], list[list[float | None]]]:
    """(the middle step of each column, the rank of each row, each row's values) of a rank
    matrix as the API answers it; a non-finite or missing value is an empty cell."""
    width = int(matrix.get("bucket_width") or 1)
    x = [start + (width - 1) / 2 for start in matrix.get("bucket_starts") or []]
    ranks = [int(r) for r in matrix.get("ranks") or []]
    rows = [gaps(decode_values(row)) for row in matrix.get("values") or []]
    return x, ranks, rows


def rank_heatmap(
    matrix: Mapping[str, Any],
    *,
    hosts: Mapping[int, str | None],
    vocab: Vocabulary,
    events: Sequence[Mapping[str, Any]] = (),
    selected: int | None = None,
) -> dict:
    """One metric of every rank as a rank × step heatmap, rank 0 on top, each row named
    "rank N (host)". A rank a standing event names is outlined in its colour and labelled with
    the event's kind; the `selected` rank is outlined in the reader's colour."""
    x, ranks, rows = matrix_cells(matrix)
    metric = str(matrix.get("metric") or "")
    width = int(matrix.get("bucket_width") or 1)
    stat = str(matrix.get("stat") or "mean")
    title = f"{metric} by rank" + (f" · {stat} of {width} steps a cell" if width > 1 else "")
    layout = base_layout(title, View(), height=min(MAX_HEIGHT, max(MIN_HEIGHT, 110 + ROW_PX * len(ranks))))
    # each row at its rank on a numeric axis (a click reads the rank back from `y`), named by tick
    labels = [rank_label(rank, hosts.get(rank)) for rank in ranks]
    layout["yaxis"] = {
        "autorange": "reversed",  # rank 0 on top, as the table below lists them
        "automargin": True,
        "showgrid": False,
        "zeroline": False,
        "fixedrange": True,  # a zoom reads steps; every rank stays in view
    }
    if len(ranks) <= LABELLED_ROWS:
        layout["yaxis"].update(tickmode="array", tickvals=ranks, ticktext=labels)
    else:
        layout["yaxis"].update(title={"text": "rank"}, nticks=LABELLED_ROWS // 2)
    layout["xaxis"]["title"] = {"text": "step", "standoff": 4}
    layout["margin"] = {**layout["margin"], "t": 48}
    trace = {
        "type": "heatmap",
        "x": x,
        "y": ranks,
        "z": rows,
        "colorscale": "Viridis",
        "zsmooth": False,
        "ygap": 1 if len(ranks) <= LABELLED_ROWS else 0,  # rows apart while each is tall enough to read
        "colorbar": {"thickness": 10, "len": 0.9, "title": {"text": plotly_text(metric.rsplit("/", 1)[-1])}},
        "hovertemplate": "rank %{y}<br>step %{x:.0f}: %{z:.4g}<extra></extra>",
    }
    shapes: list[dict] = []
    annotations: list[dict] = []
    for rank, found in sorted(ranks_named(events, vocab).items()):
        if rank not in ranks:
            continue
        color = event_color(found[0], vocab)
        shapes.append(row_outline(rank, color))
        annotations.append(
            {
                "text": plotly_text(", ".join(dict.fromkeys(event_label(e, vocab) for e in found))),
                "xref": "paper",
                "yref": "y",
                "x": 0.995,
                "y": rank,
                "xanchor": "right",
                "showarrow": False,
                "font": {"size": 11, "color": color},
                "bgcolor": rgba("#ffffff", 0.85),
                "borderpad": 1,
            }
        )
    if selected is not None and selected in ranks:
        shapes.append(row_outline(selected, SELECTED_COLOR, width=3, dash="dot"))
    if not x or not ranks:
        annotations.append(empty_note("no points of this metric yet"))
    layout["shapes"] = shapes
    layout["annotations"] = annotations
    return {"data": [trace], "layout": layout}
