"""The run page's callbacks: the live tick, redraws, the view (zoom, smoothing, scale, axis),
events (zoom to, acknowledge, dismiss), notes, metric kinds, tags and notes of the run, and
the URL following the view."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from dash import ALL, ClientsideFunction, Dash, Input, Output, State, ctx, no_update

from holter_dashboard.api import ApiError, HolterAPI
from holter_dashboard.links import zoom_range
from holter_dashboard.pages.run.data import (
    append_live,
    drawn_signature,
    fresh_marks,
    panels_of,
    read_snapshot,
    render_charts,
    view_of,
)
from holter_dashboard.pages.run.layout import as_int
from holter_dashboard.pages.run.views import (
    AUTO_KIND,
    events_list,
    kinds_signature,
    message,
    metrics_list,
    notes_list,
    run_info,
)


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
        Output("run-kinds", "children"),
        Output("run-kinds-sig", "data"),
        Input("run-tick", "n_intervals"),
        State("run-id", "data"),
        State("run-panels", "data"),
        State("run-marks", "data"),
        State("run-live", "data"),
        State("run-view", "data"),
        State("run-kinds-sig", "data"),
    )
    async def tick(
        _n: int | None,
        run_id: str,
        panels_data: list[dict] | None,
        marks: dict | None,
        live: dict | None,
        view_data: dict | None,
        kinds_sig: str | None,
    ) -> tuple:
        figure_outputs = ctx.outputs_list[4]
        keep_figures = [no_update] * len(figure_outputs)
        snap = await read_snapshot(api, run_id)
        if snap.run is None or snap.vocab is None:
            return (
                snap.header,
                no_update,
                no_update,
                no_update,
                keep_figures,
                no_update,
                no_update,
                no_update,
                no_update,
                no_update,
            )
        run, header, panels, new_marks = snap.run, snap.header, snap.panels, snap.marks
        # the metrics' kinds are drawn again only when one changed (a select being used must stay open)
        new_sig = kinds_signature(run)
        kinds = (metrics_list(run, snap.vocab), new_sig) if new_sig != kinds_sig else (no_update, no_update)
        # the layout drew the run as it opened; the info panel is drawn again only for a run that appeared later
        info = run_info(run, can_edit="notes" in run) if panels_data is None else no_update
        marks_out = new_marks if not marks or marks.get("sig") != new_marks["sig"] else no_update
        metric_options = snap.metric_names
        if panels != panels_data:
            # first call, new metrics or a metric whose kind changed: `draw` renders everything (and sets the live cursor)
            return header, info, panels, marks_out, keep_figures, no_update, metric_options, metric_options, *kinds
        if not live or marks_out is not no_update:
            return header, info, no_update, marks_out, keep_figures, no_update, no_update, no_update, *kinds
        figures, live = await append_live(
            api,
            run_id,
            run,
            panels_of(panels_data),
            figure_outputs,
            live,
            view_of(view_data),
            marks or new_marks,
            snap.vocab,
        )
        return header, info, no_update, no_update, figures, live, no_update, no_update, *kinds

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
    async def draw(
        panels_data: list[dict] | None, view_data: dict | None, marks: dict | None, run_id: str, live: dict | None
    ) -> tuple:
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
    def change_view(
        clicks: list,
        _zooms: list,
        _reset: int | None,
        smoothing: float,
        log_y: bool,
        x_axis: str,
        metrics: list[str] | None,
        view: dict,
        marks: dict | None,
    ) -> Any:
        view = dict(view or {})
        trigger = ctx.triggered_id
        new = dict(
            view,
            smoothing=smoothing if smoothing is not None else view.get("smoothing", 0.6),
            log_y=bool(log_y),
            x_axis=x_axis or "step",
            metrics=metrics or [],
        )
        if isinstance(trigger, dict) and trigger.get("type") in ("panel", "event-zoom"):
            # a click on an event's mark in a chart, or its Zoom button in the list
            if trigger["type"] == "panel":
                event_id = (((ctx.triggered[0]["value"] or {}).get("points") or [{}])[0]).get("customdata")
            elif ctx.triggered[0]["value"]:
                event_id = trigger["id"]
            else:
                return no_update
            event = event_of(marks, event_id)
            window = zoom_range(event) if event is not None else None
            if window is None:
                return no_update
            new["start"], new["end"] = window
        elif trigger == "run-reset":
            new["start"] = new["end"] = None
        return no_update if new == view else new

    @app.callback(
        Output("run-events", "children"),
        Output("run-notes", "children"),
        Input("run-marks", "data"),
        Input("author", "value"),
    )
    async def side_lists(marks: dict | None, author: str | None) -> tuple:
        if marks is None:
            return no_update, no_update
        return events_list(marks["events"], await api.vocabulary()), notes_list(marks["notes"], author)

    @app.callback(
        Output("kind-message", "children"),
        Output("run-kinds", "children", allow_duplicate=True),
        Output("run-kinds-sig", "data", allow_duplicate=True),
        Input({"type": "metric-kind", "metric": ALL}, "value"),
        State("run-id", "data"),
        prevent_initial_call=True,
    )
    async def change_kind(_values: list, run_id: str) -> tuple:
        trigger = ctx.triggered_id
        chosen = ctx.triggered[0]["value"] if ctx.triggered else None
        if not isinstance(trigger, dict) or not chosen:
            return no_update, no_update, no_update
        metric = trigger["metric"]
        try:
            run, vocab = await asyncio.gather(api.get_run(run_id), api.vocabulary())
            current = next((m for m in run.get("metrics") or [] if m["name"] == metric), None)
            if current is None:
                return message(f"The run has no metric {metric!r}.", ok=False), no_update, no_update
            declared = (current.get("understood") or {}).get("source") == "declared"
            if (chosen == AUTO_KIND and not declared) or (chosen == current.get("kind") and declared):
                return no_update, no_update, no_update
            await api.set_metric_kind(run_id, metric, None if chosen == AUTO_KIND else chosen)
            run = await api.get_run(run_id)
        except ApiError as exc:
            return message(exc.message, ok=False), no_update, no_update
        now = next(m for m in run["metrics"] if m["name"] == metric)
        return (
            message(f"{metric} is now read as {now['kind']}; its events are being worked out again."),
            metrics_list(run, vocab),
            kinds_signature(run),
        )

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
    async def handle_event(
        _acks: list, _dismissals: list, reason: str | None, author: str | None, run_id: str
    ) -> tuple:
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
        return message(f"Event {done}."), await fresh_marks(api, run_id)

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
    async def add_note(
        _n: int | None, start: Any, end: Any, metric: str | None, text: str | None, author: str | None, run_id: str
    ) -> tuple:
        if not (text or "").strip():
            return message("Write the note first.", ok=False), no_update, no_update
        if not author:
            return message("Type your name at the top right first.", ok=False), no_update, no_update
        start, end = as_int(start), as_int(end)
        if start is not None and end is not None and end < start:
            start, end = end, start
        try:
            await api.add_annotation(
                run_id,
                author=author,
                text=text.strip(),
                start_step=start,
                end_step=end if end is not None else start,
                metric=metric,
            )
        except ApiError as exc:
            return message(exc.message, ok=False), no_update, no_update
        return message("Note added."), "", await fresh_marks(api, run_id)

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
        return message("Note deleted."), await fresh_marks(api, run_id)

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


def event_of(marks: dict | None, event_id: Any) -> dict | None:
    for event in (marks or {}).get("events", []):
        if event.get("id") == event_id:
            return event
    return None
