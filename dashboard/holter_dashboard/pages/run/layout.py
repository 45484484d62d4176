"""The run page as it opens: the view its URL asks for, and the page drawn with the run's charts
before it answers (one round trip, not a chain of callbacks)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import dash_mantine_components as dmc
from dash import dcc, html

from holter_dashboard.api import HolterAPI
from holter_dashboard.components import section
from holter_dashboard.pages.run.data import FirstRender, first_render
from holter_dashboard.pages.run.views import kinds_signature

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
        **_: Any,
    ) -> html.Div:
        view = view_from_query(smooth, log, x, start, end, metrics)
        return build_layout(run_id, view, await first_render(api, run_id or "", view))

    return layout


def build_layout(run_id: str | None, view: dict[str, Any], first: FirstRender) -> html.Div:
    snap = first.snapshot
    options = snap.metric_names
    controls = dmc.Group(
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
    side = dmc.Stack(
        [
            section(
                "Events",
                html.Div(id="run-events", children=dmc.Skeleton(h=80)),
                dmc.TextInput(id="event-reason", placeholder="reason (for acknowledge / dismiss)", size="xs", mt=8),
                html.Div(id="event-message"),
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
                html.Div(id="note-message"),
                html.Div(id="run-notes", style={"marginTop": 8}),
            ),
            section("Metrics", html.Div(id="run-kinds", children=first.metrics), html.Div(id="kind-message")),
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
            dcc.Store(id="run-kinds-sig", data=kinds_signature(snap.run) if snap.run else None),
            dcc.Interval(id="run-tick", interval=TICK_MS),
            html.Div(id="run-url-sink", hidden=True),
            html.Div(id="run-header", children=snap.header),
            dmc.Card(controls, padding="xs", mb="sm"),
            dmc.Grid(
                [
                    dmc.GridCol(
                        html.Div(
                            id="run-charts", children=first.charts if first.charts is not None else dmc.Skeleton(h=300)
                        ),
                        span={"base": 12, "lg": 9},
                    ),
                    dmc.GridCol(side, span={"base": 12, "lg": 3}),
                ],
                gutter="md",
            ),
        ]
    )
