"""What every chart shares: colours, the base layout, and user text made safe for Plotly."""

from __future__ import annotations

import html
import re
from typing import Any

from holter_charts.series import View

QUIET_COLOR = "#868e96"  # acknowledged / dismissed events, notes
NOTE_COLOR = "#7048e8"
PALETTE = ["#1c7ed6", "#f76707", "#2f9e44", "#ae3ec9", "#0ca678", "#d6336c", "#5c7cfa", "#e8590c", "#74b816", "#15aabf"]


# Characters that change how the text around them reads without being seen: bidirectional
# overrides, embeddings and isolates (`loss\u202egnp.exe` reads "lossexe.png"), direction marks
# and zero-width characters. The service spells them out in chat (holter_server.wire.visible);
# the dashboard, an API client of its own, does the same wherever it shows a name.
_INVISIBLE = re.compile(r"[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def visible(text: str) -> str:
    """`text` with every direction control and zero-width character spelled out (`\u202e`)."""
    return _INVISIBLE.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), str(text))


def plotly_text(text: str) -> str:
    """User text (metric and run names, notes, summaries) for a Plotly label: Plotly renders
    `<a href>`, `<b>`, `<br>` in names, titles and hover text as markup, so a name shows as written
    only escaped; direction controls are spelled out (`visible`)."""
    return html.escape(visible(text), quote=False)


COMPACT_HEIGHT = 190  # a small multiple (the run page's System section)


def base_layout(title: str, view: View, *, height: int = 320, uirevision: str = "keep", compact: bool = False) -> dict:
    """The layout every chart starts from; `compact`: a small multiple, with a small title, tight
    margins and no legend (one metric a chart)."""
    # no axis title: the page's "by step / by wall time" control says it, and the legend sits there
    xaxis: dict[str, Any] = {"showgrid": True, "gridcolor": "#eef0f2", "zeroline": False}
    if view.x_axis == "time":
        xaxis["type"] = "date"
    elif view.start is not None and view.end is not None and view.end > view.start:
        xaxis["range"] = [view.start, view.end]
        xaxis["autorange"] = False
    if compact:
        xaxis["nticks"] = 5
    layout = {
        "title": {"text": plotly_text(title), "x": 0.01, "xanchor": "left", "font": {"size": 14}},
        # the legend goes under the chart: above it, event labels need the room
        "height": height,
        "margin": {"l": 56, "r": 16, "t": 72, "b": 48},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "font": {"family": "Inter, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12, "color": "#343a40"},
        "xaxis": xaxis,
        "yaxis": {
            "type": "log" if view.log_y else "linear",
            "showgrid": True,
            "gridcolor": "#eef0f2",
            "zeroline": False,
        },
        "yaxis2": {"overlaying": "y", "range": [0, 1], "visible": False, "fixedrange": True},
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": -0.1, "yanchor": "top", "font": {"size": 11}},
        "hovermode": "closest",
        # keeps the user's zoom across live updates; changes when the view itself changes
        "uirevision": uirevision,
        "dragmode": "zoom",
    }
    if compact:
        layout["title"]["font"] = {"size": 12}
        layout["height"] = COMPACT_HEIGHT
        layout["margin"] = {"l": 44, "r": 10, "t": 34, "b": 28}
        layout["showlegend"] = False
        layout["yaxis"]["nticks"] = 4
        layout["yaxis"]["automargin"] = True  # long tick labels (0.163907) get the room they need
    return layout


def empty_note(text: str) -> dict:
    """A grey line in the middle of an empty chart."""
    return {
        "text": text,
        "xref": "paper",
        "yref": "paper",
        "x": 0.5,
        "y": 0.5,
        "showarrow": False,
        "font": {"size": 13, "color": QUIET_COLOR},
    }


def rgba(color: str, alpha: float) -> str:
    """`#rrggbb` with an alpha."""
    return f"rgba({int(color[1:3], 16)},{int(color[3:5], 16)},{int(color[5:7], 16)},{alpha})"
