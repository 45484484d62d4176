"""Run page: one chart per signal family, updating live, with events and notes drawn on them.

Data flow (all state in the browser's stores, all data through the API):
* the page's layout (`page_layout`) reads the run and draws every chart before it answers, so
  opening a run costs one round trip, not a chain of callbacks;
* `tick` (every second) reads the run, its events and notes; plans the panels again when the
  set of metrics changes; otherwise appends new points to the charts with `dash.Patch()` (the
  user's zoom stays, since the figures' `uirevision` does not change);
* `draw` renders every chart again when the view (range, smoothing, log, x axis), the panels
  or the events change; a zoom changes the view's range, and `draw` reads that range again at
  full resolution.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

import dash
import dash_mantine_components as dmc
from dash import ALL, ClientsideFunction, Dash, Input, Output, State, ctx, dcc, html, no_update

from holter_dashboard.api import ApiError, HolterAPI, optional
from holter_dashboard.components import SEVERITY_BADGE, age, empty_state, error_alert, health_badge, section, status_badge
from holter_dashboard.figures import (
    Panel, Series, View, ema, event_label, heatmap_figure, line_figure, minmax_downsample, nonfinite_trace_index,
    plan_panels, trace_indexes, wall_clock,
)

MAX_POINTS = 1200  # per metric and chart: about two per horizontal pixel of a half-width chart, min and max
EDGE_POINTS = 300  # outside a zoomed range, for context and panning
LIVE_READ_LIMIT = 20_000
TICK_MS = 1000
GRAPH_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["lasso2d", "toImage"]}


def title(run_id: str | None = None, **_: Any) -> str:
    return f"{run_id} · Holter" if run_id else "Run · Holter"


def _int(value: Any) -> int | None:
    try:
        return int(float(value)) if value not in (None, "") else None
    except ValueError:
        return None


def view_from_query(smooth: Any = None, log: Any = None, x: Any = None, start: Any = None, end: Any = None, metrics: Any = None) -> dict[str, Any]:
    """The view a URL asks for (its query string), with defaults for what it leaves out."""
    try:
        smoothing = min(max(float(smooth), 0.0), 0.99) if smooth not in (None, "") else 0.6
    except ValueError:
        smoothing = 0.6
    return {
        "smoothing": smoothing,
        "log_y": str(log).lower() in ("1", "true", "yes"),
        "x_axis": "time" if x == "time" else "step",
        "start": _int(start),
        "end": _int(end),
        "metrics": [m for m in str(metrics).split(",") if m] if metrics else [],
    }


def page_layout(api: HolterAPI) -> Callable[..., Awaitable[html.Div]]:
    """The run page's layout function for `dash.register_page`: the URL's path and query in, the page out."""

    async def layout(run_id: str | None = None, smooth: Any = None, log: Any = None, x: Any = None, start: Any = None,
                     end: Any = None, metrics: Any = None, **_: Any) -> html.Div:
        view = view_from_query(smooth, log, x, start, end, metrics)
        return build_layout(run_id, view, await first_render(api, run_id or "", view))

    return layout


@dataclass
class Snapshot:
    """The run as the page last read it: its header, chart plan, events and notes."""

    run: dict[str, Any] | None
    header: Any
    panels: list[dict[str, Any]]
    marks: dict[str, Any]

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


async def first_render(api: HolterAPI, run_id: str, view: dict[str, Any]) -> FirstRender:
    snap = await read_snapshot(api, run_id)
    if snap.run is None:
        return FirstRender(snap)
    charts, live = await render_charts(api, run_id, snap.panels, view, snap.marks)
    return FirstRender(snap, run_info(snap.run, can_edit="notes" in snap.run), charts, live)


def build_layout(run_id: str | None, view: dict[str, Any], first: FirstRender) -> html.Div:
    snap = first.snapshot
    options = snap.metric_names
    controls = dmc.Group(
        [
            dmc.SegmentedControl(id="run-x", value=view["x_axis"], size="xs",
                                 data=[{"value": "step", "label": "by step"}, {"value": "time", "label": "by wall time"}]),
            dmc.Switch(id="run-log", label="log scale", checked=view["log_y"], size="xs"),
            dmc.Group([dmc.Text("smoothing", size="xs", c="dimmed"),
                       dmc.Slider(id="run-smooth", min=0, max=0.99, step=0.01, value=view["smoothing"], w=140, size="sm",
                                  updatemode="mouseup", label=None)], gap=6),
            dmc.MultiSelect(id="run-metrics", placeholder="all metrics", value=view["metrics"], data=sorted({*options, *view["metrics"]}),
                            clearable=True, searchable=True, size="xs", w=260),
            dmc.Button("Reset zoom", id="run-reset", size="xs", variant="subtle"),
        ],
        gap="md",
    )
    side = dmc.Stack(
        [
            section("Events", html.Div(id="run-events", children=dmc.Skeleton(h=80)),
                    dmc.TextInput(id="event-reason", placeholder="reason (for acknowledge / dismiss)", size="xs", mt=8),
                    html.Div(id="event-message")),
            section("Add a note",
                    dmc.Text("Drag on a chart with the box-select tool, or zoom, to fill the range.", size="xs", c="dimmed"),
                    dmc.Group([dmc.NumberInput(id="note-start", placeholder="from step", size="xs", w="48%", min=0),
                               dmc.NumberInput(id="note-end", placeholder="to step", size="xs", w="48%", min=0)], gap="xs", mt=6),
                    dmc.Select(id="note-metric", placeholder="all charts", data=options, clearable=True, size="xs", mt=6),
                    dmc.Textarea(id="note-text", placeholder="what happened here?", autosize=True, minRows=2, size="xs", mt=6),
                    dmc.Button("Add note", id="note-add", size="xs", mt=6, fullWidth=True),
                    html.Div(id="note-message"),
                    html.Div(id="run-notes", style={"marginTop": 8})),
            section("Run", html.Div(id="run-info", children=first.info)),
        ],
        gap="sm",
    )
    return html.Div(
        [
            dcc.Store(id="run-id", data=run_id),
            dcc.Store(id="run-view", data=view),
            dcc.Store(id="run-panels", data=snap.panels if snap.run else None),
            dcc.Store(id="run-marks", data=snap.marks if snap.run else None),
            dcc.Store(id="run-live", data=first.live),
            dcc.Interval(id="run-tick", interval=TICK_MS),
            html.Div(id="run-url-sink", hidden=True),
            html.Div(id="run-header", children=snap.header),
            dmc.Card(controls, padding="xs", mb="sm"),
            dmc.Grid(
                [
                    dmc.GridCol(html.Div(id="run-charts", children=first.charts if first.charts is not None else dmc.Skeleton(h=300)),
                                span={"base": 12, "lg": 9}),
                    dmc.GridCol(side, span={"base": 12, "lg": 3}),
                ],
                gutter="md",
            ),
        ]
    )


# ---------------------------------------------------------------------------------- data


async def load_series(api: HolterAPI, run_id: str, metrics: list[str], view: View) -> tuple[dict[str, Series], list[str]]:
    """The points to draw: the whole run at chart resolution, or a zoomed range at full
    resolution with coarse context either side (so panning shows something and live points
    append after a continuous line)."""
    if view.start is not None and view.end is not None:
        segments = [(0, view.start - 1, EDGE_POINTS), (view.start, view.end, MAX_POINTS), (view.end + 1, None, EDGE_POINTS)]
        segments = [(a, b, n) for a, b, n in segments if b is None or b >= a]
    else:
        segments = [(None, None, MAX_POINTS)]
    with_times = view.x_axis == "time"
    reads = await asyncio.gather(*(api.many_points(run_id, metrics, start=a, end=b, max_points=n, with_times=with_times) for a, b, n in segments))
    out: dict[str, Series] = {}
    errors: list[str] = []
    for metric in metrics:
        merged = Series([], [], [])
        for (_, _, n), read in zip(segments, reads):
            payload = read.get(metric) or ApiError("not returned by the service")
            if isinstance(payload, ApiError):
                errors.append(f"{metric}: {payload.message}")
                continue
            part = Series.from_api(payload)
            if len(part) > 2 * n:  # a service without server-side downsampling answered everything
                times = dict(zip(part.steps, part.times)) if part.times else {}
                steps, values = minmax_downsample(part.steps, part.values, n)
                part = Series(steps, values, [times.get(s) for s in steps] if times else [], True)
            merged.steps += part.steps
            merged.values += part.values
            merged.times += part.times or [None] * len(part.steps)
            merged.downsampled = merged.downsampled or part.downsampled
        out[metric] = merged
    return out, errors


def _view(data: dict[str, Any] | None) -> View:
    data = data or {}
    return View(smoothing=float(data.get("smoothing", 0.6)), log_y=bool(data.get("log_y")), x_axis=data.get("x_axis", "step"),
                start=data.get("start"), end=data.get("end"))


def _panels(data: list[dict] | None) -> list[Panel]:
    return [Panel(key=p["key"], title=p["title"], metrics=tuple(p["metrics"]), kind=p["kind"], layers=tuple(p["layers"])) for p in data or []]


def _shown(panels: list[Panel], wanted: list[str]) -> list[Panel]:
    return [p for p in panels if not wanted or any(m in wanted for m in p.metrics)]


async def read_snapshot(api: HolterAPI, run_id: str) -> Snapshot:
    """The run, its events and notes, and the charts its metrics call for; on an error, a header saying what went wrong."""
    try:
        run = await api.get_run(run_id)
    except ApiError as exc:
        text = f"There is no run {run_id!r}." if exc.status == 404 else exc.message
        return Snapshot(None, error_alert(text, "Cannot show this run"), [], {})
    (events, events_problem), (notes, _) = await asyncio.gather(optional(api.run_events(run_id), []), optional(api.annotations(run_id), []))
    header: Any = run_header(run)
    if events_problem:
        header = [header, error_alert(events_problem, "Events unavailable")]
    names = [m["name"] for m in run.get("metrics") or []]
    panels = json.loads(json.dumps([asdict(p) for p in plan_panels(names)]))  # as the store holds it: lists, not tuples
    marks = {"events": events, "notes": notes, "sig": _marks_signature(events, notes)}
    return Snapshot(run, header, panels, marks)


def drawn_signature(panels_data: list[dict] | None, view_data: dict | None, marks: dict | None) -> str:
    """What the charts on screen were drawn from: `draw` skips a redraw from the same inputs."""
    return json.dumps([panels_data, view_data, (marks or {}).get("sig")], sort_keys=True, default=str)


async def render_charts(api: HolterAPI, run_id: str, panels_data: list[dict], view_data: dict | None,
                        marks: dict | None) -> tuple[Any, dict[str, Any] | None]:
    """The charts of the run page for this view, and the live cursor (last step drawn per metric, EMA states)."""
    panels = _shown(_panels(panels_data), (view_data or {}).get("metrics") or [])
    if not panels:
        if not panels_data:
            return empty_state("No metrics logged yet", "Points appear here within a second or two of `run.log()`."), None
        return empty_state("No chart matches the chosen metrics"), None
    view = _view(view_data)
    metrics = [m for p in panels for m in p.metrics]
    series, errors = await load_series(api, run_id, metrics, view)
    marks = marks or {"events": [], "notes": []}
    uirevision = _uirevision(view)
    graphs = []
    ema_states: dict[str, list[float]] = {}
    for panel in panels:
        if panel.kind == "heatmap":
            figure = heatmap_figure(panel, series, marks["events"], view)
        else:
            figure, states = line_figure(panel, series, marks["events"], marks["notes"], view)
            ema_states.update(states)
        figure["layout"]["uirevision"] = uirevision
        graphs.append(dmc.Paper(dcc.Graph(id={"type": "panel", "key": panel.key}, figure=figure, config=GRAPH_CONFIG,
                                          className=f"panel panel-{panel.kind}"),
                                withBorder=True, radius="md", p=4, className="chart-card"))
    live = {"cursor": {m: (s.steps[-1] if s.steps else -1) for m, s in series.items()}, "ema": ema_states, "heat_tick": 0,
            "drawn": drawn_signature(panels_data, view_data, marks), "clock": wall_clock(series.values()) if view.x_axis == "time" else []}
    body = [error_alert("; ".join(errors), "Some series could not be read")] if errors else []
    body.append(dmc.SimpleGrid(graphs, cols={"base": 1, "xl": 2}, spacing="sm"))
    return body, live


def _uirevision(view: View) -> str:
    """Plotly keeps a chart's zoom while this stays the same: a redraw for a new view resets it, live appends do not."""
    return f"{view.x_axis}:{view.start}:{view.end}:{view.log_y}"


