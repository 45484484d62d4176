"""Post-mortem page: what happened in a run, for whoever reviews it afterwards.

The written summary first, then the timeline of every event and status change in step order
(each entry opens the run page zoomed there), the annotated curves, the notes, the config, a
self-contained HTML report to download, and the run against its project's reference run.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import dash_mantine_components as dmc
from dash import Dash, Input, Output, State, dcc, html, no_update
from holter_charts.compare import drift_sentence, reference_figure
from holter_charts.figures import panel_figure
from holter_charts.marks import event_label
from holter_charts.panels import plan_panels
from holter_charts.series import View
from holter_charts.vocabulary import Vocabulary

from holter_dashboard.api import ApiError, HolterAPI
from holter_dashboard.components import empty_state, error_alert, health_badge, section, severity_badge, status_badge
from holter_dashboard.links import zoom_href
from holter_dashboard.pages.run.data import GRAPH_CONFIG, load_series


def title(run_id: str | None = None, **_: Any) -> str:
    return f"Post-mortem {run_id} · Holter" if run_id else "Post-mortem · Holter"


def layout(run_id: str | None = None, metric: str | None = None, **_: Any) -> html.Div:
    """The page; `?metric=` picks the metric compared with the reference (default: an eval loss)."""
    reference = section(
        "Reference run",
        dmc.Group(
            [
                dmc.Select(
                    id="pm-ref-metric", label="Metric", data=[], size="xs", w=240, searchable=True, allowDeselect=False
                ),
                dmc.Button(
                    "Make this the project's reference", id="pm-make-ref", size="xs", variant="light", disabled=True
                ),
            ],
            align="flex-end",
            justify="space-between",
        ),
        html.Div(id="pm-ref-message"),
        dcc.Loading(html.Div(id="pm-reference", style={"marginTop": 8}), type="dot", delay_show=400),
    )
    side = dmc.Stack(
        [
            section("Timeline", html.Div(id="pm-timeline", children=dmc.Skeleton(h=160))),
            section("Notes", html.Div(id="pm-notes")),
            section("Config", html.Div(id="pm-config")),
        ],
        gap="sm",
    )
    return html.Div(
        [
            dcc.Store(id="pm-run-id", data=run_id),
            dcc.Store(id="pm-data", data=None),
            dcc.Store(id="pm-wanted-metric", data=metric),
            dcc.Store(id="pm-ref-version", data=0),
            html.Div(id="pm-header", children=dmc.Skeleton(h=40, mb="sm")),
            dmc.Grid(
                [
                    dmc.GridCol(
                        dmc.Stack(
                            [
                                html.Div(id="pm-summary"),
                                dcc.Loading(
                                    html.Div(id="pm-charts", children=dmc.Skeleton(h=300)), type="dot", delay_show=400
                                ),
                                reference,
                            ],
                            gap="sm",
                        ),
                        span={"base": 12, "lg": 8},
                    ),
                    dmc.GridCol(side, span={"base": 12, "lg": 4}),
                ],
                gutter="md",
            ),
        ]
    )


# ---------------------------------------------------------------------------------- views


def default_reference_metric(metrics: list[dict[str, Any]], vocab: Vocabulary) -> str | None:
    """The metric a reference comparison starts on: of the kinds the vocabulary prefers (an eval
    loss, else the training loss), as the service reads each metric; else the first by name."""
    for kind in vocab.data.get("reference_kinds") or ():
        found = sorted(m["name"] for m in metrics if m.get("kind") == kind)
        if found:
            return found[0]
    names = sorted(m["name"] for m in metrics)
    return names[0] if names else None


def _steps(start: int | None, end: int | None) -> str:
    if start is None:
        return "run"
    if end in (None, start):
        return f"step {start:,}"
    return f"steps {start:,}–{end:,}"


def header(run: dict[str, Any], report_url: str, vocab: Vocabulary) -> dmc.Group:
    return dmc.Group(
        [
            dmc.Stack(
                [
                    dmc.Group(
                        [
                            dmc.Anchor("Runs", href="/", size="sm", c="dimmed"),
                            dmc.Text("/", c="dimmed", size="sm"),
                            dmc.Text(run.get("project"), size="sm", c="dimmed"),
                            dmc.Text("/", c="dimmed", size="sm"),
                            dmc.Anchor(run.get("name") or run["id"], href=f"/runs/{run['id']}", size="sm", c="dimmed"),
                        ],
                        gap=6,
                    ),
                    dmc.Group(
                        [
                            dmc.Title(f"Post-mortem: {run.get('name') or run['id']}", order=2, id="pm-title"),
                            status_badge(run.get("status"), vocab),
                            health_badge(run.get("health"), vocab, run.get("open_events"), run.get("problems")),
                        ],
                        gap="sm",
                    ),
                ],
                gap=2,
            ),
            dmc.Group(
                [
                    dmc.Anchor(dmc.Button("Open the run", size="xs", variant="subtle"), href=f"/runs/{run['id']}"),
                    html.A(
                        dmc.Button("Download report", size="xs"),
                        href=report_url,
                        download=f"holter-{run['id']}.html",
                        id="pm-report",
                        title="a self-contained HTML file: opens offline, charts included",
                    ),
                ],
                gap="xs",
            ),
        ],
        justify="space-between",
        align="flex-end",
        mb="sm",
    )


def timeline(run: dict[str, Any], events: list[dict[str, Any]], vocab: Vocabulary) -> Any:
    """Every event and status change in step order, then where the run ended; each opens the run page there."""
    items = []
    for e in events:
        handled = e.get("status") in vocab.handled_statuses
        title_row = dmc.Group(
            [
                severity_badge(event_label(e, vocab), e.get("severity"), vocab, quiet=handled, size="sm"),
                dmc.Text(_steps(e.get("start_step"), e.get("end_step")), size="xs", fw=600),
                dmc.Text(e.get("metric") or "run", size="xs", c="dimmed", ff="monospace"),
            ],
            gap=6,
        )
        body: list[Any] = [dmc.Text(e.get("summary") or "", size="xs")]
        if handled:
            body.append(
                dmc.Text(
                    f"{e['status']} by {e.get('status_by') or 'someone'}"
                    + (f": {e['status_reason']}" if e.get("status_reason") else ""),
                    size="xs",
                    c="dimmed",
                    fs="italic",
                )
            )
        href = zoom_href(run["id"], e, e.get("metric"))
        items.append(
            dmc.TimelineItem(
                dmc.Anchor(dmc.Stack(body, gap=0), href=href, underline="never", c="dark", className="timeline-link"),
                title=dmc.Anchor(title_row, href=href, underline="never", c="dark"),
                className=f"timeline-entry timeline-{e.get('kind')}",
            )
        )
    last = run.get("last_step")
    items.append(
        dmc.TimelineItem(
            dmc.Text(f"last step {last:,}" if last is not None else "no points logged", size="xs", c="dimmed"),
            title=dmc.Group(
                [status_badge(run.get("status"), vocab), dmc.Text("the run's state now", size="xs", c="dimmed")], gap=6
            ),
            className="timeline-entry timeline-end",
        )
    )
    hint = dmc.Text(
        "Nothing was found: every curve looked healthy." if not events else "Click an entry to open the run there.",
        size="xs",
        c="dimmed",
        mb=6,
    )
    return [
        hint,
        dmc.ScrollArea(dmc.Timeline(items, active=len(items) - 1, bulletSize=14, lineWidth=2), mah=640, type="auto"),
    ]


def notes_list(notes: list[dict[str, Any]], run_id: str) -> Any:
    if not notes:
        return dmc.Text(
            "No notes. Add them on the run page: select a range on a chart and write what happened.",
            size="xs",
            c="dimmed",
        )
    items = []
    for n in sorted(
        notes, key=lambda n: (n.get("start_step") is None, n.get("start_step") or 0, n.get("created_at") or "")
    ):
        where = _steps(n.get("start_step"), n.get("end_step"))
        items.append(
            dmc.Paper(
                [
                    dmc.Text(n.get("text"), size="sm", className="note-text"),
                    dmc.Group(
                        [
                            dmc.Text(n.get("author"), size="xs", c="dimmed"),
                            dmc.Anchor(
                                where + (f" · {n['metric']}" if n.get("metric") else ""),
                                size="xs",
                                href=zoom_href(run_id, n, n.get("metric")),
                            ),
                        ],
                        gap=6,
                    ),
                ],
                p="xs",
                withBorder=True,
                radius="sm",
                className="note-item",
            )
        )
    return dmc.Stack(items, gap=6)


def config_block(config: dict[str, Any] | None) -> Any:
    if not config:
        return dmc.Text("No config was logged (pass config= to holter.init).", size="xs", c="dimmed")
    return dmc.Code(
        json.dumps(config, indent=2, sort_keys=True, default=str),
        block=True,
        style={"maxHeight": 320, "overflow": "auto", "fontSize": 11},
    )


def drift_list(comparison: dict[str, Any]) -> Any:
    drifts = comparison.get("drifts") or []
    if not drifts:
        return dmc.Text("The run stays inside the reference's band.", size="sm", c="teal", className="no-drift")
    return dmc.Stack(
        [
            dmc.Anchor(
                drift_sentence(comparison["metric"], d),
                size="sm",
                className="drift-item",
                href=zoom_href(comparison["run_id"], d, comparison["metric"]),
            )
            for d in drifts
        ],
        gap=2,
    )


# ---------------------------------------------------------------------------------- callbacks


def register(app: Dash, api: HolterAPI) -> None:
    @app.callback(
        Output("pm-header", "children"),
        Output("pm-summary", "children"),
        Output("pm-timeline", "children"),
        Output("pm-notes", "children"),
        Output("pm-config", "children"),
        Output("pm-data", "data"),
        Output("pm-ref-metric", "data"),
        Output("pm-ref-metric", "value"),
        Output("pm-make-ref", "disabled"),
        Input("pm-run-id", "data"),
        State("pm-wanted-metric", "data"),
    )
    async def load(run_id: str, wanted: str | None) -> tuple:
        try:
            review, vocab = await asyncio.gather(api.postmortem(run_id), api.vocabulary())
        except ApiError as exc:
            text = f"There is no run {run_id!r}." if exc.status == 404 else exc.message
            return (error_alert(text, "Cannot review this run"), None, None, None, None, None, [], None, True)
        run = review["run"]
        summary = dmc.Paper(
            [
                dmc.Text("What happened", size="xs", c="dimmed", fw=600, tt="uppercase"),
                dmc.Text(review.get("summary") or "", size="md", id="pm-summary-text", mt=4),
            ],
            p="md",
            withBorder=True,
            radius="md",
            bg="white",
            style={"borderLeft": "4px solid var(--mantine-color-indigo-5)"},
        )
        names = sorted(m["name"] for m in run.get("metrics") or [])
        data = {"run": run, "timeline": review.get("timeline") or [], "annotations": review.get("annotations") or []}
        return (
            header(run, api.browser_url(f"/runs/{run['id']}/report.html"), vocab),
            summary,
            timeline(run, data["timeline"], vocab),
            notes_list(data["annotations"], run["id"]),
            config_block(run.get("config")),
            data,
            names,
            wanted if wanted in names else default_reference_metric(run.get("metrics") or [], vocab),
            False,
        )

    @app.callback(
        Output("pm-charts", "children"),
        Input("pm-data", "data"),
        prevent_initial_call=True,
    )
    async def curves(data: dict | None) -> Any:
        if not data:
            return None
        run = data["run"]
        vocab = await api.vocabulary()
        panels = plan_panels(run.get("metrics") or [], vocab)
        if not panels:
            return empty_state("No metrics were logged")
        view = View()
        series, errors = await load_series(api, run["id"], [m for p in panels for m in p.metrics], view)
        graphs = []
        for panel in panels:
            figure, _ = panel_figure(panel, series, data["timeline"], data["annotations"], view, vocab=vocab)
            graphs.append(
                dmc.Paper(
                    dcc.Graph(figure=figure, config=GRAPH_CONFIG, className=f"panel panel-{panel.kind}"),
                    withBorder=True,
                    radius="md",
                    p=4,
                    className="chart-card",
                )
            )
        body: list[Any] = [error_alert("; ".join(errors), "Some series could not be read")] if errors else []
        body.append(dmc.SimpleGrid(graphs, cols={"base": 1, "xl": 2 if len(graphs) > 1 else 1}, spacing="sm"))
        return body

    @app.callback(
        Output("pm-reference", "children"),
        Input("pm-ref-metric", "value"),
        Input("pm-ref-version", "data"),
        State("pm-data", "data"),
        prevent_initial_call=True,
    )
    async def reference(metric: str | None, _version: int, data: dict | None) -> Any:
        if not data:
            return None
        run = data["run"]
        if not metric:
            return empty_state("No metric to compare")
        try:
            comparison = await api.compare_to_reference(run["id"], metric)
        except ApiError as exc:
            if exc.status == 404 and "no reference" in exc.message and await _is_reference(api, run):
                # a reference is never compared with itself by default: show its own band
                try:
                    comparison = await api.compare_to_reference(run["id"], metric, reference=run["id"])
                except ApiError as again:
                    return error_alert(again.message, "Could not draw the reference band")
            elif exc.status == 404 and "no reference" in exc.message:
                return empty_state(
                    f"Project {run['project']} has no reference run",
                    "Open a run that went well and press “Make this the project's reference”; every run of the "
                    "project is then compared against its band, and drifting away from it becomes an event.",
                )
            elif exc.status == 404:
                return empty_state("Nothing to compare", exc.message)
            else:
                return error_alert(exc.message, "Could not compare with the reference")
        reference_id = comparison["reference_id"]
        figure = reference_figure(comparison, run_label=run.get("name") or run["id"])
        about = (
            dmc.Text(
                "This run is the project's reference: other runs are compared against its band.",
                size="sm",
                className="is-reference",
            )
            if reference_id == run["id"]
            else dmc.Group(
                [
                    dmc.Text("Reference:", size="sm", c="dimmed"),
                    dmc.Anchor(reference_id, href=f"/runs/{reference_id}/postmortem", size="sm", ff="monospace"),
                ],
                gap=6,
            )
        )
        parts: list[Any] = [
            about,
            dmc.Paper(
                dcc.Graph(id="pm-ref-graph", figure=figure, config={"displaylogo": False}),
                withBorder=True,
                radius="md",
                p=4,
                mt=6,
            ),
        ]
        if reference_id != run["id"]:
            parts.append(drift_list(comparison))
        return parts

    @app.callback(
        Output("pm-ref-message", "children"),
        Output("pm-ref-version", "data"),
        Input("pm-make-ref", "n_clicks"),
        State("pm-data", "data"),
        State("pm-ref-version", "data"),
        prevent_initial_call=True,
    )
    async def make_reference(n_clicks: int | None, data: dict | None, version: int) -> tuple:
        if not n_clicks or not data:
            return no_update, no_update
        run = data["run"]
        try:
            await api.set_reference(run["project"], run["id"], by=await api.signature())
        except ApiError as exc:
            return dmc.Text(exc.message, size="xs", c="red", mt=4), no_update
        return (
            dmc.Text(
                f"{run.get('name') or run['id']} is now the reference of project {run['project']}.",
                size="xs",
                c="teal",
                mt=4,
                className="reference-set",
            ),
            (version or 0) + 1,
        )


async def _is_reference(api: HolterAPI, run: dict[str, Any]) -> bool:
    try:
        references = await api.references(run["project"])
    except ApiError:
        return False
    return any(r.get("run_id") == run["id"] for r in references)
