"""Chart building: pure functions from API data to Plotly figures (plain dicts).

Nothing here does I/O, so tests call these directly. Figures are plain dicts rather than
`plotly.graph_objects` because they are built on every refresh and validating a graph object
costs more than drawing it; the dicts are exactly what `dcc.Graph` receives.

A line panel's traces always come in the same order, so live updates can append by index:
for each metric a raw trace then its smoothed (EMA) trace, then one trace of non-finite points
(NaN/Inf drawn as red crosses along the top) and one trace of event peak markers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

SEVERITY_COLORS = {"critical": "#e03131", "warning": "#f08c00", "info": "#1c7ed6"}
QUIET_COLOR = "#868e96"  # acknowledged / dismissed events, notes
NOTE_COLOR = "#7048e8"
PALETTE = ["#1c7ed6", "#f76707", "#2f9e44", "#ae3ec9", "#0ca678", "#d6336c", "#5c7cfa", "#e8590c", "#74b816", "#15aabf"]
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf, "nan": math.nan, "inf": math.inf, "-inf": -math.inf}
KIND_LABELS = {
    "spike": "spike", "divergence": "divergence", "plateau": "plateau", "sawtooth": "sawtooth",
    "too_good": "too good", "level_shift": "level shift", "grad_norm_precursor": "grad-norm precursor",
    "no_learning_signal": "no learning signal", "activation_growth": "activation growth",
    "layer_dominance": "layer dominance", "systems_slowdown": "systems slowdown",
    "mismatch_off_zero": "mismatch off zero", "run_stalled": "stalled", "run_resumed": "resumed",
    "run_crashed": "crashed",
}

_LAYER = re.compile(r"^(?P<prefix>.*?)(?P<sep>[/._-]?)(?P<word>layers?|blocks?|h)[._/-]?(?P<layer>\d+)(?P<rest>.*)$", re.IGNORECASE)
_MISMATCH_WORDS = ("mismatch", "logp_diff", "logprob_diff", "logp_difference", "probs_diff", "vllm_kl", "logprob_abs_diff")
_THROUGHPUT_WORDS = ("tokens_per_s", "samples_per_s", "throughput", "tok/s", "tokens/s", "samples/s", "it/s")


# ---------------------------------------------------------------------------------- series


@dataclass
class Series:
    """One metric's points as the API returns them, values as floats (NaN and ±Inf included)."""

    steps: list[int]
    values: list[float]
    times: list[float | None] = field(default_factory=list)
    downsampled: bool = False

    @classmethod
    def from_api(cls, payload: Mapping[str, Any]) -> Series:
        """Parse a points read: non-finite values arrive as the strings "NaN", "Infinity", "-Infinity"."""
        return cls(
            steps=[int(s) for s in payload.get("steps", [])],
            values=parse_values(payload.get("values", [])),
            times=list(payload.get("times") or []),
            downsampled=bool(payload.get("downsampled", False)),
        )

    def __len__(self) -> int:
        return len(self.steps)


def parse_values(values: Iterable[Any]) -> list[float]:
    """Floats from API values, turning the JSON spellings of NaN and ±Inf back into floats."""
    out: list[float] = []
    for value in values:
        if isinstance(value, str):
            out.append(NON_FINITE.get(value, math.nan))
        elif value is None:
            out.append(math.nan)
        else:
            out.append(float(value))
    return out


def minmax_downsample(steps: Sequence[int], values: Sequence[float], buckets: int) -> tuple[list[int], list[float]]:
    """At most 2·`buckets` points keeping each bucket's min and max in step order, so a one-step
    spike survives; any non-finite value in a bucket is kept as well (NaN must never vanish).

    The dashboard uses this only when the API answered more points than asked for.
    """
    n = len(steps)
    if n <= 2 * buckets or buckets <= 0:
        return list(steps), list(values)
    x = np.asarray(steps, dtype=np.int64)
    y = np.asarray(values, dtype=np.float64)
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    keep: list[int] = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        if hi <= lo:
            continue
        chunk = y[lo:hi]
        finite = np.isfinite(chunk)
        picks = set(np.flatnonzero(~finite)[:2].tolist())
        if finite.any():
            idx = np.flatnonzero(finite)
            picks.add(int(idx[np.argmin(chunk[idx])]))
            picks.add(int(idx[np.argmax(chunk[idx])]))
        keep.extend(lo + i for i in sorted(picks))
    return x[keep].tolist(), y[keep].tolist()