def _marks_signature(events: list[dict], notes: list[dict]) -> str:
    return json.dumps([[(e.get("id"), e.get("status"), e.get("end_step"), e.get("updated_at")) for e in events],
                       [(n.get("id"), n.get("updated_at")) for n in notes]], default=str)


# ---------------------------------------------------------------------------------- views


def run_header(run: dict[str, Any]) -> dmc.Group:
    live = run.get("status") == "running"
    return dmc.Group(
        [
            dmc.Stack(
                [
                    dmc.Group([dmc.Anchor("Runs", href="/", size="sm", c="dimmed"), dmc.Text("/", c="dimmed", size="sm"),
                               dmc.Text(run.get("project"), size="sm", c="dimmed")], gap=6),
                    dmc.Group([dmc.Title(run.get("name") or run["id"], order=2, id="run-title"), status_badge(run.get("status")),
                               health_badge(run.get("health"), run.get("open_events")),
                               dmc.Badge("● live", color="green", variant="transparent", className="live-badge") if live else None], gap="sm"),
                ],
                gap=2,
            ),
            dmc.Group(
                [
                    _stat("run id", run["id"]),
                    _stat("last step", f"{run['last_step']:,}" if run.get("last_step") is not None else "—", "run-last-step"),
                    _stat("last heard", age(run.get("heartbeat_at"))),
                    _stat("started", age(run.get("created_at"))),
                    dmc.Anchor(dmc.Button("Post-mortem", size="xs", variant="light"), href=f"/runs/{run['id']}/postmortem",
                               id="run-postmortem-link"),
                ],
                gap="xl",
            ),
        ],
        justify="space-between", mb="sm", align="flex-end",
    )


