"""Events and notes drawn on a chart: shaded spans or lines, labels above the plot (merged and
staggered so that a family's many events stay readable), notes as dashed violet spans."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from holter_charts.series import Series, View, step_to_x, x_ends
from holter_charts.style import NOTE_COLOR, QUIET_COLOR, plotly_text
from holter_charts.vocabulary import Vocabulary


def event_color(event: Mapping[str, Any], vocab: Vocabulary) -> str:
    if event.get("status") in vocab.handled_statuses:
        return QUIET_COLOR
    return vocab.color(event.get("severity"))


def event_label(event: Mapping[str, Any], vocab: Vocabulary) -> str:
    """Short label drawn on the chart: the kind, plus its status when someone handled it."""
    label = vocab.event_kind_label(event.get("kind"))
    if event.get("status") in vocab.handled_statuses:
        label += f" ({event['status']})"
    return label


def event_shapes(
    events: Sequence[Mapping[str, Any]], series: Iterable[Series], view: View, vocab: Vocabulary
) -> tuple[list[dict], list[dict]]:
    """Shapes (a shaded span for a range, a line for a single step) and labels (the kind, the
    summary on hover) for events. Dismissed (hidden) events are left out; handled ones are drawn grey."""
    series = list(series)
    shapes: list[dict] = []
    labels: list[dict] = []
    for event in events:
        if vocab.is_hidden(event.get("status")) or event.get("start_step") is None:
            continue
        color = event_color(event, vocab)
        start, end = (
            event["start_step"],
            event.get("end_step") if event.get("end_step") is not None else event["start_step"],
        )
        x0, x1 = step_to_x(start, series, view), step_to_x(end, series, view)
        if end > start:
            shapes.append(
                {
                    "type": "rect",
                    "xref": "x",
                    "yref": "paper",
                    "x0": x0,
                    "x1": x1,
                    "y0": 0,
                    "y1": 1,
                    "fillcolor": color,
                    "opacity": 0.13,
                    "line": {"width": 0},
                    "layer": "below",
                }
            )
        else:
            shapes.append(
                {
                    "type": "line",
                    "xref": "x",
                    "yref": "paper",
                    "x0": x0,
                    "x1": x0,
                    "y0": 0,
                    "y1": 1,
                    "line": {"color": color, "width": 1.5, "dash": "dot"},
                }
            )
        peak = event.get("peak_step") if event.get("peak_step") is not None else start
        summary = plotly_text(event.get("summary") or event_label(event, vocab))
        labels.append(
            {
                "x": step_to_x(peak, series, view),
                "xref": "x",
                "y": 1,
                "yref": "paper",
                "yanchor": "bottom",
                "text": event_label(event, vocab),
                "hovertext": summary,
                "showarrow": False,
                "font": {"color": color, "size": 11},
                "bgcolor": "rgba(255,255,255,0.85)",
                "bordercolor": color,
                "borderwidth": 1,
                "borderpad": 2,
                "name": f"event-{event.get('id')}",
            }
        )
    return _merged_spans(shapes), _merged_labels(labels, series, view)


def _merged_spans(shapes: list[dict]) -> list[dict]:
    """One shaded span where events of one colour overlap (several metrics of a family often
    report the same stretch: stacked, their shading would hide the curve), one line per step."""
    out: list[dict] = []
    seen_lines: set[tuple[Any, Any]] = set()
    by_color: dict[str, list[dict]] = {}
    for shape in shapes:
        if shape["type"] == "rect":
            by_color.setdefault(shape["fillcolor"], []).append(shape)
        elif (key := (shape["x0"], shape["line"]["color"])) not in seen_lines:
            seen_lines.add(key)
            out.append(shape)
    for spans in by_color.values():
        merged: list[dict] = []
        for span in sorted(spans, key=lambda r: r["x0"]):
            if merged and span["x0"] <= merged[-1]["x1"]:
                merged[-1]["x1"] = max(merged[-1]["x1"], span["x1"])
            else:
                merged.append(dict(span))
        out.extend(merged)
    return out


def _merged_labels(labels: list[dict], series: list[Series], view: View, near: float = 0.03) -> list[dict]:
    """One label for events of the same kind and colour close together ("sawtooth ×5"), with
    every summary in its hover text."""
    xs = x_ends(series, view)
    xs += [label["x"] for label in labels if isinstance(label["x"], (int, float))]
    span = max((max(xs) - min(xs)) if xs else 1, 1)
    groups: list[list[dict]] = []
    for label in sorted(labels, key=lambda a: a["x"] if isinstance(a["x"], (int, float)) else 0):
        for group in groups:
            first = group[0]
            if (
                (first["text"], first["font"]["color"]) == (label["text"], label["font"]["color"])
                and isinstance(label["x"], (int, float))
                and isinstance(first["x"], (int, float))
                and abs(label["x"] - first["x"]) <= near * span
            ):
                group.append(label)
                break
        else:
            groups.append([label])
    out = []
    for group in groups:
        if len(group) == 1:
            out.append(group[0])
            continue
        summaries = [g["hovertext"] for g in group]
        hover = "<br>".join(summaries[:4]) + (f"<br>… and {len(summaries) - 4} more" if len(summaries) > 4 else "")
        out.append(dict(group[0], text=f"{group[0]['text']} ×{len(group)}", hovertext=hover))
    return out


# How wide a label is on screen, to keep two from overlapping: the plot area of a half-width run
# page chart is about this many pixels, and an 11 px label about this many per character.
PLOT_WIDTH_PX = 520.0
LABEL_CHAR_PX = 6.6
LABEL_PAD_PX = 10.0


def label_width(label: Mapping[str, Any], span: float) -> float:
    """A label's width in x units, for a chart whose x axis spans `span`."""
    return (len(str(label.get("text") or "")) * LABEL_CHAR_PX + LABEL_PAD_PX) / PLOT_WIDTH_PX * span