def ema(values: Sequence[float], weight: float, state: tuple[float, float] | None = None) -> tuple[list[float], tuple[float, float]]:
    """TensorBoard-style debiased exponential moving average with smoothing `weight` in [0, 1).

    Non-finite values are skipped (the smoothed line carries on through a NaN; the raw line
    shows the NaN). `state` continues a previous call, so live appends smooth seamlessly; the
    returned state is (accumulator, debias weight).
    """
    acc, norm = state if state else (0.0, 0.0)
    out: list[float] = []
    if weight <= 0:
        return [v if math.isfinite(v) else math.nan for v in values], (acc, norm)
    for value in values:
        if math.isfinite(value):
            acc = acc * weight + (1 - weight) * value
            norm = norm * weight + (1 - weight)
        out.append(acc / norm if norm > 0 else math.nan)
    return out, (acc, norm)


def value_at(series: Series, step: int) -> float | None:
    """The finite value of `series` at the point nearest `step`, or None."""
    if not series.steps:
        return None
    i = int(np.searchsorted(np.asarray(series.steps), step))
    candidates = [j for j in (i - 1, i, i + 1) if 0 <= j < len(series.steps)]
    j = min(candidates, key=lambda k: abs(series.steps[k] - step))
    value = series.values[j]
    return value if math.isfinite(value) else None


def _clean(values: Sequence[float]) -> list[float | None]:
    """Plotly wants None (a gap) where a value is not finite."""
    return [v if math.isfinite(v) else None for v in values]


# ---------------------------------------------------------------------------------- panels


@dataclass(frozen=True)
class Panel:
    """One chart of the run page: a signal family drawn as lines, or per-layer metrics as a heatmap."""

    key: str
    title: str
    metrics: tuple[str, ...]
    kind: Literal["lines", "heatmap"] = "lines"
    layers: tuple[int, ...] = ()


def layer_of(name: str) -> tuple[str, int] | None:
    """(family key, layer index) for per-layer metric names such as `act_norm/layer.3`."""
    match = _LAYER.match(name)
    if not match:
        return None
    family = f"{match['prefix']}{match['sep']}{match['word']}*{match['rest']}"
    return family, int(match["layer"])


def _family_of(name: str) -> tuple[int, str]:
    lower = name.lower()
    if "loss" in lower:
        return 0, "Loss"
    if "grad" in lower and "norm" in lower:
        return 1, "Gradient norm"
    if "act" in lower and "norm" in lower:
        return 2, "Activation norm"
    if any(word in lower for word in _MISMATCH_WORDS) or ("logp" in lower and "diff" in lower):
        return 3, "Logprob mismatch"
    if any(word in lower for word in _THROUGHPUT_WORDS):
        return 4, "Throughput"
    if "step_time" in lower or lower.endswith("/step_time") or "time_per_step" in lower:
        return 5, "Step time"
    return 9, name


def plan_panels(metric_names: Iterable[str]) -> list[Panel]:
    """The run page's charts for these metrics: loss (train and eval together), gradient norm,
    activation norm, logprob mismatch, throughput, step time, a heatmap per per-layer family
    (two layers or more), then every other metric on its own, alphabetically."""
    names = sorted(set(metric_names))
    families: dict[str, dict[int, str]] = {}
    for name in names:
        layered = layer_of(name)
        if layered:
            families.setdefault(layered[0], {})[layered[1]] = name
    in_heatmap = {name for members in families.values() if len(members) >= 2 for name in members.values()}
    grouped: dict[tuple[int, str], list[str]] = {}
    for name in names:
        if name not in in_heatmap:
            grouped.setdefault(_family_of(name), []).append(name)
    panels: list[Panel] = []
    for (order, title), members in sorted(grouped.items()):
        if order < 9:
            # train loss first, then the rest (eval) in name order
            members.sort(key=lambda m: (not m.lower() in ("loss", "train_loss", "train/loss"), m))
            panels.append(Panel(key=_slug(title), title=title, metrics=tuple(members)))
    for family, members in sorted(families.items()):
        if len(members) >= 2:
            layers = tuple(sorted(members))
            title = family.replace("*", "").replace("//", "/").strip("/._-") + " per layer"
            panels.append(Panel(key=_slug(family), title=title, metrics=tuple(members[i] for i in layers), kind="heatmap", layers=layers))
    panels.extend(Panel(key=_slug(name), title=name, metrics=(name,)) for name in sorted(n for (o, _), ms in grouped.items() if o == 9 for n in ms))
    return panels


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "metric"


# ---------------------------------------------------------------------------------- view