def _stat(label: str, value: Any, id: str | None = None) -> dmc.Stack:
    text = dmc.Text(value, fw=600, size="sm", ff="monospace", id=id) if id else dmc.Text(value, fw=600, size="sm", ff="monospace")
    return dmc.Stack([dmc.Text(label, size="xs", c="dimmed"), text], gap=0)


def run_info(run: dict[str, Any], can_edit: bool) -> list[Any]:
    config = json.dumps(run.get("config") or {}, indent=2, sort_keys=True, default=str)
    parts: list[Any] = [
        dmc.Text("Tags", size="xs", c="dimmed"),
        dmc.TagsInput(id="run-tags", value=list(run.get("tags") or []), size="xs", disabled=not can_edit, placeholder="add a tag"),
        dmc.Text("Notes", size="xs", c="dimmed", mt=6),
        dmc.Textarea(id="run-notes-text", value=run.get("notes") or "", autosize=True, minRows=2, size="xs",
                     disabled=not can_edit, placeholder="notes about this run"),
        dmc.Button("Save tags and notes", id="run-save", size="xs", variant="light", mt=6, disabled=not can_edit),
        html.Div(id="run-save-message"),
        dmc.Text("Config", size="xs", c="dimmed", mt=8),
        dmc.Code(config, block=True, style={"maxHeight": 260, "overflow": "auto", "fontSize": 11}),
    ]
    return parts


