"""The run page's callbacks.

One callback, `refresh`, writes the charts and what they were drawn from (`run-drawn`), the
header, the events and notes, and the run details (code, environment, pre-flight) when they
change: it is the page's only writer of them, so a chart and its cursor
never disagree. It runs on the tick (every second), when the view changes (zoom, smoothing,
scale, axis, chosen metrics), when the System section opens or closes, and after the reader
changed the run (a note, an acknowledgement). The tick goes through a gate in the browser
(assets/run_page.js): a tick while a refresh is on its way is skipped, never raced, and Dash
keeps only the newest answer of a callback called again before it answered; so each refresh
starts from what the last applied one drew, and new points are appended in order and once.

The Ranks section of a distributed job's run has a refresh of its own (`refresh_ranks`): it
reads the ranks only while the section is open, every few seconds while the job is alive, and
when the run's events about its ranks change (`follow_rank_events`, which also keeps the closed
section's label current); the reader picks a rank from an event, a row or the heatmap.

The others: the run's twins and repeats, read once after the page is drawn (`read_relations`);
the view (clicks on events, reset, the controls; a zoom is followed in the browser),
acknowledging and dismissing events, notes, metric kinds, tags and notes of the run, archive
and delete, and the URL following the view.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from dash import ALL, ClientsideFunction, Dash, Input, Output, State, ctx, no_update

from holter_dashboard.api import ApiError, HolterAPI, optional
from holter_dashboard.components import error_alert
from holter_dashboard.links import zoom_range
from holter_dashboard.pages.run.data import (
    Drawn,
    NoSuchRun,
    chart_grid,
    draw_panels,
    figure_outputs,
    main_empty_state,
    panels_of,
    read_snapshot,
    shown,
    update_charts,
    view_of,
)
from holter_dashboard.pages.run.details import details, details_signature, relations
from holter_dashboard.pages.run.events import events_panel
from holter_dashboard.pages.run.layout import as_int
from holter_dashboard.pages.run.ranks import (
    SECTION,
    buckets_for,
    metric_choices,
    rank_events_signature,
    ranks_body,
    section_label,
)
from holter_dashboard.pages.run.views import (
    AUTO_KIND,
    kinds_signature,
    message,
    metrics_list,
    no_such_run,
    notes_list,
    run_header,
)

SYSTEM = "system"  # the System section's accordion value when open
FIGURES = 8  # the position of the charts' figures among `refresh`'s outputs
DETAILS = 12  # ... and of the run details


def register(app: Dash, api: HolterAPI) -> None:
    # The tick asks for a refresh only when none is on its way (assets/run_page.js)
    app.clientside_callback(
        ClientsideFunction(namespace="holter", function_name="tick_gate"),
        Output("run-go", "data"),
        Input("run-tick", "n_intervals"),
        prevent_initial_call=True,
    )
    app.clientside_callback(
        ClientsideFunction(namespace="holter", function_name="refreshed"),
        Output("run-url-sink", "title"),
        Input("run-done", "data"),
        prevent_initial_call=True,
    )

    @app.callback(
        Output("run-header", "children"),
        Output("run-charts", "children"),
        Output("run-system", "children"),
        Output("run-events", "children"),
        Output("run-notes", "children"),
        Output("run-kinds", "children"),
        Output("run-metrics", "data"),
        Output("note-metric", "data"),
        Output({"type": "panel", "key": ALL}, "figure"),
        Output("run-drawn", "data"),
        Output("run-marks", "data"),
        Output("run-done", "data"),
        Output("run-details", "children"),
        Input("run-go", "data"),
        Input("run-view", "data"),
        Input("run-system-open", "value"),
        Input("run-poke", "data"),
        State("run-id", "data"),
        State("run-drawn", "data"),
        prevent_initial_call=True,
    )
    async def refresh(
        go: Any, view_data: dict | None, system_open: str | None, _poke: Any, run_id: str, drawn_data: dict | None
    ) -> tuple:
        outputs = ctx.outputs_list[FIGURES]
        keep = [no_update] * len(outputs)
        # every refresh says it ended, whatever started it: one started by the reader replaces a tick's
        out: list[Any] = [no_update] * 8 + [keep, no_update, no_update, poke(), no_update]
        try:
            snap = await read_snapshot(api, run_id)
        except NoSuchRun:
            out[0] = no_such_run(run_id)
            out[1] = out[2] = []
            return tuple(out)
        except ApiError as exc:
            out[0] = error_alert(exc.message, "Cannot read this run")
            return tuple(out)
        view_data = view_data or {}
        drawn = Drawn.from_store(drawn_data) or Drawn(view=view_data)
        header: Any = run_header(snap.run, snap.vocab)
        if snap.events_problem:
            header = [header, error_alert(snap.events_problem, "Events unavailable")]
        out[0] = header
        marks = snap.marks
        marks_changed = marks["sig"] != drawn.marks
        me = None
        if marks_changed:
            me = await api.signature()
            out[3] = events_panel(
                snap.events, snap.vocab, live=snap.vocab.is_live(snap.run.get("status")), incidents=snap.incidents
            )
            out[4] = notes_list(snap.notes, me)
            out[10] = marks
        kinds = kinds_signature(snap.run)
        if kinds != drawn.kinds:  # drawn again only when one changed: a select being used must stay open
            out[5] = metrics_list(snap.run, snap.vocab)
        if snap.metric_names != drawn.names:
            out[6] = out[7] = snap.metric_names
        shown_details = details_signature(snap.run)
        if shown_details != drawn.details:  # a pre-flight report that arrived since, say
            out[DETAILS] = details(snap.run)
        view = view_of(view_data)
        chosen = view_data.get("metrics") or []
        all_main = panels_of(snap.main_panels)
        main = shown(all_main, chosen)
        system = panels_of(snap.system_panels) if system_open == SYSTEM else []
        new = Drawn(
            view=view_data,
            main=snap.main_panels,
            system=snap.system_panels if system_open == SYSTEM else None,
            cursor=dict(drawn.cursor),
            ema=dict(drawn.ema),
            tail=dict(drawn.tail),
            marks=marks["sig"],
            kinds=kinds,
            names=snap.metric_names,
            clock=drawn.clock,
            refreshes=drawn.refreshes + 1,
            details=shown_details,
        )
        main_again = drawn.view != view_data or drawn.main != snap.main_panels
        system_again = main_again or drawn.system != new.system
        if main_again:
            if main:
                charts = await draw_panels(api, run_id, main, view, marks, snap.vocab)
                out[1] = chart_grid(main, charts)
                new.cursor.update(charts.cursor)
                new.ema.update(charts.ema)
                new.clock = charts.clock
                new.tail.update(dict.fromkeys((p.key for p in main), 0))
            else:
                out[1] = main_empty_state(all_main, chosen)
        if system_again:
            if system:
                charts = await draw_panels(api, run_id, system, view, marks, snap.vocab, compact=True)
                out[2] = chart_grid(system, charts, compact=True)
                new.cursor.update(charts.cursor)
                new.ema.update(charts.ema)
                new.tail.update(dict.fromkeys((p.key for p in system), 0))
            else:
                out[2] = []
        # the charts left on the page: brought up to the run in place
        replaced = {p.key for p in main} if main_again else set()
        replaced |= {p.key for p in system} if system_again else set()
        on_page_keys = {o["id"]["key"] for o in outputs} - replaced
        drawn_panels = panels_of(drawn.main) + panels_of(drawn.system or [])
        on_page = [p for p in drawn_panels if p.key in on_page_keys]
        if on_page:
            update = await update_charts(
                api,
                run_id,
                snap,
                drawn,
                on_page,
                marks_changed=marks_changed,
                compact_keys={p.key for p in panels_of(drawn.system or [])},
            )
            out[FIGURES] = figure_outputs(outputs, update.figures)
            new.cursor.update(update.cursor)
            new.ema.update(update.ema)
            new.tail.update(update.tail)
        out[9] = new.to_store()
        return tuple(out)

    @app.callback(
        Output("run-ranks", "children"),
        Output("run-ranks-label", "children"),
        Output("run-ranks-tick", "disabled"),
        Output("run-ranks-metric", "data"),
        Input("run-ranks-tick", "n_intervals"),
        Input("run-ranks-open", "value"),
        Input("run-ranks-metric", "value"),
        Input("run-rank", "data"),
        Input("run-ranks-seen", "data"),
        State("run-id", "data"),
        State("run-job", "data"),
        State("run-marks", "data"),
        State("run-ranks-metric", "data"),
    )
    async def refresh_ranks(
        _tick: Any,
        opened: str | None,
        metric: str | None,
        picked: int | None,
        _seen: Any,
        run_id: str,
        job: dict | None,
        marks: dict | None,
        choices: list | None,
    ) -> tuple:
        """The Ranks section drawn again, only while it is open, and its tick on while the job may
        still move. Every call that reads draws the whole section: Dash keeps only the answer of
        the newest call, so none may answer with less (the run's other events never call it:
        `follow_rank_events` tells it when the events about ranks changed)."""
        if not job or opened != SECTION:
            return no_update, no_update, True, no_update
        vocab = await api.vocabulary()
        events = (marks or {}).get("events") or []
        try:
            run, ranks = await asyncio.gather(api.get_run(run_id), api.ranks(run_id))
        except ApiError as exc:
            return error_alert(exc.message, "Cannot read the ranks"), no_update, False, no_update
        metrics = run.get("metrics") or []
        problems: list[str] = []
        matrix = None
        if metric:
            try:
                matrix = await api.rank_matrix(run_id, metric, max_buckets=buckets_for(metric, metrics))
            except ApiError as exc:
                problems.append(f"{metric}: {exc.message}")
        body = ranks_body(ranks, matrix, events, vocab, selected=picked, problems=problems)
        # on while anything may still move: the run logs, or a rank still beats (a hung job's run
        # stalls while its ranks beat on; ranks read from their logs never beat, their run says)
        alive = vocab.is_live(run.get("status")) or any(r.get("alive") for r in ranks.get("data") or [])
        now = metric_choices(metrics, vocab)
        label = section_label(run.get("job") or job, events, vocab)
        return body, label, not alive, now if now != choices else no_update

    @app.callback(
        Output("run-ranks-label", "children", allow_duplicate=True),
        Output("run-ranks-seen", "data"),
        Input("run-marks", "data"),
        State("run-job", "data"),
        State("run-ranks-seen", "data"),
        prevent_initial_call=True,
    )
    async def follow_rank_events(marks: dict | None, job: dict | None, seen: str | None) -> tuple:
        """The section's label follows the run's events about its ranks, and the section (when
        open) is drawn again when those change (`run-ranks-seen`), not when the run's others do."""
        if not job:
            return no_update, no_update
        vocab = await api.vocabulary()
        events = (marks or {}).get("events") or []
        standing = rank_events_signature(events, vocab)
        if standing == seen:
            return no_update, no_update
        return section_label(job, events, vocab), standing

    # A rank picked on an event's link or on its row is set in the browser (assets/run_page.js
    # `pickRank`, a click listener: no callback); one picked on the heatmap, here
    app.clientside_callback(
        ClientsideFunction(namespace="holter", function_name="pick_rank_on_heatmap"),
        Output("run-rank", "data"),
        Input("run-ranks-heatmap", "clickData"),
        State("run-rank", "data"),
        prevent_initial_call=True,
    )

    # The URL names the picked rank (`?rank=N`), and the page scrolls to the section
    app.clientside_callback(
        ClientsideFunction(namespace="holter", function_name="rank_to_url"),
        Output("run-rank-sink", "children"),
        Input("run-rank", "data"),
    )

    @app.callback(
        Output("run-relations", "children"),
        Input("run-id", "data"),
    )
    async def read_relations(run_id: str | None) -> Any:
        """Twins and repeats, read once the page is drawn: repeats read other runs' curves, which
        must not hold up the charts."""
        if not run_id:
            return no_update
        (twins, twins_problem), (repeats, repeats_problem) = await asyncio.gather(
            optional(api.twins(run_id), None), optional(api.repeats(run_id), None)
        )
        return relations(twins, repeats, (twins_problem, repeats_problem))

    # A zoom on a chart sets the view's step range in the browser (assets/run_page.js says why)
    app.clientside_callback(
        ClientsideFunction(namespace="holter", function_name="follow_zoom"),
        Output("run-view", "data", allow_duplicate=True),
        Input({"type": "panel", "key": ALL}, "relayoutData"),
        State("run-view", "data"),
        State("run-drawn", "data"),
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
        Output("kind-message", "children"),
        Output("run-poke", "data", allow_duplicate=True),
        Input({"type": "metric-kind", "metric": ALL}, "value"),
        State("run-id", "data"),
        prevent_initial_call=True,
    )
    async def change_kind(_values: list, run_id: str) -> tuple:
        trigger = ctx.triggered_id
        chosen = ctx.triggered[0]["value"] if ctx.triggered else None
        if not isinstance(trigger, dict) or not chosen:
            return no_update, no_update
        metric = trigger["metric"]
        try:
            run = await api.get_run(run_id)
            current = next((m for m in run.get("metrics") or [] if m["name"] == metric), None)
            if current is None:
                return message(f"The run has no metric {metric!r}.", ok=False), no_update
            declared = (current.get("understood") or {}).get("source") == "declared"
            if (chosen == AUTO_KIND and not declared) or (chosen == current.get("kind") and declared):
                return no_update, no_update
            await api.set_metric_kind(run_id, metric, None if chosen == AUTO_KIND else chosen)
            run = await api.get_run(run_id)
        except ApiError as exc:
            return message(exc.message, ok=False), no_update
        now = next(m for m in run["metrics"] if m["name"] == metric)
        return message(f"{metric} is now read as {now['kind']}; its events are being worked out again."), poke()

    @app.callback(
        Output("event-message", "children"),
        Output("run-poke", "data", allow_duplicate=True),
        Input({"type": "event-ack", "id": ALL}, "n_clicks"),
        Input({"type": "event-dismiss", "id": ALL}, "n_clicks"),
        State("event-reason", "value"),
        State("run-id", "data"),
        prevent_initial_call=True,
    )
    async def handle_event(_acks: list, _dismissals: list, reason: str | None, run_id: str) -> tuple:
        trigger = ctx.triggered_id
        if not isinstance(trigger, dict) or not ctx.triggered[0]["value"]:
            return no_update, no_update
        try:
            if trigger["type"] == "event-ack":
                event = await api.acknowledge(run_id, trigger["id"], reason=reason or "")
            else:
                event = await api.dismiss(run_id, trigger["id"], reason=reason or "", mute=False)
        except ApiError as exc:
            return message(exc.message, ok=False), no_update
        return message(f"Event {event.get('status')} (signed {event.get('status_by')})."), poke()

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
        Output("run-poke", "data", allow_duplicate=True),
        Input("note-add", "n_clicks"),
        State("note-start", "value"),
        State("note-end", "value"),
        State("note-metric", "value"),
        State("note-text", "value"),
        State("run-id", "data"),
        prevent_initial_call=True,
    )
    async def add_note(
        _n: int | None, start: Any, end: Any, metric: str | None, text: str | None, run_id: str
    ) -> tuple:
        if not (text or "").strip():
            return message("Write the note first.", ok=False), no_update, no_update
        start, end = as_int(start), as_int(end)
        if start is not None and end is not None and end < start:
            start, end = end, start
        try:
            await api.add_annotation(
                run_id,
                text=text.strip(),
                start_step=start,
                end_step=end if end is not None else start,
                metric=metric,
            )
        except ApiError as exc:
            return message(exc.message, ok=False), no_update, no_update
        return message("Note added."), "", poke()

    @app.callback(
        Output("note-message", "children", allow_duplicate=True),
        Output("run-poke", "data", allow_duplicate=True),
        Input({"type": "note-delete", "id": ALL}, "n_clicks"),
        State("run-id", "data"),
        prevent_initial_call=True,
    )
    async def delete_note(_clicks: list, run_id: str) -> tuple:
        trigger = ctx.triggered_id
        if not isinstance(trigger, dict) or not ctx.triggered[0]["value"]:
            return no_update, no_update
        try:
            await api.delete_annotation(run_id, trigger["id"])
        except ApiError as exc:
            return message(exc.message, ok=False), no_update
        return message("Note deleted."), poke()

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

    # in the browser: asking before a delete needs no answer from a busy service
    app.clientside_callback(
        ClientsideFunction(namespace="holter", function_name="ask_before_deleting"),
        Output("run-delete-dialog", "opened"),
        Input("run-delete", "n_clicks"),
        Input("run-delete-cancel", "n_clicks"),
        prevent_initial_call=True,
    )

    @app.callback(
        Output("run-delete-message", "children"),
        Output("run-location", "href"),
        Input("run-delete-confirm", "n_clicks"),
        State("run-id", "data"),
        prevent_initial_call=True,
    )
    async def delete_run(n: int | None, run_id: str) -> tuple:
        if not n:
            return no_update, no_update
        try:
            await api.delete_run(run_id)
        except ApiError as exc:
            return message(exc.message, ok=False), no_update
        return message("Deleted."), "/"

    @app.callback(
        Output("event-message", "children", allow_duplicate=True),
        Output("run-poke", "data", allow_duplicate=True),
        Input("run-archive", "n_clicks"),
        State("run-id", "data"),
        prevent_initial_call=True,
    )
    async def archive_run(n: int | None, run_id: str) -> tuple:
        if not n:
            return no_update, no_update
        try:
            run = await api.get_run(run_id)
            archived = not run.get("archived_at")
            await api.archive_run(run_id, archived)
        except ApiError as exc:
            return message(exc.message, ok=False), no_update
        text = "Archived: hidden from the runs page (its filter shows it)." if archived else "Back on the runs page."
        return message(text), poke()

    # The URL follows the view (history.replaceState: no reload), so it can be shared or bookmarked
    app.clientside_callback(
        ClientsideFunction(namespace="holter", function_name="view_to_url"),
        Output("run-url-sink", "children"),
        Input("run-view", "data"),
    )


def poke() -> float:
    """A new value for `run-poke`: the page refreshes at once after the reader changed the run."""
    return asyncio.get_running_loop().time()


def event_of(marks: dict | None, event_id: Any) -> dict | None:
    for event in (marks or {}).get("events", []):
        if event.get("id") == event_id:
            return event
    return None
