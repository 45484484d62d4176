"""Reading a run and drawing its charts: the snapshot the page polls, the series at chart
resolution (zoomed ranges at full resolution), the charts themselves, and the live appends.

Every read goes through the API; the service downsamples (min/max per bucket, a NaN is never
dropped), so the page draws what it gets.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass
from typing import Any

import dash
import dash_mantine_components as dmc
from dash import dcc, no_update
from holter_charts.figures import panel_figure
from holter_charts.line import line_appends
from holter_charts.panels import Panel, plan_panels
from holter_charts.series import Series, View, wall_clock
from holter_charts.vocabulary import Vocabulary

from holter_dashboard.api import ApiError, HolterAPI, optional
from holter_dashboard.components import empty_state, error_alert
from holter_dashboard.pages.run.views import metrics_list, run_header, run_info

MAX_POINTS = 1200  # per metric and chart: about two per horizontal pixel of a half-width chart, min and max
EDGE_POINTS = 300  # outside a zoomed range, for context and panning
LIVE_READ_LIMIT = 20_000
GRAPH_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["lasso2d", "toImage"]}


@dataclass
class Snapshot:
    """The run as the page last read it: its header, chart plan, events and notes."""

    run: dict[str, Any] | None
    header: Any
    panels: list[dict[str, Any]]
    marks: dict[str, Any]
    vocab: Vocabulary | None = None

    @property
    def metric_names(self) -> list[str]:
        return sorted(m["name"] for m in (self.run or {}).get("metrics") or [])


@dataclass
class FirstRender:
    """Everything the page shows when it opens; None where a part could not be read."""

    snapshot: Snapshot
    info: Any = None
    charts: Any = None
    live: dict[str, Any] | None = None
    metrics: Any = None


async def first_render(api: HolterAPI, run_id: str, view: dict[str, Any]) -> FirstRender:
    snap = await read_snapshot(api, run_id)
    if snap.run is None:
        return FirstRender(snap)
    charts, live = await render_charts(api, run_id, snap.panels, view, snap.marks)
    return FirstRender(
        snap,
        run_info(snap.run, can_edit="notes" in snap.run),
        charts,
        live,
        metrics_list(snap.run, snap.vocab) if snap.vocab else None,
    )


async def load_series(
    api: HolterAPI, run_id: str, metrics: list[str], view: View
) -> tuple[dict[str, Series], list[str]]:
    """The points to draw: the whole run at chart resolution, or a zoomed range at full
    resolution with coarse context either side (so panning shows something and live points
    append after a continuous line)."""
    if view.start is not None and view.end is not None:
        segments = [
            (0, view.start - 1, EDGE_POINTS),
            (view.start, view.end, MAX_POINTS),
            (view.end + 1, None, EDGE_POINTS),
        ]
        segments = [(a, b, n) for a, b, n in segments if b is None or b >= a]
    else:
        segments = [(None, None, MAX_POINTS)]
    with_times = view.x_axis == "time"
    reads = await asyncio.gather(
        *(api.many_points(run_id, metrics, start=a, end=b, max_points=n, with_times=with_times) for a, b, n in segments)
    )
    out: dict[str, Series] = {}
    errors: list[str] = []
    for metric in metrics:
        merged = Series([], [], [])
        for read in reads:
            payload = read.get(metric) or ApiError("not returned by the service")
            if isinstance(payload, ApiError):
                errors.append(f"{metric}: {payload.message}")
                continue
            part = Series.from_api(payload)
            merged.steps += part.steps
            merged.values += part.values
            merged.times += part.times or [None] * len(part.steps)
            merged.downsampled = merged.downsampled or part.downsampled
        out[metric] = merged
    return out, errors


def view_of(data: dict[str, Any] | None) -> View:
    data = data or {}
    return View(
        smoothing=float(data.get("smoothing", 0.6)),
        log_y=bool(data.get("log_y")),
        x_axis=data.get("x_axis", "step"),
        start=data.get("start"),
        end=data.get("end"),
    )


def panels_of(data: list[dict] | None) -> list[Panel]:
    return [
        Panel(key=p["key"], title=p["title"], metrics=tuple(p["metrics"]), kind=p["kind"], layers=tuple(p["layers"]))
        for p in data or []
    ]


def shown(panels: list[Panel], wanted: list[str]) -> list[Panel]:
    return [p for p in panels if not wanted or any(m in wanted for m in p.metrics)]


async def read_snapshot(api: HolterAPI, run_id: str) -> Snapshot:
    """The run, its events and notes, and the charts its metrics call for; on an error, a header saying what went wrong."""
    try:
        run, vocab = await asyncio.gather(api.get_run(run_id), api.vocabulary())
    except ApiError as exc:
        text = f"There is no run {run_id!r}." if exc.status == 404 else exc.message
        return Snapshot(None, error_alert(text, "Cannot show this run"), [], {})
    (events, events_problem), (notes, _) = await asyncio.gather(
        optional(api.run_events(run_id), []), optional(api.annotations(run_id), [])
    )
    header: Any = run_header(run, vocab)
    if events_problem:
        header = [header, error_alert(events_problem, "Events unavailable")]
    # each metric's panel and kind are the service's: the page draws what the API says
    panels = json.loads(
        json.dumps([asdict(p) for p in plan_panels(run.get("metrics") or [], vocab)])
    )  # as the store holds it
    marks = {"events": events, "notes": notes, "sig": marks_signature(events, notes)}
    return Snapshot(run, header, panels, marks, vocab)


def drawn_signature(panels_data: list[dict] | None, view_data: dict | None, marks: dict | None) -> str:
    """What the charts on screen were drawn from: `draw` skips a redraw from the same inputs."""
    return json.dumps([panels_data, view_data, (marks or {}).get("sig")], sort_keys=True, default=str)


async def render_charts(
    api: HolterAPI, run_id: str, panels_data: list[dict], view_data: dict | None, marks: dict | None
) -> tuple[Any, dict[str, Any] | None]:
    """The charts of the run page for this view, and the live cursor (last step drawn per metric, EMA states)."""
    panels = shown(panels_of(panels_data), (view_data or {}).get("metrics") or [])
    if not panels:
        if not panels_data:
            return empty_state(
                "No metrics logged yet", "Points appear here within a second or two of `run.log()`."
            ), None
        return empty_state("No chart matches the chosen metrics"), None
    view = view_of(view_data)
    metrics = [m for p in panels for m in p.metrics]
    (series, errors), vocab = await asyncio.gather(load_series(api, run_id, metrics, view), api.vocabulary())
    marks = marks or {"events": [], "notes": []}
    uirevision = revision_of(view)
    graphs = []
    ema_states: dict[str, list[float]] = {}
    for panel in panels:
        figure, states = panel_figure(panel, series, marks["events"], marks["notes"], view, vocab=vocab)
        ema_states.update(states)
        figure["layout"]["uirevision"] = uirevision
        graphs.append(
            dmc.Paper(
                dcc.Graph(
                    id={"type": "panel", "key": panel.key},
                    figure=figure,
                    config=GRAPH_CONFIG,
                    className=f"panel panel-{panel.kind}",
                ),
                withBorder=True,
                radius="md",
                p=4,
                className="chart-card",
            )
        )
    live = {
        "cursor": {m: (s.steps[-1] if s.steps else -1) for m, s in series.items()},
        "ema": ema_states,
        "heat_tick": 0,
        "drawn": drawn_signature(panels_data, view_data, marks),
        "clock": wall_clock(series.values()) if view.x_axis == "time" else [],
    }
    body = [error_alert("; ".join(errors), "Some series could not be read")] if errors else []
    body.append(dmc.SimpleGrid(graphs, cols={"base": 1, "xl": 2}, spacing="sm"))
    return body, live


def revision_of(view: View) -> str:
    """Plotly keeps a chart's zoom while this stays the same: a redraw for a new view resets it, live appends do not."""
    return f"{view.x_axis}:{view.start}:{view.end}:{view.log_y}"