def events_list(events: list[dict[str, Any]]) -> Any:
    if not events:
        return dmc.Text("No events: every curve looks healthy so far.", size="sm", c="dimmed", className="no-events")
    order = {"open": 0, "acknowledged": 1, "muted": 2, "dismissed": 3}
    severity = {"critical": 0, "warning": 1, "info": 2}
    items = []
    for e in sorted(events, key=lambda e: (order.get(e.get("status"), 4), severity.get(e.get("severity"), 3), -(e.get("start_step") or 0))):
        steps = f"step {e['start_step']:,}" if e.get("end_step") in (None, e.get("start_step")) else f"steps {e['start_step']:,}–{e['end_step']:,}"
        handled = e.get("status") != "open"
        items.append(
            dmc.Paper(
                [
                    dmc.Group([dmc.Badge(event_label(e), color=SEVERITY_BADGE.get(e.get("severity"), "gray"),
                                         variant="light" if handled else "filled", size="sm"),
                               dmc.Text(e.get("metric") or "run", size="xs", c="dimmed", ff="monospace")], justify="space-between"),
                    dmc.Text(e.get("summary") or "", size="xs", mt=4),
                    dmc.Text(steps + (f" · {e['status']} by {e.get('status_by')}" + (f": {e['status_reason']}" if e.get("status_reason") else "")
                                      if handled else ""), size="xs", c="dimmed"),
                    dmc.Group(
                        [
                            dmc.Button("Zoom", id={"type": "event-zoom", "id": e["id"]}, size="compact-xs", variant="subtle"),
                            dmc.Button("Acknowledge", id={"type": "event-ack", "id": e["id"]}, size="compact-xs", variant="subtle",
                                       color="teal", disabled=handled),
                            dmc.Button("Dismiss", id={"type": "event-dismiss", "id": e["id"]}, size="compact-xs", variant="subtle",
                                       color="gray", disabled=e.get("status") == "dismissed"),
                        ],
                        gap=2, mt=4,
                    ),
                ],
                p="xs", withBorder=True, radius="sm", className=f"event-item event-{e.get('kind')}",
                style={"opacity": 0.6 if e.get("status") == "dismissed" else 1},
            )
        )
    return dmc.ScrollArea(dmc.Stack(items, gap=6), mah=520, type="auto")