@dataclass
class View:
    """What the user chose: smoothing, log scale, x axis, step range (None: everything)."""

    smoothing: float = 0.6
    log_y: bool = False
    x_axis: Literal["step", "time"] = "step"
    start: int | None = None
    end: int | None = None


def trace_indexes(panel: Panel, metric: str) -> tuple[int, int]:
    """(raw, smoothed) trace indexes of `metric` in a line panel's figure."""
    i = panel.metrics.index(metric)
    return 2 * i, 2 * i + 1


def nonfinite_trace_index(panel: Panel) -> int:
    return 2 * len(panel.metrics)


def _x(series: Series, view: View) -> list[Any]:
    if view.x_axis == "time":
        return [t * 1000 if t is not None else None for t in series.times] if series.times else list(series.steps)
    return list(series.steps)


def _x_ends(series: Iterable[Series], view: View) -> list[float]:
    """The first and last x of each series that has points, where they are numbers."""
    ends = []
    for s in series:
        x = _x(s, view)
        ends += [v for v in x[:1] + x[-1:] if isinstance(v, (int, float))]
    return ends


def wall_clock(series: Iterable[Series], most: int = 1000) -> list[list[float]]:
    """[step, wall time in ms] pairs of the first series that has wall times, at most `most` of
    them: what a zoom on a wall-time axis is turned back into steps with (assets/run_zoom.js)."""
    for s in series:
        pairs = [[step, t * 1000] for step, t in zip(s.steps, s.times) if t is not None]
        if pairs:
            every = max(1, math.ceil(len(pairs) / most))
            return pairs[::every] + ([pairs[-1]] if (len(pairs) - 1) % every else [])
    return []


def step_to_x(step: int | None, series: Iterable[Series], view: View) -> Any:
    """Where `step` falls on the x axis: the step itself, or its wall time (ms) interpolated."""
    if step is None or view.x_axis == "step":
        return step
    for s in series:
        pairs = [(st, t) for st, t in zip(s.steps, s.times) if t is not None]
        if pairs:
            xs, ts = zip(*pairs)
            return float(np.interp(step, xs, ts)) * 1000
    return step


def line_traces(metric: str, color: str, series: Series, view: View, ema_state: tuple[float, float] | None = None) -> tuple[dict, dict, tuple[float, float]]:
    """The raw and smoothed traces of one metric (raw faint when smoothing is on)."""
    x = _x(series, view)
    smoothed, state = ema(series.values, view.smoothing, ema_state)
    smoothing_on = view.smoothing > 0
    raw = {
        "type": "scatter", "mode": "lines", "name": metric, "x": x, "y": _clean(series.values),
        "line": {"color": color, "width": 1 if smoothing_on else 1.6}, "opacity": 0.3 if smoothing_on else 1.0,
        "legendgroup": metric, "showlegend": not smoothing_on, "hovertemplate": f"{metric}<br>step %{{x}}: %{{y:.4g}}<extra></extra>",
        "connectgaps": False,
    }
    smooth = {
        "type": "scatter", "mode": "lines", "name": metric, "x": x, "y": _clean(smoothed), "visible": smoothing_on,
        "line": {"color": color, "width": 2}, "legendgroup": metric, "showlegend": smoothing_on,
        "hovertemplate": f"{metric} (EMA)<br>step %{{x}}: %{{y:.4g}}<extra></extra>",
    }
    return raw, smooth, state


def nonfinite_points(metric: str, series: Series, view: View) -> tuple[list[Any], list[str]]:
    """x positions and hover texts of the NaN/Inf points of a series."""
    xs: list[Any] = []
    texts: list[str] = []
    x = _x(series, view)
    for xi, step, value in zip(x, series.steps, series.values):
        if not math.isfinite(value):
            xs.append(xi)
            texts.append(f"{metric} = {_spell(value)} at step {step:,}")
    return xs, texts


def _spell(value: float) -> str:
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def event_color(event: Mapping[str, Any]) -> str:
    if event.get("status") in ("acknowledged", "dismissed", "muted"):
        return QUIET_COLOR
    return SEVERITY_COLORS.get(event.get("severity") or "info", SEVERITY_COLORS["info"])


def event_label(event: Mapping[str, Any]) -> str:
    """Short label drawn on the chart: the kind, plus its status when someone handled it."""
    label = KIND_LABELS.get(event.get("kind") or "", str(event.get("kind") or "event").replace("_", " "))
    if event.get("status") in ("acknowledged", "dismissed", "muted"):
        label += f" ({event['status']})"
    return label