def marks_signature(events: list[dict], notes: list[dict]) -> str:
    return json.dumps(
        [
            [(e.get("id"), e.get("status"), e.get("end_step"), e.get("updated_at")) for e in events],
            [(n.get("id"), n.get("updated_at")) for n in notes],
        ],
        default=str,
    )


async def fresh_marks(api: HolterAPI, run_id: str) -> dict:
    (events, _), (notes, _) = await asyncio.gather(
        optional(api.run_events(run_id), []), optional(api.annotations(run_id), [])
    )
    return {"events": events, "notes": notes, "sig": marks_signature(events, notes)}


async def append_live(
    api: HolterAPI,
    run_id: str,
    run: dict,
    panels: list[Panel],
    figure_outputs: list[dict],
    live: dict,
    view: View,
    marks: dict,
    vocab: Vocabulary,
) -> tuple[list[Any], dict]:
    """Patches appending each chart's new points (line panels), or a fresh heatmap now and then."""
    cursor: dict[str, int] = dict(live.get("cursor") or {})
    states: dict[str, list[float]] = dict(live.get("ema") or {})
    last_steps = {m["name"]: m.get("last_step") for m in run.get("metrics") or []}
    by_key = {p.key: p for p in panels}
    shown = [by_key.get(o["id"]["key"]) for o in figure_outputs]
    stale = [
        m
        for p in shown
        if p
        for m in p.metrics
        if m in cursor and last_steps.get(m) is not None and last_steps[m] > cursor[m]
    ]
    if not stale:
        return [no_update] * len(figure_outputs), no_update
    reads = await asyncio.gather(
        *(api.points(run_id, m, start=cursor[m] + 1, limit=LIVE_READ_LIMIT) for m in stale), return_exceptions=True
    )
    fresh = {m: Series.from_api(r) for m, r in zip(stale, reads) if not isinstance(r, BaseException)}
    heat_tick = int(live.get("heat_tick", 0)) + 1
    figures: list[Any] = []
    for panel in shown:
        if panel is None or not any(m in fresh for m in panel.metrics):
            figures.append(no_update)
            continue
        if panel.kind == "band":  # seven thin series: drawn again whole
            series, _ = await load_series(api, run_id, list(panel.metrics), view)
            figure, _ = panel_figure(panel, series, view=view, vocab=vocab)
            figure["layout"]["uirevision"] = revision_of(view)
            figures.append(figure)
            continue
        if panel.kind == "heatmap":
            if heat_tick % 5:
                figures.append(no_update)
                for m in panel.metrics:
                    fresh.pop(m, None)  # not drawn yet: read again next time
                continue
            series, _ = await load_series(api, run_id, list(panel.metrics), view)
            figure, _ = panel_figure(panel, series, marks.get("events", []), view=view, vocab=vocab)
            figure["layout"]["uirevision"] = revision_of(view)
            figures.append(figure)
            continue
        extensions, new_states = line_appends(panel, fresh, view, states)
        states.update(new_states)
        patch = dash.Patch()
        for index, x, y in extensions:
            patch["data"][index]["x"].extend(x)
            patch["data"][index]["y"].extend(y)
        figures.append(patch)
    for metric, s in fresh.items():
        if len(s):
            cursor[metric] = s.steps[-1]
    return figures, {**live, "cursor": cursor, "ema": states, "heat_tick": heat_tick}