def stagger(labels: list[dict], series: Iterable[Series], view: View, *, levels: int = 3) -> list[dict]:
    """Lift labels that would overlap a neighbour onto up to `levels` rows, so two events at the
    same step stay readable. A label that finds no free row is folded into the label it would
    cover ("divergence +1", its summary added to the hover text) rather than drawn over it."""
    series = list(series)
    xs = x_ends(series, view)
    if not labels or not xs:
        return labels
    lo, hi = min(xs), max(xs)
    if view.start is not None and view.end is not None:
        lo, hi = step_to_x(view.start, series, view), step_to_x(view.end, series, view)
    span = max(hi - lo, 1)
    rows: list[list[dict]] = [[] for _ in range(levels)]
    shown: list[dict] = []

    def x_of(label: Mapping[str, Any]) -> float:
        return float(label["x"]) if isinstance(label["x"], (int, float)) else 0.0

    def overlaps(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
        return abs(x_of(a) - x_of(b)) < (label_width(a, span) + label_width(b, span)) / 2

    for label in sorted(labels, key=x_of):
        free = next((k for k, row in enumerate(rows) if not any(overlaps(label, other) for other in row)), None)
        if free is None:
            host = next(other for other in rows[-1] if overlaps(label, other))
            host["folded"] = host.get("folded", 0) + 1
            host["text"] = f"{host['base_text']} +{host['folded']}"
            host["hovertext"] = f"{host.get('hovertext') or ''}<br>{label.get('hovertext') or label.get('text', '')}"
            continue
        label["yshift"] = 17 * free
        label["base_text"] = label.get("text", "")
        rows[free].append(label)
        shown.append(label)
    for label in shown:
        label.pop("base_text", None)
        label.pop("folded", None)
    return shown


def note_shapes(
    annotations: Sequence[Mapping[str, Any]], series: Iterable[Series], view: View
) -> tuple[list[dict], list[dict]]:
    """People's notes on a step range: a violet outlined span with the text on hover."""
    series = list(series)
    shapes: list[dict] = []
    labels: list[dict] = []
    for note in annotations:
        if note.get("start_step") is None:
            continue
        start = note["start_step"]
        end = note["end_step"] if note.get("end_step") is not None else start
        x0, x1 = step_to_x(start, series, view), step_to_x(end, series, view)
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": x0,
                "x1": x1,
                "y0": 0,
                "y1": 1,
                "fillcolor": NOTE_COLOR,
                "opacity": 0.07,
                "line": {"color": NOTE_COLOR, "width": 1, "dash": "dash"},
                "layer": "below",
            }
        )
        text = str(note.get("text") or "")
        labels.append(
            {
                "x": x0,
                "xref": "x",
                "xanchor": "left",
                "y": 0,
                "yref": "paper",
                "yanchor": "bottom",
                "text": "✎ " + plotly_text(text if len(text) <= 40 else text[:39] + "…"),
                "hovertext": plotly_text(f"{note.get('author')}: {text}"),
                "showarrow": False,
                "font": {"color": NOTE_COLOR, "size": 11},
                "bgcolor": "rgba(255,255,255,0.85)",
                "name": f"note-{note.get('id')}",
            }
        )
    return shapes, labels