def event_shapes(events: Sequence[Mapping[str, Any]], series: Iterable[Series], view: View) -> tuple[list[dict], list[dict]]:
    """Shapes (a shaded span for a range, a line for a single step) and labels (the kind, the
    summary on hover) for events. Dismissed events are left out; handled ones are drawn grey."""
    series = list(series)
    shapes: list[dict] = []
    labels: list[dict] = []
    for event in events:
        if event.get("status") == "dismissed" or event.get("start_step") is None:
            continue
        color = event_color(event)
        start, end = event["start_step"], event.get("end_step") if event.get("end_step") is not None else event["start_step"]
        x0, x1 = step_to_x(start, series, view), step_to_x(end, series, view)
        if end > start:
            shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
                           "fillcolor": color, "opacity": 0.13, "line": {"width": 0}, "layer": "below"})
        else:
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x0, "x1": x0, "y0": 0, "y1": 1,
                           "line": {"color": color, "width": 1.5, "dash": "dot"}})
        peak = event.get("peak_step") if event.get("peak_step") is not None else start
        summary = event.get("summary") or event_label(event)
        labels.append({"x": step_to_x(peak, series, view), "xref": "x", "y": 1, "yref": "paper", "yanchor": "bottom",
                       "text": event_label(event), "hovertext": summary, "showarrow": False,
                       "font": {"color": color, "size": 11}, "bgcolor": "rgba(255,255,255,0.85)",
                       "bordercolor": color, "borderwidth": 1, "borderpad": 2,
                       "name": f"event-{event.get('id')}"})
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
    xs = _x_ends(series, view)
    xs += [label["x"] for label in labels if isinstance(label["x"], (int, float))]
    span = max((max(xs) - min(xs)) if xs else 1, 1)
    groups: list[list[dict]] = []
    for label in sorted(labels, key=lambda a: a["x"] if isinstance(a["x"], (int, float)) else 0):
        for group in groups:
            first = group[0]
            if (first["text"], first["font"]["color"]) == (label["text"], label["font"]["color"]) and isinstance(label["x"], (int, float)) \
                    and isinstance(first["x"], (int, float)) and abs(label["x"] - first["x"]) <= near * span:
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


def stagger(labels: list[dict], series: Iterable[Series], view: View, *, levels: int = 3, near: float = 0.09) -> list[dict]:
    """Lift labels that would overlap a neighbour (closer than `near` of the x span) onto
    up to `levels` rows, so two events at the same step stay readable."""
    series = list(series)
    xs = _x_ends(series, view)
    if not labels or not xs:
        return labels
    lo, hi = min(xs), max(xs)
    if view.start is not None and view.end is not None:
        lo, hi = step_to_x(view.start, series, view), step_to_x(view.end, series, view)
    span = max(hi - lo, 1)
    placed: list[tuple[float, int]] = []
    for label in sorted(labels, key=lambda a: a["x"] if isinstance(a["x"], (int, float)) else 0):
        x = label["x"] if isinstance(label["x"], (int, float)) else 0
        used = {level for px, level in placed if abs(px - x) < near * span}
        level = next((k for k in range(levels) if k not in used), levels - 1)
        label["yshift"] = 17 * level
        placed.append((x, level))
    return labels


def note_shapes(annotations: Sequence[Mapping[str, Any]], series: Iterable[Series], view: View) -> tuple[list[dict], list[dict]]:
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
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1,
                       "fillcolor": NOTE_COLOR, "opacity": 0.07, "line": {"color": NOTE_COLOR, "width": 1, "dash": "dash"},
                       "layer": "below"})
        text = str(note.get("text") or "")
        labels.append({"x": x0, "xref": "x", "xanchor": "left", "y": 0, "yref": "paper", "yanchor": "bottom",
                       "text": "✎ " + (text if len(text) <= 40 else text[:39] + "…"),
                       "hovertext": f"{note.get('author')}: {text}", "showarrow": False,
                       "font": {"color": NOTE_COLOR, "size": 11}, "bgcolor": "rgba(255,255,255,0.85)",
                       "name": f"note-{note.get('id')}"})
    return shapes, labels