def notes_list(notes: list[dict[str, Any]], author: str | None) -> Any:
    if not notes:
        return dmc.Text("No notes yet.", size="xs", c="dimmed")
    items = []
    for n in sorted(notes, key=lambda n: n.get("created_at") or ""):
        where = "" if n.get("start_step") is None else (
            f"step {n['start_step']:,}" if n.get("end_step") in (None, n["start_step"]) else f"steps {n['start_step']:,}–{n['end_step']:,}")
        items.append(dmc.Paper([
            dmc.Text(n.get("text"), size="sm", className="note-text"),
            dmc.Group([dmc.Text(f"{n.get('author')} · {where}" + (f" · {n['metric']}" if n.get("metric") else ""), size="xs", c="dimmed"),
                       dmc.Button("delete", id={"type": "note-delete", "id": n["id"]}, size="compact-xs", variant="subtle", color="red")
                       if author and author == n.get("author") else None], justify="space-between"),
        ], p="xs", withBorder=True, radius="sm", className="note-item"))
    return dmc.Stack(items, gap=6)


def message(text: str, ok: bool = True) -> dmc.Text:
    return dmc.Text(text, size="xs", c="teal" if ok else "red", mt=4)


# ---------------------------------------------------------------------------------- callbacks


def register(app: Dash, api: HolterAPI) -> None:
    @app.callback(
        Output("run-header", "children"),
        Output("run-info", "children"),
        Output("run-panels", "data"),
        Output("run-marks", "data"),
        Output({"type": "panel", "key": ALL}, "figure"),
        Output("run-live", "data"),
        Output("run-metrics", "data"),
        Output("note-metric", "data"),
        Input("run-tick", "n_intervals"),
        State("run-id", "data"),
        State("run-panels", "data"),
        State("run-marks", "data"),
        State("run-live", "data"),
        State("run-view", "data"),
    )
    async def tick(_n: int | None, run_id: str, panels_data: list[dict] | None, marks: dict | None, live: dict | None,
                   view_data: dict | None) -> tuple:
        figure_outputs = ctx.outputs_list[4]
        keep_figures = [no_update] * len(figure_outputs)
        snap = await read_snapshot(api, run_id)
        if snap.run is None:
            return (snap.header, no_update, no_update, no_update, keep_figures, no_update, no_update, no_update)
        run, header, panels, new_marks = snap.run, snap.header, snap.panels, snap.marks
        # the layout drew the run as it opened; the info panel is drawn again only for a run that appeared later
        info = run_info(run, can_edit="notes" in run) if panels_data is None else no_update
        marks_out = new_marks if not marks or marks.get("sig") != new_marks["sig"] else no_update
        metric_options = snap.metric_names
        if panels != panels_data:
            # first call or new metrics: `draw` renders everything (and sets the live cursor)
            return header, info, panels, marks_out, keep_figures, no_update, metric_options, metric_options
        if not live or marks_out is not no_update:
            return header, info, no_update, marks_out, keep_figures, no_update, no_update, no_update
        figures, live = await _append_live(api, run_id, run, _panels(panels_data), figure_outputs, live, _view(view_data), marks or new_marks)
        return header, info, no_update, no_update, figures, live, no_update, no_update

    @app.callback(
        Output("run-charts", "children"),
        Output("run-live", "data", allow_duplicate=True),
        Input("run-panels", "data"),
        Input("run-view", "data"),
        Input("run-marks", "data"),
        State("run-id", "data"),
        State("run-live", "data"),
        prevent_initial_call=True,
    )
    async def draw(panels_data: list[dict] | None, view_data: dict | None, marks: dict | None, run_id: str, live: dict | None) -> tuple:
        if panels_data is None:
            return no_update, no_update
        if live and live.get("drawn") == drawn_signature(panels_data, view_data, marks):
            return no_update, no_update  # an input was set to what it already was
        return await render_charts(api, run_id, panels_data, view_data, marks)

    # A zoom on a chart sets the view's step range in the browser (assets/run_zoom.js says why)
    app.clientside_callback(
        ClientsideFunction(namespace="holter", function_name="follow_zoom"),
        Output("run-view", "data", allow_duplicate=True),
        Input({"type": "panel", "key": ALL}, "relayoutData"),
        State("run-view", "data"),
        State("run-live", "data"),
        State("run-panels", "data"),
        prevent_initial_call=True,
    )

    @app.callback(
        Output("run-view", "data"),
        Input({"type": "panel", "key": ALL}, "clickData"),
        Input({"type": "event-zoom", "id": ALL}, "n_clicks"),
        Input("run-reset", "n_clicks"),
        Input("run-smooth", "value"),
        Input("run-log", "checked"),
        Input("run-x", "value"),
        Input("run-metrics", "value"),
        State("run-view", "data"),
        State("run-marks", "data"),
        prevent_initial_call=True,
    )
    def change_view(clicks: list, _zooms: list, _reset: int | None, smoothing: float, log_y: bool,
                    x_axis: str, metrics: list[str] | None, view: dict, marks: dict | None) -> Any:
        view = dict(view or {})
        trigger = ctx.triggered_id
        new = dict(view, smoothing=smoothing if smoothing is not None else view.get("smoothing", 0.6), log_y=bool(log_y),
                   x_axis=x_axis or "step", metrics=metrics or [])
        if isinstance(trigger, dict) and trigger.get("type") == "panel":
            point = ((ctx.triggered[0]["value"] or {}).get("points") or [{}])[0]
            event = _event(marks, point.get("customdata"))
            if event is None:
                return no_update
            new["start"], new["end"] = _around(event)
        elif isinstance(trigger, dict) and trigger.get("type") == "event-zoom":
            if not ctx.triggered[0]["value"]:
                return no_update
            event = _event(marks, trigger["id"])
            if event is None:
                return no_update
            new["start"], new["end"] = _around(event)
        elif trigger == "run-reset":
            new["start"] = new["end"] = None
        return no_update if new == view else new

    @app.callback(
        Output("run-events", "children"),
        Output("run-notes", "children"),
        Input("run-marks", "data"),
        Input("author", "value"),
    )
    def side_lists(marks: dict | None, author: str | None) -> tuple:
        if marks is None:
            return no_update, no_update
        return events_list(marks["events"]), notes_list(marks["notes"], author)

    @app.callback(
        Output("event-message", "children"),
        Output("run-marks", "data", allow_duplicate=True),
        Input({"type": "event-ack", "id": ALL}, "n_clicks"),
        Input({"type": "event-dismiss", "id": ALL}, "n_clicks"),
        State("event-reason", "value"),
        State("author", "value"),
        State("run-id", "data"),
        prevent_initial_call=True,
    )
    async def handle_event(_acks: list, _dismissals: list, reason: str | None, author: str | None, run_id: str) -> tuple:
        trigger = ctx.triggered_id
        if not isinstance(trigger, dict) or not ctx.triggered[0]["value"]:
            return no_update, no_update
        if not author:
            return message("Type your name at the top right first.", ok=False), no_update
        try:
            if trigger["type"] == "event-ack":
                await api.acknowledge(run_id, trigger["id"], by=author, reason=reason or "")
                done = "acknowledged"
            else:
                await api.dismiss(run_id, trigger["id"], by=author, reason=reason or "", mute=False)
                done = "dismissed"
        except ApiError as exc:
            return message(exc.message, ok=False), no_update
        return message(f"Event {done}."), await _fresh_marks(api, run_id)

    @app.callback(
        Output("note-start", "value"),
        Output("note-end", "value"),
        Input({"type": "panel", "key": ALL}, "selectedData"),
        Input("run-view", "data"),
        prevent_initial_call=True,
    )
    def prefill_note(_selections: list, view: dict | None) -> tuple:
        if ctx.triggered_id == "run-view":
            if view and view.get("start") is not None:
                return view["start"], view["end"]
            return no_update, no_update
        selected = ctx.triggered[0]["value"] or {}
        x_range = (selected.get("range") or {}).get("x")
        if not x_range:
            return no_update, no_update
        return max(0, math.floor(x_range[0])), math.ceil(x_range[1])

    @app.callback(
        Output("note-message", "children"),
        Output("note-text", "value"),
        Output("run-marks", "data", allow_duplicate=True),
        Input("note-add", "n_clicks"),
        State("note-start", "value"),
        State("note-end", "value"),
        State("note-metric", "value"),
        State("note-text", "value"),
        State("author", "value"),
        State("run-id", "data"),
        prevent_initial_call=True,
    )
    async def add_note(_n: int | None, start: Any, end: Any, metric: str | None, text: str | None, author: str | None, run_id: str) -> tuple:
        if not (text or "").strip():
            return message("Write the note first.", ok=False), no_update, no_update
        if not author:
            return message("Type your name at the top right first.", ok=False), no_update, no_update
        start, end = _int(start), _int(end)
        if start is not None and end is not None and end < start:
            start, end = end, start
        try:
            await api.add_annotation(run_id, author=author, text=text.strip(), start_step=start,
                                     end_step=end if end is not None else start, metric=metric)
        except ApiError as exc:
            return message(exc.message, ok=False), no_update, no_update
        return message("Note added."), "", await _fresh_marks(api, run_id)

    @app.callback(
        Output("note-message", "children", allow_duplicate=True),
        Output("run-marks", "data", allow_duplicate=True),
        Input({"type": "note-delete", "id": ALL}, "n_clicks"),
        State("author", "value"),
        State("run-id", "data"),
        prevent_initial_call=True,
    )
    async def delete_note(_clicks: list, author: str | None, run_id: str) -> tuple:
        trigger = ctx.triggered_id
        if not isinstance(trigger, dict) or not ctx.triggered[0]["value"]:
            return no_update, no_update
        try:
            await api.delete_annotation(run_id, trigger["id"], author=author or "")
        except ApiError as exc:
            return message(exc.message, ok=False), no_update
        return message("Note deleted."), await _fresh_marks(api, run_id)

    @app.callback(
        Output("run-save-message", "children"),
        Input("run-save", "n_clicks"),
        State("run-tags", "value"),
        State("run-notes-text", "value"),
        State("run-id", "data"),
        prevent_initial_call=True,
    )
    async def save_run(_n: int | None, tags: list[str] | None, notes: str | None, run_id: str) -> Any:
        try:
            await api.update_run(run_id, tags=tags or [], notes=notes or "")
        except ApiError as exc:
            return message(exc.message, ok=False)
        return message("Saved.")

    # The URL follows the view (history.replaceState: no reload), so it can be shared or bookmarked
    app.clientside_callback(
        """
        function(view) {
            if (!view || !window.location.pathname.startsWith('/runs/')) return window.dash_clientside.no_update;
            const q = new URLSearchParams();
            if (view.metrics && view.metrics.length) q.set('metrics', view.metrics.join(','));
            if (view.start !== null && view.start !== undefined) { q.set('start', view.start); q.set('end', view.end); }
            if (view.smoothing !== 0.6) q.set('smooth', view.smoothing);
            if (view.log_y) q.set('log', '1');
            if (view.x_axis === 'time') q.set('x', 'time');
            const s = q.toString();
            setTimeout(() => window.history.replaceState(null, '', window.location.pathname + (s ? '?' + s : '')), 0);
            return window.dash_clientside.no_update;
        }
        """,
        Output("run-url-sink", "children"),
        Input("run-view", "data"),
    )


