"""Compare page: one metric across runs, aligned by step, with their events and a reference band."""

from __future__ import annotations

import asyncio
from typing import Any

import dash_mantine_components as dmc
from dash import Dash, Input, Output, State, dcc, html, no_update

from holter_dashboard.api import ApiError, HolterAPI, optional
from holter_dashboard.components import empty_state, error_alert
from holter_dashboard.figures import Series, View, compare_figure, minmax_downsample

MAX_POINTS = 2000


def layout(runs: str | None = None, metric: str | None = None, ref: str | None = None, smooth: Any = None, **_: Any) -> html.Div:
    chosen = [r for r in (runs or "").split(",") if r]
    try:
        smoothing = min(max(float(smooth), 0.0), 0.99) if smooth not in (None, "") else 0.6
    except ValueError:
        smoothing = 0.6
    controls = dmc.Group(
        [
            dmc.MultiSelect(id="cmp-runs", label="Runs", value=chosen, data=[{"value": r, "label": r} for r in chosen],
                            searchable=True, clearable=True, w=420, size="xs"),
            dmc.Select(id="cmp-metric", label="Metric", value=metric, data=[metric] if metric else [], searchable=True, w=220, size="xs"),
            dmc.Select(id="cmp-ref", label="Reference run", value=ref, data=[{"value": r, "label": r} for r in chosen], clearable=True,
                       placeholder="none", w=220, size="xs"),
            dmc.Stack([dmc.Text("smoothing", size="xs"),
                       dmc.Slider(id="cmp-smooth", min=0, max=0.99, step=0.01, value=smoothing, w=140, updatemode="mouseup")], gap=4),
        ],
        gap="md", align="flex-end",
    )
    return html.Div(
        [
            dmc.Title("Compare runs", order=2, mb="sm"),
            dmc.Card(controls, padding="sm", mb="md"),
            dcc.Loading(html.Div(id="cmp-body"), type="dot", delay_show=400),
            dcc.Interval(id="cmp-tick", interval=5000),
            html.Div(id="cmp-url-sink", hidden=True),
        ]
    )


def register(app: Dash, api: HolterAPI) -> None:
    @app.callback(
        Output("cmp-runs", "data"),
        Output("cmp-metric", "data"),
        Output("cmp-metric", "value"),
        Output("cmp-ref", "data"),
        Input("cmp-runs", "value"),
        State("cmp-metric", "value"),
    )
    async def options(chosen: list[str] | None, metric: str | None) -> tuple:
        try:
            listing = await api.list_runs()
            details = await asyncio.gather(*(api.get_run(r) for r in chosen or []), return_exceptions=True)
        except ApiError:
            return no_update, no_update, no_update, no_update
        label = {r["id"]: f"{r.get('name') or r['id']} ({r['id']})" for r in listing["data"]}
        run_options = [{"value": r["id"], "label": label[r["id"]]} for r in listing["data"]]
        run_options += [{"value": r, "label": r} for r in chosen or [] if r not in label]
        metrics: list[str] = sorted({m["name"] for d in details if isinstance(d, dict) for m in d.get("metrics") or []})
        if metric not in metrics:
            metric = next((m for m in ("loss", "train_loss", "train/loss") if m in metrics), metrics[0] if metrics else None)
        refs = [{"value": r, "label": label.get(r, r)} for r in chosen or []]
        return run_options, metrics, metric, refs

    @app.callback(
        Output("cmp-body", "children"),
        Input("cmp-runs", "value"),
        Input("cmp-metric", "value"),
        Input("cmp-ref", "value"),
        Input("cmp-smooth", "value"),
        Input("cmp-tick", "n_intervals"),
    )
    async def draw(chosen: list[str] | None, metric: str | None, ref: str | None, smoothing: float | None, _n: int | None) -> Any:
        if not chosen:
            return empty_state("Pick runs to compare", "Tick two or more runs on the runs page, or choose them above.")
        if not metric:
            return empty_state("These runs have no metric in common yet")
        reads = await asyncio.gather(*(api.points(r, metric, max_points=MAX_POINTS) for r in chosen), return_exceptions=True)
        runs: list[tuple[str, str, Series, list]] = []
        problems: list[str] = []
        for run_id, read in zip(chosen, reads):
            if isinstance(read, ApiError):
                problems.append(f"{run_id}: {read.message}")
                continue
            if isinstance(read, BaseException):
                raise read
            s = Series.from_api(read)
            if len(s) > 2 * MAX_POINTS:
                steps, values = minmax_downsample(s.steps, s.values, MAX_POINTS)
                s = Series(steps, values, [], True)
            events, _ = await optional(api.run_events(run_id, metric=metric), [])
            runs.append((run_id, run_id, s, events))
        figure = compare_figure(metric, runs, reference=ref if ref in chosen else None, view=View(smoothing=smoothing or 0.0))
        figure["layout"]["uirevision"] = f"{','.join(chosen)}:{metric}:{ref}"
        body: list[Any] = [error_alert("; ".join(problems), "Some runs could not be read")] if problems else []
        body.append(dmc.Paper(dcc.Graph(id="cmp-graph", figure=figure, config={"displaylogo": False}), withBorder=True, radius="md", p=4))
        return body

    app.clientside_callback(
        """
        function(runs, metric, ref, smooth) {
            if (window.location.pathname !== '/compare') return window.dash_clientside.no_update;
            const q = new URLSearchParams();
            if (runs && runs.length) q.set('runs', runs.join(','));
            if (metric) q.set('metric', metric);
            if (ref) q.set('ref', ref);
            if (smooth !== null && smooth !== undefined && smooth !== 0.6) q.set('smooth', smooth);
            setTimeout(() => window.history.replaceState(null, '', '/compare' + (q.toString() ? '?' + q.toString() : '')), 0);
            return window.dash_clientside.no_update;
        }
        """,
        Output("cmp-url-sink", "children"),
        Input("cmp-runs", "value"), Input("cmp-metric", "value"), Input("cmp-ref", "value"), Input("cmp-smooth", "value"),
    )