def _base_layout(title: str, view: View, *, height: int = 320, uirevision: str = "keep") -> dict:
    # no axis title: the page's "by step / by wall time" control says it, and the legend sits there
    xaxis: dict[str, Any] = {"showgrid": True, "gridcolor": "#eef0f2", "zeroline": False}
    if view.x_axis == "time":
        xaxis["type"] = "date"
    elif view.start is not None and view.end is not None and view.end > view.start:
        xaxis["range"] = [view.start, view.end]
        xaxis["autorange"] = False
    return {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 14}},
        # the legend goes under the chart: above it, event labels need the room
        "height": height, "margin": {"l": 56, "r": 16, "t": 72, "b": 48},
        "paper_bgcolor": "white", "plot_bgcolor": "white",
        "font": {"family": "Inter, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12, "color": "#343a40"},
        "xaxis": xaxis,
        "yaxis": {"type": "log" if view.log_y else "linear", "showgrid": True, "gridcolor": "#eef0f2", "zeroline": False},
        "yaxis2": {"overlaying": "y", "range": [0, 1], "visible": False, "fixedrange": True},
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": -0.1, "yanchor": "top", "font": {"size": 11}},
        "hovermode": "closest",
        # keeps the user's zoom across live updates; changes when the view itself changes
        "uirevision": uirevision,
        "dragmode": "zoom",
    }


def line_figure(panel: Panel, series: Mapping[str, Series], events: Sequence[Mapping[str, Any]] = (),
                notes: Sequence[Mapping[str, Any]] = (), view: View | None = None) -> tuple[dict, dict[str, list[float]]]:
    """A line panel: each metric raw + smoothed, NaN/Inf crosses, events and notes drawn on it.

    Returns the figure and each metric's EMA state, which live updates continue from.
    """
    view = view or View()
    traces: list[dict] = []
    states: dict[str, list[float]] = {}
    for i, metric in enumerate(panel.metrics):
        s = series.get(metric) or Series([], [])
        raw, smooth, state = line_traces(metric, PALETTE[i % len(PALETTE)], s, view)
        traces += [raw, smooth]
        states[metric] = list(state)
    bad_x: list[Any] = []
    bad_text: list[str] = []
    for metric in panel.metrics:
        xs, texts = nonfinite_points(metric, series.get(metric) or Series([], []), view)
        bad_x += xs
        bad_text += texts
    traces.append({"type": "scatter", "mode": "markers", "name": "NaN / Inf", "x": bad_x, "y": [0.96] * len(bad_x),
                   "yaxis": "y2", "marker": {"symbol": "x", "color": SEVERITY_COLORS["critical"], "size": 9},
                   "text": bad_text, "hovertemplate": "%{text}<extra></extra>", "showlegend": bool(bad_x)})
    panel_events = [e for e in events if e.get("metric") in panel.metrics or e.get("metric") is None]
    peak_x, peak_y, peak_text, peak_ids, peak_colors = [], [], [], [], []
    for event in panel_events:
        if event.get("metric") is None or event.get("status") == "dismissed":
            continue
        step = event.get("peak_step") if event.get("peak_step") is not None else event.get("start_step")
        y = value_at(series.get(event["metric"]) or Series([], []), step) if step is not None else None
        if y is None:
            continue
        peak_x.append(step_to_x(step, series.values(), view))
        peak_y.append(y)
        peak_text.append(f"<b>{event_label(event)}</b> · {event.get('severity')}<br>{event.get('summary') or ''}")
        peak_ids.append(event.get("id"))
        peak_colors.append(event_color(event))
    traces.append({"type": "scatter", "mode": "markers", "name": "events", "x": peak_x, "y": peak_y,
                   "marker": {"symbol": "circle-open", "size": 13, "color": peak_colors, "line": {"width": 2.5}},
                   "text": peak_text, "customdata": peak_ids, "hovertemplate": "%{text}<extra></extra>", "showlegend": False})
    layout = _base_layout(panel.title, view)
    if view.x_axis == "time" and view.start is not None and view.end is not None and view.end > view.start:
        layout["xaxis"]["range"] = [step_to_x(view.start, series.values(), view), step_to_x(view.end, series.values(), view)]
        layout["xaxis"]["autorange"] = False
    shapes, labels = event_shapes(panel_events, series.values(), view)
    note_s, note_l = note_shapes([n for n in notes if n.get("metric") in (None, *panel.metrics)], series.values(), view)
    layout["shapes"] = shapes + note_s
    layout["annotations"] = stagger(labels, series.values(), view) + note_l
    if not any(len(series.get(m) or ()) for m in panel.metrics):
        layout["annotations"].append(_empty_note("no points yet"))
    return {"data": traces, "layout": layout}, states


def _empty_note(text: str) -> dict:
    return {"text": text, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False,
            "font": {"size": 13, "color": QUIET_COLOR}}


# ---------------------------------------------------------------------------------- heatmap