def _event(marks: dict | None, event_id: Any) -> dict | None:
    for event in (marks or {}).get("events", []):
        if event.get("id") == event_id:
            return event
    return None


def _around(event: dict) -> tuple[int, int]:
    """A step range showing an event with context on both sides."""
    start = event.get("start_step") or 0
    end = event.get("end_step") if event.get("end_step") is not None else start
    pad = max(20, (end - start) // 2)
    return max(0, start - pad), end + pad


async def _fresh_marks(api: HolterAPI, run_id: str) -> dict:
    (events, _), (notes, _) = await asyncio.gather(optional(api.run_events(run_id), []), optional(api.annotations(run_id), []))
    return {"events": events, "notes": notes, "sig": _marks_signature(events, notes)}


async def _append_live(api: HolterAPI, run_id: str, run: dict, panels: list[Panel], figure_outputs: list[dict],
                       live: dict, view: View, marks: dict) -> tuple[list[Any], dict]:
    """Patches appending each chart's new points (line panels), or a fresh heatmap now and then."""
    cursor: dict[str, int] = dict(live.get("cursor") or {})
    states: dict[str, list[float]] = dict(live.get("ema") or {})
    last_steps = {m["name"]: m.get("last_step") for m in run.get("metrics") or []}
    by_key = {p.key: p for p in panels}
    shown = [by_key.get(o["id"]["key"]) for o in figure_outputs]
    stale = [m for p in shown if p for m in p.metrics
             if m in cursor and last_steps.get(m) is not None and last_steps[m] > cursor[m]]
    if not stale:
        return [no_update] * len(figure_outputs), no_update
    reads = await asyncio.gather(*(api.points(run_id, m, start=cursor[m] + 1, limit=LIVE_READ_LIMIT) for m in stale), return_exceptions=True)
    fresh = {m: Series.from_api(r) for m, r in zip(stale, reads) if not isinstance(r, BaseException)}
    heat_tick = int(live.get("heat_tick", 0)) + 1
    figures: list[Any] = []
    for panel in shown:
        if panel is None or not any(m in fresh for m in panel.metrics):
            figures.append(no_update)
            continue
        if panel.kind == "heatmap":
            if heat_tick % 5:
                figures.append(no_update)
                for m in panel.metrics:
                    fresh.pop(m, None)  # not drawn yet: read again next time
                continue
            series, _ = await load_series(api, run_id, list(panel.metrics), view)
            figure = heatmap_figure(panel, series, marks.get("events", []), view)
            figure["layout"]["uirevision"] = _uirevision(view)
            figures.append(figure)
            continue
        patch = dash.Patch()
        bad_x: list[Any] = []
        for metric in panel.metrics:
            s = fresh.get(metric)
            if s is None or not len(s):
                continue
            raw, smooth = trace_indexes(panel, metric)
            x = [t * 1000 if t is not None else None for t in s.times] if view.x_axis == "time" and s.times else list(s.steps)
            smoothed, state = ema(s.values, view.smoothing, tuple(states[metric]) if metric in states else None)
            states[metric] = list(state)
            patch["data"][raw]["x"].extend(x)
            patch["data"][raw]["y"].extend([v if math.isfinite(v) else None for v in s.values])
            patch["data"][smooth]["x"].extend(x)
            patch["data"][smooth]["y"].extend([v if math.isfinite(v) else None for v in smoothed])
            bad_x += [xi for xi, v in zip(x, s.values) if not math.isfinite(v)]
        if bad_x:
            bad = nonfinite_trace_index(panel)
            patch["data"][bad]["x"].extend(bad_x)
            patch["data"][bad]["y"].extend([0.96] * len(bad_x))
        figures.append(patch)
    for metric, s in fresh.items():
        if len(s):
            cursor[metric] = s.steps[-1]
    return figures, {**live, "cursor": cursor, "ema": states, "heat_tick": heat_tick}
