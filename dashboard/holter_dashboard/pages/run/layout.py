"""The run page as it opens: the view its URL asks for, and the page drawn with the run's main
charts, its events and its notes before it answers (one round trip, not a chain of callbacks,
and no placeholder left waiting for a refresh). A distributed job's ranks and the system vitals
wait, closed, in their sections (the Ranks section open on a rank the URL picks: `?rank=N`).
A run the service does not have gets a plain "no such run" page."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import dash_mantine_components as dmc
from dash import dcc, html

from holter_dashboard.api import ApiError, HolterAPI
from holter_dashboard.components import error_alert, section
from holter_dashboard.pages.run.data import (
    Drawn,
    NoSuchRun,
    Snapshot,
    chart_grid,
    draw_panels,
    main_empty_state,
    panels_of,
    read_snapshot,
    shown,
    view_of,
)
from holter_dashboard.pages.run.details import details, details_signature, relations_pending
from holter_dashboard.pages.run.events import events_panel
from holter_dashboard.pages.run.ranks import ranks_section
from holter_dashboard.pages.run.views import (
    kinds_signature,
    metrics_list,
    no_such_run,
    notes_list,
    run_header,
    run_info,
)

TICK_MS = 1000


def title(run_id: str | None = None, **_: Any) -> str:
    return f"{run_id} · Holter" if run_id else "Run · Holter"


def as_int(value: Any) -> int | None:
    try:
        return int(float(value)) if value not in (None, "") else None
    except ValueError:
        return None


def view_from_query(
    smooth: Any = None, log: Any = None, x: Any = None, start: Any = None, end: Any = None, metrics: Any = None
) -> dict[str, Any]:
    """The view a URL asks for (its query string), with defaults for what it leaves out."""
    try:
        smoothing = min(max(float(smooth), 0.0), 0.99) if smooth not in (None, "") else 0.6
    except ValueError:
        smoothing = 0.6
    return {
        "smoothing": smoothing,
        "log_y": str(log).lower() in ("1", "true", "yes"),
        "x_axis": "time" if x == "time" else "step",
        "start": as_int(start),
        "end": as_int(end),
        "metrics": [m for m in str(metrics).split(",") if m] if metrics else [],
    }


def page_layout(api: HolterAPI) -> Callable[..., Awaitable[html.Div]]:
    """The run page's layout function for `dash.register_page`: the URL's path and query in, the page out."""

    async def layout(
        run_id: str | None = None,
        smooth: Any = None,
        log: Any = None,
        x: Any = None,
        start: Any = None,
        end: Any = None,
        metrics: Any = None,
        rank: Any = None,
        **_: Any,
    ) -> html.Div:
        view = view_from_query(smooth, log, x, start, end, metrics)
        try:
            snap = await read_snapshot(api, run_id or "")
        except NoSuchRun:
            return html.Div(no_such_run(run_id or ""))
        except ApiError as exc:
            return html.Div(error_alert(exc.message, "Cannot show this run"))
        return await build_layout(api, run_id or "", view, snap, rank=as_int(rank))

    return layout


async def build_layout(
    api: HolterAPI, run_id: str, view: dict[str, Any], snap: Snapshot, *, rank: int | None = None
) -> html.Div:
    main = shown(panels_of(snap.main_panels), view["metrics"])
    if main:
        charts = await draw_panels(api, run_id, main, view_of(view), snap.marks, snap.vocab)
        grid = chart_grid(main, charts)
    else:
        charts, grid = None, main_empty_state(panels_of(snap.main_panels), view["metrics"])
    drawn = Drawn(
        view=view,
        main=snap.main_panels,
        cursor=charts.cursor if charts else {},
        ema=charts.ema if charts else {},
        marks=snap.marks["sig"],
        kinds=kinds_signature(snap.run),
        names=snap.metric_names,
        clock=charts.clock if charts else [],
        details=details_signature(snap.run),
    )
    me = await api.signature()
    live = snap.vocab.is_live(snap.run.get("status"))
    header: Any = run_header(snap.run, snap.vocab)
    if snap.events_problem:
        header = [header, error_alert(snap.events_problem, "Events unavailable")]
    return html.Div(
        [
            dcc.Store(id="run-id", data=run_id),
            dcc.Store(id="run-view", data=view),
            dcc.Store(id="run-drawn", data=drawn.to_store()),
            dcc.Store(id="run-marks", data=snap.marks),
            dcc.Store(id="run-poke", data=0),  # bumped by what changes the run (a note, an acknowledgement)
            dcc.Store(id="run-go"),  # a refresh the tick let through (assets/run_page.js: one at a time)
            dcc.Store(id="run-done"),  # set by every refresh as it ends
            dcc.Interval(id="run-tick", interval=TICK_MS),
            dcc.Location(id="run-location", refresh=True),
            html.Div(id="run-url-sink", hidden=True),
            html.Div(id="run-header", children=header),
            dmc.Card(controls(view, snap.metric_names), padding="xs", mb="sm"),
            dmc.Grid(
                [
                    dmc.GridCol(
                        [
                            html.Div(id="run-charts", children=grid),
                            ranks_section(snap.run, snap.events, snap.vocab, rank),
                            system_section(snap),
                        ],
                        span={"base": 12, "lg": 9},
                    ),
                    dmc.GridCol(side(snap, me, live), span={"base": 12, "lg": 3}),
                ],
                gutter="md",
            ),
            delete_dialog(snap.run),
        ]
    )


def controls(view: dict[str, Any], options: list[str]) -> dmc.Group:
    return dmc.Group(
        [
            dmc.SegmentedControl(
                id="run-x",
                value=view["x_axis"],
                size="xs",
                data=[{"value": "step", "label": "by step"}, {"value": "time", "label": "by wall time"}],
            ),
            dmc.Switch(id="run-log", label="log scale", checked=view["log_y"], size="xs"),
            dmc.Group(
                [
                    dmc.Text("smoothing", size="xs", c="dimmed"),
                    dmc.Slider(
                        id="run-smooth",
                        min=0,
                        max=0.99,
                        step=0.01,
                        value=view["smoothing"],
                        w=140,
                        size="sm",
                        updatemode="mouseup",
                        label=None,
                    ),
                ],
                gap=6,
            ),
            dmc.MultiSelect(
                id="run-metrics",
                placeholder="all metrics",
                value=view["metrics"],
                data=sorted({*options, *view["metrics"]}),
                clearable=True,
                searchable=True,
                size="xs",
                w=260,
            ),
            dmc.Button("Reset zoom", id="run-reset", size="xs", variant="subtle"),
        ],
        gap="md",
    )


def system_section(snap: Snapshot) -> Any:
    """System vitals (CPU, memory, disk, network, GPU clocks and memory), closed: drawn as small
    multiples only when opened. Its label says how many there are and whether any has an open event."""
    system = snap.system_panels
    metrics = {m for p in system for m in p["metrics"]}
    open_events = [e for e in snap.events if e.get("metric") in metrics and snap.vocab.is_open(e.get("status"))]
    label = dmc.Group(
        [
            dmc.Text("System", fw=600, size="sm"),
            dmc.Text(f"{len(system)} charts: {', '.join(system_families(metrics))}", size="xs", c="dimmed"),
            dmc.Badge(f"{len(open_events)} open events", color="orange", size="xs", variant="light")
            if open_events
            else None,
        ],
        gap="sm",
    )
    return dmc.Accordion(
        dmc.AccordionItem(
            [dmc.AccordionControl(label), dmc.AccordionPanel(html.Div(id="run-system"))],
            value="system",
        ),
        id="run-system-open",
        value=None,
        variant="contained",
        mt="sm",
        className="run-system",
        # there even without system vitals (the page's refresh listens to it), only not shown
        style=None if system else {"display": "none"},
    )


def system_families(metrics: set[str]) -> list[str]:
    """What the system charts measure, in a few words: `holter/system/cpu.percent` -> cpu."""
    families = {m.rsplit("/", 1)[-1].split(".", 1)[0].split("_", 1)[0] for m in metrics}
    return sorted(families)


def side(snap: Snapshot, me: str | None, live: bool) -> dmc.Stack:
    options = snap.metric_names
    return dmc.Stack(
        [
            section(
                "Events",
                html.Div(
                    id="run-events", children=events_panel(snap.events, snap.vocab, live=live, incidents=snap.incidents)
                ),
                dmc.TextInput(id="event-reason", placeholder="reason (for acknowledge / dismiss)", size="xs", mt=8),
                html.Div(id="event-message"),
            ),
            section(
                "Run details",
                html.Div(id="run-details", children=details(snap.run)),
                # twins and repeats: read once the page is drawn (callbacks.read_relations)
                html.Div(id="run-relations", children=relations_pending()),
            ),
            section(
                "Add a note",
                dmc.Text(
                    "Drag on a chart with the box-select tool, or zoom, to fill the range.", size="xs", c="dimmed"
                ),
                dmc.Group(
                    [
                        dmc.NumberInput(id="note-start", placeholder="from step", size="xs", w="48%", min=0),
                        dmc.NumberInput(id="note-end", placeholder="to step", size="xs", w="48%", min=0),
                    ],
                    gap="xs",
                    mt=6,
                ),
                dmc.Select(id="note-metric", placeholder="all charts", data=options, clearable=True, size="xs", mt=6),
                dmc.Textarea(
                    id="note-text", placeholder="what happened here?", autosize=True, minRows=2, size="xs", mt=6
                ),
                dmc.Button("Add note", id="note-add", size="xs", mt=6, fullWidth=True),
                dmc.Text(f"signed as {me}" if me else "", size="xs", c="dimmed", mt=2, id="note-signature"),
                html.Div(id="note-message"),
                html.Div(id="run-notes", children=notes_list(snap.notes, me), style={"marginTop": 8}),
            ),
            section(
                "Metrics",
                html.Div(id="run-kinds", children=metrics_list(snap.run, snap.vocab)),
                html.Div(id="kind-message"),
            ),
            section("Run", html.Div(id="run-info", children=run_info(snap.run, can_edit="notes" in snap.run))),
        ],
        gap="sm",
    )


def delete_dialog(run: dict[str, Any]) -> dmc.Modal:
    """Asks before a run is deleted: what goes with it, and that it cannot be undone."""
    name = run.get("name") or run["id"]
    return dmc.Modal(
        [
            dmc.Text(
                f"Delete {name} ({run['id']}) with every point, event, note and alert of it? This cannot be undone; "
                "archive it instead to hide it from the runs page and keep it.",
                size="sm",
            ),
            dmc.Group(
                [
                    dmc.Button("Cancel", id="run-delete-cancel", variant="default", size="xs"),
                    dmc.Button("Delete run", id="run-delete-confirm", color="red", size="xs"),
                ],
                justify="flex-end",
                mt="md",
            ),
            html.Div(id="run-delete-message"),
        ],
        id="run-delete-dialog",
        title="Delete this run?",
        opened=False,
        centered=True,
    )