def family_matrix(layers: Mapping[int, Series], bins: int = 400) -> tuple[list[float], list[int], list[list[float | None]]]:
    """Per-layer series resampled onto one step grid: (step of each column, layer of each row,
    rows of values). Each cell holds the max of its layer's values in the column's step range,
    so a one-step excursion still colours its cell; a non-finite value makes the cell empty."""
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
            for col in np.unique(idx):
                chunk = values[idx == col]
                finite = chunk[np.isfinite(chunk)]
                row[int(col)] = float(finite.max()) if len(finite) == len(chunk) else None
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


def heatmap_figure(panel: Panel, series: Mapping[str, Series], events: Sequence[Mapping[str, Any]] = (),
                   view: View | None = None, bins: int = 400) -> dict:
    """A per-layer family as a layer × step heatmap with the worst layer outlined and named."""
    view = view or View()
    layers = {layer: series.get(name) or Series([], []) for layer, name in zip(panel.layers, panel.metrics)}
    x, order, z = family_matrix(layers, bins)
    layout = _base_layout(panel.title, View(smoothing=view.smoothing, x_axis="step", start=view.start, end=view.end), height=280)
    layout["yaxis"] = {"title": {"text": "layer"}, "tickmode": "array", "tickvals": order, "ticktext": [str(layer) for layer in order]}
    trace = {"type": "heatmap", "x": x, "y": order, "z": z, "colorscale": "Viridis", "zsmooth": False,
             "colorbar": {"thickness": 10, "len": 0.9}, "hovertemplate": "layer %{y}<br>step %{x:.0f}: %{z:.4g}<extra></extra>"}
    if view.log_y:
        trace["z"] = [[math.log10(v) if v is not None and v > 0 else None for v in row] for row in z]
        trace["colorbar"]["title"] = {"text": "log10"}
    worst = worst_layer(layers)
    shapes, labels = event_shapes([e for e in events if e.get("metric") in panel.metrics], [], View())
    if worst is not None and x:
        layer, value = worst
        shapes.append({"type": "rect", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": layer - 0.5, "y1": layer + 0.5,
                       "line": {"color": SEVERITY_COLORS["critical"], "width": 2}, "fillcolor": "rgba(0,0,0,0)"})
        layout["title"]["text"] = f"{panel.title} · <span style='color:{SEVERITY_COLORS['critical']}'>worst: layer {layer} ({value:.3g})</span>"
    if not x:
        labels.append(_empty_note("no points yet"))
    layout["shapes"] = [dict(shape, layer="above", opacity=0.25) if shape["type"] == "rect" else shape for shape in shapes]
    layout["annotations"] = stagger(labels, layers.values(), View())
    return {"data": [trace], "layout": layout}


# ---------------------------------------------------------------------------------- compare


