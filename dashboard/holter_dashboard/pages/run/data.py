"""Reading a run and drawing its charts: the snapshot the page polls, the series at chart
resolution (zoomed ranges at full resolution), the chart grids, and what a refresh changes in
charts already drawn (new points appended in place, or a chart drawn again).

Every read goes through the API; the service downsamples (min/max per bucket, a NaN is never
dropped), so the page draws what it gets.

What the charts on screen were drawn from is one dict in the page's `run-drawn` store
(`Drawn`): the view, the panels of each section, each metric's last step drawn (its cursor),
the smoothing states, how many points each chart gained since it was drawn, and the signatures
of the events and notes drawn on them. Only the page's refresh callback writes it, in the same
answer as the charts it describes, so a cursor never disagrees with its chart.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
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

MAX_POINTS = 1200  # per metric and chart: about two per horizontal pixel of a half-width chart, min and max
EDGE_POINTS = 300  # outside a zoomed range, for context and panning
COMPACT_POINTS = 400  # per metric of a small multiple (the System section)
# New points one refresh appends per metric, at most: a metric further behind (the page was
# asleep, a burst was imported) is read again whole at chart resolution instead.
LIVE_POINTS = 2000
# A chart that gained this many points since it was drawn is read again at chart resolution
# (downsampled), so a page left open all day does not grow without bound.
TAIL_LIMIT = MAX_POINTS
HEATMAP_EVERY = 5  # refreshes between redraws of a live per-layer heatmap
GRAPH_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["lasso2d", "toImage"]}
COMPACT_CONFIG = {**GRAPH_CONFIG, "displayModeBar": False}


@dataclass
class Snapshot:
    """The run as the page last read it: the run, its events and notes, and the charts its metrics call for."""

    run: dict[str, Any]
    vocab: Vocabulary
    events: list[dict[str, Any]]
    notes: list[dict[str, Any]]
    panels: list[dict[str, Any]]
    events_problem: str | None = None
    # the events grouped one incident per problem (the service's grouping; empty from an older one)
    incidents: list[dict[str, Any]] = field(default_factory=list)

    @property
    def metric_names(self) -> list[str]:
        """The metrics drawn as charts (the chart filter's and a note's choices): a job's rank
        series (rank 0's timings) are drawn across its ranks in the Ranks section instead."""
        across = {m for p in self.panels if p["section"] == "ranks" for m in p["metrics"]}
        return sorted(m["name"] for m in self.run.get("metrics") or [] if m["name"] not in across)

    @property
    def main_panels(self) -> list[dict[str, Any]]:
        return [p for p in self.panels if p["section"] == "main"]

    @property
    def system_panels(self) -> list[dict[str, Any]]:
        return [p for p in self.panels if p["section"] == "system"]

    @property
    def marks(self) -> dict[str, Any]:
        """The events and notes drawn on the charts, with their signature (what changed since)."""
        return {"events": self.events, "notes": self.notes, "sig": marks_signature(self.events, self.notes)}

    @property
    def last_steps(self) -> dict[str, int | None]:
        return {m["name"]: m.get("last_step") for m in self.run.get("metrics") or []}


class NoSuchRun(Exception):
    """The service has no run by this id (or none this key may see)."""


async def read_snapshot(api: HolterAPI, run_id: str) -> Snapshot:
    """The run, its events and notes, and its charts; NoSuchRun for a run the service does not
    have, an ApiError for any other failure."""
    try:
        run, vocab = await asyncio.gather(api.get_run(run_id), api.vocabulary())
    except ApiError as exc:
        if exc.status == 404:
            raise NoSuchRun(run_id) from exc
        raise
    (events, events_problem), (notes, _), (incidents, _) = await asyncio.gather(
        optional(api.run_events(run_id), []),
        optional(api.annotations(run_id), []),
        optional(api.run_incidents(run_id), []),
    )
    # each metric's panel and kind are the service's: the page draws what the API says
    panels = json.loads(json.dumps([asdict(p) for p in plan_panels(run.get("metrics") or [], vocab)]))
    return Snapshot(run, vocab, events, notes, panels, events_problem, incidents)


def marks_signature(events: list[dict], notes: list[dict]) -> str:
    return json.dumps(
        [
            [(e.get("id"), e.get("status"), e.get("end_step"), e.get("updated_at")) for e in events],
            [(n.get("id"), n.get("updated_at")) for n in notes],
        ],
        default=str,
    )


def view_of(data: dict[str, Any] | None) -> View:
    data = data or {}
    return View(
        smoothing=float(data.get("smoothing", 0.6)),
        log_y=bool(data.get("log_y")),
        x_axis=data.get("x_axis", "step"),
        start=data.get("start"),
        end=data.get("end"),
    )


def panels_of(data: Iterable[dict] | None) -> list[Panel]:
    return [
        Panel(
            key=p["key"],
            title=p["title"],
            metrics=tuple(p["metrics"]),
            kind=p["kind"],
            layers=tuple(p["layers"]),
            section=p.get("section", "main"),
            share=bool(p.get("share")),
            percent=tuple(p.get("percent") or ()),
            compute_only=tuple(p.get("compute_only") or ()),
        )
        for p in data or []
    ]


def shown(panels: list[Panel], wanted: list[str]) -> list[Panel]:
    """The panels a view shows: those holding a chosen metric (all when none is chosen)."""
    return [p for p in panels if not wanted or any(m in wanted for m in p.metrics)]


def revision_of(view: View) -> str:
    """Plotly keeps a chart's zoom while this stays the same: a redraw for a new view resets it, live appends do not."""
    return f"{view.x_axis}:{view.start}:{view.end}:{view.log_y}"


async def load_series(
    api: HolterAPI, run_id: str, metrics: list[str], view: View, max_points: int = MAX_POINTS
) -> tuple[dict[str, Series], list[str]]:
    """The points to draw: the whole run at chart resolution, or a zoomed range at full
    resolution with coarse context either side (so panning shows something and live points
    append after a continuous line)."""
    if not metrics:
        return {}, []
    if view.start is not None and view.end is not None:
        segments = [
            (0, view.start - 1, EDGE_POINTS),
            (view.start, view.end, max_points),
            (view.end + 1, None, EDGE_POINTS),
        ]
        segments = [(a, b, n) for a, b, n in segments if b is None or b >= a]
    else:
        segments = [(None, None, max_points)]
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


@dataclass
class Drawn:
    """What the charts on the page were drawn from (the `run-drawn` store, as a dict)."""

    view: dict[str, Any]
    main: list[dict[str, Any]] = field(default_factory=list)
    system: list[dict[str, Any]] | None = None  # None: the System section is closed, nothing drawn in it
    cursor: dict[str, int] = field(default_factory=dict)
    ema: dict[str, list[float]] = field(default_factory=dict)
    tail: dict[str, int] = field(default_factory=dict)  # points appended per chart since it was drawn
    marks: str = ""
    kinds: str = ""
    names: list[str] = field(default_factory=list)
    clock: list[list[float]] = field(default_factory=list)
    refreshes: int = 0
    details: str = ""  # the run details drawn (details.details_signature)

    @classmethod
    def from_store(cls, data: dict[str, Any] | None) -> Drawn | None:
        return cls(**data) if data else None

    def to_store(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Charts:
    """Figures drawn for some panels, with each metric's cursor and smoothing state."""

    figures: dict[str, dict] = field(default_factory=dict)
    cursor: dict[str, int] = field(default_factory=dict)
    ema: dict[str, list[float]] = field(default_factory=dict)
    clock: list[list[float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def draw_panels(
    api: HolterAPI,
    run_id: str,
    panels: list[Panel],
    view: View,
    marks: dict[str, Any],
    vocab: Vocabulary,
    *,
    compact: bool = False,
) -> Charts:
    """The figures of `panels` for this view, read from the service."""
    metrics = [m for p in panels for m in p.metrics]
    series, errors = await load_series(api, run_id, metrics, view, COMPACT_POINTS if compact else MAX_POINTS)
    charts = Charts(errors=errors)
    uirevision = revision_of(view)
    for panel in panels:
        figure, states = panel_figure(
            panel, series, marks["events"], marks["notes"], view, vocab=vocab, compact=compact
        )
        figure["layout"]["uirevision"] = uirevision
        charts.figures[panel.key] = figure
        charts.ema.update(states)
    charts.cursor = {m: (s.steps[-1] if s.steps else -1) for m, s in series.items()}
    if view.x_axis == "time":
        charts.clock = wall_clock(series.values())
    return charts


def chart_grid(panels: list[Panel], charts: Charts, *, compact: bool = False) -> list[Any]:
    """The charts of a section laid out: two columns on a wide screen (four for small multiples)."""
    graphs = [
        dmc.Paper(
            dcc.Graph(
                id={"type": "panel", "key": panel.key},
                figure=charts.figures[panel.key],
                config=COMPACT_CONFIG if compact else GRAPH_CONFIG,
                className=f"panel panel-{panel.kind}" + (" panel-compact" if compact else ""),
            ),
            withBorder=True,
            radius="md",
            p=4,
            className="chart-card",
        )
        for panel in panels
    ]
    body: list[Any] = [error_alert("; ".join(charts.errors), "Some series could not be read")] if charts.errors else []
    cols = {"base": 1, "sm": 2, "lg": 3, "xl": 4} if compact else {"base": 1, "xl": 2}
    body.append(dmc.SimpleGrid(graphs, cols=cols, spacing="sm"))
    return body


def main_empty_state(all_main: list[Panel], chosen: list[str]) -> Any:
    if not all_main:
        return empty_state("No metrics logged yet", "Points appear here within a second or two of `run.log()`.")
    return empty_state("No chart matches the chosen metrics", "Clear the metrics chosen above to see every chart.")


@dataclass
class Update:
    """What a refresh changes in the charts already on the page: per chart (by key) a Patch that
    appends points, or a whole figure drawn again; the cursors and states that go with them."""

    figures: dict[str, Any] = field(default_factory=dict)
    cursor: dict[str, int] = field(default_factory=dict)
    ema: dict[str, list[float]] = field(default_factory=dict)
    tail: dict[str, int] = field(default_factory=dict)


async def update_charts(
    api: HolterAPI,
    run_id: str,
    snap: Snapshot,
    drawn: Drawn,
    on_page: list[Panel],
    *,
    marks_changed: bool,
    compact_keys: set[str],
) -> Update:
    """Bring the charts on the page up to the run: new points appended in place, in order and
    once (each metric from its cursor on); a chart drawn again whole when its events or notes
    changed, when it gained more points than it should hold, when a metric fell too far behind
    to append, and a per-layer heatmap every few refreshes (a band chart at every one)."""
    view = view_of(drawn.view)
    last_steps = snap.last_steps
    update = Update(tail=dict(drawn.tail))
    behind = {
        m: drawn.cursor[m]
        for p in on_page
        for m in p.metrics
        if m in drawn.cursor and last_steps.get(m) is not None and last_steps[m] > drawn.cursor[m]  # type: ignore[operator]
    }
    redraw = {p.key for p in on_page if redrawn_now(p, drawn, marks_changed, any(m in behind for m in p.metrics))}
    fresh = await read_new_points(api, run_id, behind, view)
    for panel in on_page:
        if panel.kind == "lines" and any(isinstance(fresh.get(m), TooFarBehind) for m in panel.metrics):
            redraw.add(panel.key)
    # charts drawn again whole (each section at its own resolution)
    for compact in (False, True):
        again = [p for p in on_page if p.key in redraw and (p.key in compact_keys) == compact]
        if again:
            charts = await draw_panels(api, run_id, again, view, snap.marks, snap.vocab, compact=compact)
            update.figures.update(charts.figures)
            update.cursor.update(charts.cursor)
            update.ema.update(charts.ema)
            for panel in again:
                update.tail[panel.key] = 0
    # the others: their new points appended
    appendable = {m: s for m, s in fresh.items() if isinstance(s, Series) and len(s)}
    for panel in on_page:
        if panel.key in redraw or panel.kind != "lines":
            continue
        mine = {m: appendable[m] for m in panel.metrics if m in appendable}
        if not mine:
            continue
        extensions, states = line_appends(panel, mine, view, {**drawn.ema, **update.ema})
        patch = dash.Patch()
        for index, x, y in extensions:
            patch["data"][index]["x"].extend(x)
            patch["data"][index]["y"].extend(y)
        update.figures[panel.key] = patch
        update.ema.update(states)
        for metric, s in mine.items():
            update.cursor[metric] = s.steps[-1]
        update.tail[panel.key] = drawn.tail.get(panel.key, 0) + max(len(s) for s in mine.values())
    return update


def redrawn_now(panel: Panel, drawn: Drawn, marks_changed: bool, has_new: bool) -> bool:
    """Whether a chart is drawn again whole at this refresh rather than appended to: a line chart
    whose events or notes changed or that grew past its limit, a band chart with new points, a
    heatmap with new points every few refreshes (or new events)."""
    if panel.kind == "lines":
        return marks_changed or drawn.tail.get(panel.key, 0) >= TAIL_LIMIT
    if panel.kind == "band":
        return has_new
    return marks_changed or (has_new and drawn.refreshes % HEATMAP_EVERY == 0)


class TooFarBehind:
    """A metric with more new points than one refresh appends: its chart is read again whole."""


async def read_new_points(
    api: HolterAPI, run_id: str, cursors: dict[str, int], view: View
) -> dict[str, Series | TooFarBehind]:
    """Each metric's points after its cursor, exactly as stored (one read per distinct cursor:
    metrics logged together share one); TooFarBehind for a metric with more than LIVE_POINTS."""
    if not cursors:
        return {}
    by_cursor: dict[int, list[str]] = {}
    for metric, cursor in cursors.items():
        by_cursor.setdefault(cursor, []).append(metric)
    reads = await asyncio.gather(
        *(
            api.many_points(run_id, metrics, start=cursor + 1, max_points=LIVE_POINTS, with_times=view.x_axis == "time")
            for cursor, metrics in by_cursor.items()
        ),
        return_exceptions=True,
    )
    out: dict[str, Series | TooFarBehind] = {}
    for read in reads:
        if isinstance(read, BaseException):
            continue  # read again at the next refresh: the cursor has not moved
        for metric, payload in read.items():
            if isinstance(payload, ApiError):
                continue
            series = Series.from_api(payload)
            out[metric] = TooFarBehind() if series.downsampled else series
    return out


def figure_outputs(outputs: list[dict[str, Any]], figures: dict[str, Any]) -> list[Any]:
    """The values of the page's pattern-matched figure outputs: each chart's new figure or Patch, or no_update."""
    return [figures.get(o["id"]["key"], no_update) for o in outputs]