def band_exits(ref: Series, other: Series, *, smoothing: float = 0.9, width: float = 3.0, min_rel: float = 0.02) -> list[tuple[int, int]]:
    """Step ranges where `other` leaves the reference's band: the reference's EMA ± `width` times
    its local residual spread (at least `min_rel` of the level). Both are compared on the
    reference's steps, by linear interpolation of `other`'s smoothed curve."""
    if len(ref) < 3 or len(other) < 2:
        return []
    ref_x = np.asarray(ref.steps, dtype=np.float64)
    ref_y = np.asarray(ref.values, dtype=np.float64)
    center = np.asarray(ema(ref.values, smoothing)[0])
    resid = np.abs(np.where(np.isfinite(ref_y), ref_y - center, 0.0))
    window = max(5, len(resid) // 50)
    spread = np.convolve(resid, np.ones(window) / window, mode="same")
    half = np.maximum(width * spread, min_rel * np.abs(center))
    other_smooth = np.asarray(ema(other.values, smoothing)[0])
    ox = np.asarray(other.steps, dtype=np.float64)
    ok = np.isfinite(other_smooth)
    if ok.sum() < 2:
        return []
    inside_range = (ref_x >= ox[ok][0]) & (ref_x <= ox[ok][-1])
    other_at = np.interp(ref_x, ox[ok], other_smooth[ok])
    out = inside_range & np.isfinite(center) & (np.abs(other_at - center) > half)
    ranges: list[tuple[int, int]] = []
    start = None
    for i, flag in enumerate(out):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            ranges.append((int(ref_x[start]), int(ref_x[i - 1])))
            start = None
    if start is not None:
        ranges.append((int(ref_x[start]), int(ref_x[-1])))
    return ranges


def compare_figure(metric: str, runs: Sequence[tuple[str, str, Series, Sequence[Mapping[str, Any]]]],
                   reference: str | None = None, view: View | None = None) -> dict:
    """One metric across runs, aligned by step. `runs` holds (run id, label, series, events).
    With a reference, its band is drawn and the spans where another run leaves it are shaded
    in that run's colour."""
    view = view or View()
    view = View(smoothing=view.smoothing, log_y=view.log_y, x_axis="step", start=view.start, end=view.end)
    traces: list[dict] = []
    shapes: list[dict] = []
    labels: list[dict] = []
    ref_series = next((s for run_id, _, s, _ in runs if run_id == reference), None)
    for i, (run_id, label, s, events) in enumerate(runs):
        color = PALETTE[i % len(PALETTE)]
        raw, smooth, _ = line_traces(label, color, s, view)
        raw["legendgroup"] = smooth["legendgroup"] = run_id
        if run_id == reference:
            smooth["line"]["width"] = 3
            smooth["name"] = raw["name"] = f"{label} (reference)"
        traces += [raw, smooth]
        # one marker per step: events found at the same step (a spike, the drift and its precursor) share it
        at_step: dict[int, list[Mapping[str, Any]]] = {}
        for event in events:
            if event.get("metric") == metric and event.get("status") != "dismissed":
                step = event.get("peak_step") if event.get("peak_step") is not None else event.get("start_step")
                if step is not None:
                    at_step.setdefault(step, []).append(event)
        for step, found in sorted(at_step.items()):
            y = value_at(s, step)
            if y is None:
                continue
            names = [event_label(e) for e in found]
            text = " · ".join(names) if len(names) <= 2 else f"{names[0]} +{len(names) - 1}"
            traces.append({"type": "scatter", "mode": "markers+text", "x": [step], "y": [y], "showlegend": False,
                           "marker": {"symbol": "circle-open", "size": 12, "color": color, "line": {"width": 2.5}},
                           "text": [text], "textposition": "top center", "textfont": {"color": color, "size": 10},
                           "hovertext": ["<br>".join(f"{label}: {e.get('summary') or event_label(e)}" for e in found)], "hoverinfo": "text"})
        if ref_series is not None and run_id != reference:
            for start, end in band_exits(ref_series, s):
                shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": start, "x1": max(end, start + 1), "y0": 0, "y1": 1,
                               "fillcolor": color, "opacity": 0.12, "line": {"width": 0}, "layer": "below"})
    if ref_series is not None and len(ref_series) >= 3:
        center = ema(ref_series.values, 0.9)[0]
        y = np.asarray(ref_series.values, dtype=np.float64)
        resid = np.abs(np.where(np.isfinite(y), y - np.asarray(center), 0.0))
        window = max(5, len(resid) // 50)
        half = np.maximum(3.0 * np.convolve(resid, np.ones(window) / window, mode="same"), 0.02 * np.abs(np.asarray(center)))
        upper = (np.asarray(center) + half).tolist()
        lower = (np.asarray(center) - half).tolist()
        traces.insert(0, {"type": "scatter", "mode": "lines", "x": list(ref_series.steps) + list(ref_series.steps)[::-1],
                          "y": _clean(upper) + _clean(lower)[::-1], "fill": "toself", "fillcolor": "rgba(134,142,150,0.15)",
                          "line": {"width": 0}, "name": "reference band", "hoverinfo": "skip"})
    layout = _base_layout(metric, view, height=460)
    layout["shapes"] = shapes
    layout["annotations"] = labels if runs else [_empty_note("pick runs on the runs page to compare them")]
    return {"data": traces, "layout": layout}


# ---------------------------------------------------------------------------------- reference


DRIFT_COLOR = "#e8590c"
BAND_FILL = "rgba(134,142,150,0.22)"


def drift_sentence(metric: str, drift: Mapping[str, Any]) -> str:
    """'eval_loss 0.12 above the reference from step 2,000 to 3,950 (40 points)'."""
    gap = abs(float(drift.get("mean_gap") or 0.0))
    return (f"{metric} {gap:.3g} {drift.get('direction', 'away from')} the reference from step {int(drift['start_step']):,} "
            f"to {int(drift['end_step']):,} ({drift.get('points', 0)} points)")


def reference_figure(comparison: Mapping[str, Any], *, run_label: str | None = None, reference_label: str | None = None) -> dict:
    """A run's metric against its reference run (`GET /runs/{id}/compare`): the reference's band
    filled between `low` and `high`, the reference's curve dashed, the run's curve on top, and
    each drift stretch shaded with its direction labelled."""
    metric = str(comparison.get("metric") or "")
    steps = [int(s) for s in comparison.get("steps") or []]
    values = parse_values(comparison.get("values") or [])
    low = parse_values(comparison.get("low") or [])
    high = parse_values(comparison.get("high") or [])
    reference = parse_values(comparison.get("reference") or [])
    run_label = run_label or str(comparison.get("run_id") or "run")
    reference_label = reference_label or str(comparison.get("reference_id") or "reference")
    traces = [
        # the band: the upper edge first (no fill), then the lower edge filled up to it
        {"type": "scatter", "mode": "lines", "x": steps, "y": _clean(high), "line": {"width": 0}, "hoverinfo": "skip",
         "showlegend": False, "legendgroup": "band", "name": "band high"},
        {"type": "scatter", "mode": "lines", "x": steps, "y": _clean(low), "line": {"width": 0}, "fill": "tonexty",
         "fillcolor": BAND_FILL, "name": "reference band", "legendgroup": "band", "hoverinfo": "skip"},
        {"type": "scatter", "mode": "lines", "x": steps, "y": _clean(reference), "name": f"{reference_label} (reference)",
         "line": {"color": QUIET_COLOR, "width": 1.5, "dash": "dash"},
         "hovertemplate": "reference<br>step %{x}: %{y:.4g}<extra></extra>"},
        {"type": "scatter", "mode": "lines", "x": steps, "y": _clean(values), "name": run_label,
         "line": {"color": PALETTE[0], "width": 2}, "hovertemplate": f"{run_label}<br>step %{{x}}: %{{y:.4g}}<extra></extra>"},
    ]
    shapes: list[dict] = []
    labels: list[dict] = []
    for drift in comparison.get("drifts") or []:
        start, end = int(drift["start_step"]), int(drift["end_step"])
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": start, "x1": max(end, start + 1), "y0": 0, "y1": 1,
                       "fillcolor": DRIFT_COLOR, "opacity": 0.12, "line": {"width": 0}, "layer": "below"})
        labels.append({"x": start, "xref": "x", "xanchor": "left", "y": 0.98, "yref": "paper", "yanchor": "top",
                       "text": f"drift {drift.get('direction', '')}".strip(), "hovertext": drift_sentence(metric, drift),
                       "showarrow": False, "font": {"color": DRIFT_COLOR, "size": 11}, "bgcolor": "rgba(255,255,255,0.85)",
                       "bordercolor": DRIFT_COLOR, "borderwidth": 1, "borderpad": 2})
    layout = _base_layout(f"{metric} against the reference", View(smoothing=0), height=380)
    focus = drift_focus(steps, [values, low, high, reference], comparison.get("drifts") or [])
    if focus is not None:
        # a gap of 0.1 is invisible on a loss falling from 10 to 2: open on the drifts (double-click shows everything)
        (x0, x1), (y0, y1) = focus
        layout["xaxis"].update(range=[x0, x1], autorange=False)
        layout["yaxis"].update(range=[y0, y1], autorange=False)
        layout["title"]["text"] += " <span style='font-size:11px;color:#868e96'>(zoomed on the drift; double-click for the whole run)</span>"
    layout["shapes"] = shapes
    layout["annotations"] = labels if steps else [_empty_note("the runs share no steps of this metric")]
    return {"data": traces, "layout": layout}


def drift_focus(steps: Sequence[int], curves: Sequence[Sequence[float]], drifts: Sequence[Mapping[str, Any]],
                *, context: float = 0.25, margin: float = 0.1) -> tuple[tuple[int, int], tuple[float, float]] | None:
    """The x range around every drift (plus `context` of its span, and at least 5% of the run, either
    side, within the data) and
    the y range of the curves there (plus `margin`), or None without drifts or finite values."""
    if not drifts or not steps:
        return None
    start = min(int(d["start_step"]) for d in drifts)
    end = max(int(d["end_step"]) for d in drifts)
    pad = max(1, int((end - start) * context), int((steps[-1] - steps[0]) * 0.05))  # a short drift still gets some context
    x0, x1 = max(steps[0], start - pad), min(steps[-1], end + pad)
    x = np.asarray(steps)
    inside = (x >= x0) & (x <= x1)
    ys = np.concatenate([np.asarray(c, dtype=np.float64)[inside] for c in curves if len(c) == len(steps)] or [np.array([])])
    ys = ys[np.isfinite(ys)]
    if not len(ys) or x1 <= x0:
        return None
    lo, hi = float(ys.min()), float(ys.max())
    room = (hi - lo) * margin or abs(hi) * margin or 1.0
    return (x0, x1), (lo - room, hi + room)
