"""Runs page: every run with status, health, last step, age and tags, a sparkline of its loss,
and the metric (last, best) and config columns the reader chose; a search over every run's names,
tags and config (the service's `q`); filters; sort by any column; the whole view kept in the URL
so it can be shared."""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import quote, urlencode

import dash_mantine_components as dmc
from dash import Dash, Input, Output, State, dcc, html, no_update
from holter_charts.style import visible
from holter_charts.vocabulary import Vocabulary

from holter_dashboard.api import ApiError, HolterAPI, optional
from holter_dashboard.components import age, empty_state, error_alert, health_badge, link, status_badge

SORTS = {
    "updated": "last activity",
    "created": "newest",
    "health": "worst health first",
    "name": "name",
    "step": "most steps",
}
SPARK_KIND = "loss"  # each run's sparkline: its first metric the service reads as a training loss
MAX_COLUMNS = 8  # metric columns a view may hold (each is a read per run)
MAX_CONFIG_COLUMNS = 20  # config columns a view may hold (the service sends those keys alone)
MAX_CONFIG_KEY_OPTIONS = 100  # config keys offered at a time: typing narrows them
# Rows drawn at a time: Dash's renderer takes time quadratic in a layout's components (on a busy
# 2-core box, 50 rows are drawn in ~2 s, 200 in ~27 s, during which the tab refreshes no more).
ROWS_PER_PAGE = 50


def split_list(value: str | None) -> list[str]:
    return [v for v in (value or "").split(",") if v]


def layout(
    project: str | None = None,
    status: str | None = None,
    tag: str | None = None,
    config: str | None = None,
    kind: str | None = None,
    sort: str | None = None,
    q: str | None = None,
    cols: str | None = None,
    ccols: str | None = None,
    asc: str | None = None,
    archived: str | None = None,
    page: str | None = None,
    **_: Any,
) -> html.Div:
    """The runs page; its filters, columns and sort come from (and go back to) the URL's query string."""
    metric_columns, config_columns = split_list(cols)[:MAX_COLUMNS], split_list(ccols)
    filters = dmc.Group(
        [
            dmc.TextInput(
                id="runs-q",
                label="Search",
                placeholder="name, tag or config (lr=3e-4)",
                value=q or "",
                w=220,
                size="xs",
                debounce=300,
            ),
            dmc.Select(
                id="runs-project",
                label="Project",
                placeholder="all",
                data=[project] if project else [],
                value=project,
                clearable=True,
                searchable=True,
                w=180,
                size="xs",
            ),
            # the statuses and event kinds to choose from are the service's vocabulary's (filled in by `refresh`)
            dmc.Select(
                id="runs-status",
                label="Status",
                placeholder="any",
                value=status,
                clearable=True,
                w=130,
                size="xs",
                data=[status] if status else [],
            ),
            dmc.TextInput(
                id="runs-tag", label="Tag", placeholder="e.g. demo", value=tag or "", w=130, size="xs", debounce=400
            ),
            dmc.TextInput(
                id="runs-config",
                label="Config",
                placeholder="key=value",
                value=config or "",
                w=160,
                size="xs",
                debounce=400,
            ),
            dmc.Select(
                id="runs-kind",
                label="Open event",
                placeholder="any kind",
                value=kind,
                clearable=True,
                w=190,
                size="xs",
                data=[kind] if kind else [],
            ),
            dmc.Select(
                id="runs-sort",
                label="Sort by",
                value=sort or "updated",
                w=170,
                size="xs",
                data=sort_options(metric_columns, config_columns, sort),
                allowDeselect=False,
            ),
            dmc.Switch(id="runs-asc", label="ascending", checked=asc == "1", size="xs", mb=6),
            dmc.Switch(id="runs-archived", label="archived too", checked=archived == "1", size="xs", mb=6),
        ],
        gap="sm",
        align="flex-end",
    )
    columns = dmc.Group(
        [
            dmc.TagsInput(
                id="runs-cols",
                label="Metric columns (last · best)",
                placeholder="add a metric",
                value=metric_columns,
                data=metric_columns,
                maxTags=MAX_COLUMNS,
                w=360,
                size="xs",
                clearable=True,
            ),
            dmc.TagsInput(
                id="runs-ccols",
                label="Config columns",
                placeholder="add a config key (optimizer.lr)",
                value=config_columns,
                data=config_columns,
                w=360,
                size="xs",
                clearable=True,
            ),
        ],
        gap="sm",
        align="flex-end",
        mt="xs",
    )
    return html.Div(
        [
            dmc.Group(
                [
                    dmc.Title("Runs", order=2),
                    dmc.Group(
                        [
                            dmc.Anchor(
                                dmc.Button("Find levers", id="runs-levers", size="xs", disabled=True, variant="subtle"),
                                id="runs-levers-link",
                                href="/levers",
                            ),
                            dmc.Anchor(
                                dmc.Button(
                                    "Compare selected", id="runs-compare", size="xs", disabled=True, variant="light"
                                ),
                                id="runs-compare-link",
                                href="/compare",
                            ),
                        ],
                        gap="xs",
                    ),
                ],
                justify="space-between",
                mb="sm",
            ),
            dmc.Card([filters, columns], padding="sm", mb="md"),
            html.Div(id="runs-table", children=dmc.Skeleton(h=200)),
            dmc.Pagination(id="runs-pager", total=1, value=max(1, int(page)) if (page or "").isdigit() else 1, mt="sm"),
            dcc.Interval(id="runs-tick", interval=3000),
            dcc.Store(id="runs-selected", data=[]),
            html.Div(id="runs-url-sink", hidden=True),
        ]
    )


def flat_config(config: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config as dotted keys: {"optimizer": {"lr": 3e-4}} -> {"optimizer.lr": 3e-4}."""
    if not isinstance(config, dict):
        return {prefix: config} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            out.update(flat_config(value, name))
        else:
            out[name] = value
    return out


def shown_value(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return value if isinstance(value, str) else json.dumps(value)


def runs_count(shown: range, listed: int, matching: int, total: int) -> Any:
    """'12 of 40 runs'; one page of those listed: '51–100 of 120 · 2,000 runs'; and where the
    service matched more than it listed (or an event-kind filter kept fewer), how many matched."""
    if len(shown) == listed == matching:
        text = f"{listed:,} of {total:,} runs"
    else:
        text = f"{shown.start + 1:,}–{shown.stop:,} of {listed:,}" if len(shown) < listed else f"{listed:,} shown"
        text += f" · {matching:,} match" if matching != listed else ""
        text += f" · {total:,} runs"
    return dmc.Text(text, size="xs", c="dimmed", mb=4, className="runs-count")


def page_of(count: int, page: int | None) -> range:
    """The rows of page `page` (from 1, clamped to the last) of `count` rows, ROWS_PER_PAGE a page."""
    pages = max(1, math.ceil(count / ROWS_PER_PAGE))
    first = (min(max(page or 1, 1), pages) - 1) * ROWS_PER_PAGE
    return range(first, min(first + ROWS_PER_PAGE, count))


def sort_options(metrics: list[str], config_keys: list[str], current: str | None = None) -> list[dict[str, str]]:
    options = [{"value": k, "label": v} for k, v in SORTS.items()]
    for m in metrics:
        options += [{"value": f"best:{m}", "label": f"{m} (best)"}, {"value": f"last:{m}", "label": f"{m} (last)"}]
    options += [{"value": f"config:{k}", "label": f"config {k}"} for k in config_keys]
    if current and current not in {o["value"] for o in options}:
        options.append({"value": current, "label": current})
    return options


def sort_runs(
    runs: list[dict[str, Any]], sort: str, vocab: Vocabulary, ascending: bool = False
) -> list[dict[str, Any]]:
    """Runs in the order chosen; a run without the value sorted on goes last either way."""
    if sort == "health":
        ordered = sorted(runs, key=lambda r: (vocab.health_rank(r.get("health")), -(r.get("open_events") or 0)))
        return ordered[::-1] if ascending else ordered
    if sort == "name":
        ordered = sorted(runs, key=lambda r: (r.get("name") or r["id"]).lower())
        return ordered[::-1] if ascending else ordered

    def value(run: dict[str, Any]) -> Any:
        if sort == "created":
            return run.get("created_at")
        if sort == "step":
            return run.get("last_step")
        if sort.startswith(("best:", "last:")):
            which, metric = sort.split(":", 1)
            return ((run.get("columns") or {}).get(metric) or {}).get(which)
        if sort.startswith("config:"):
            found = flat_config(run.get("config") or {}).get(sort.split(":", 1)[1])
            return found if isinstance(found, (int, float)) and not isinstance(found, bool) else None
        return run.get("updated_at") or run.get("heartbeat_at")

    present = [r for r in runs if value(r) is not None]
    missing = [r for r in runs if value(r) is None]
    return sorted(present, key=value, reverse=not ascending) + missing


def sparkline(values: list[float | None], width: int = 96, height: int = 22, color: str = "#1c7ed6") -> str | None:
    """A run's curve as a small SVG (a data URI for an <img>): no script, nothing fetched."""
    finite = [(i, v) for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    if len(finite) < 2:
        return None
    low, high = min(v for _, v in finite), max(v for _, v in finite)
    span, last = (high - low) or 1.0, max(len(values) - 1, 1)
    points = " ".join(
        f"{i / last * (width - 2) + 1:.1f},{(1 - (v - low) / span) * (height - 4) + 2:.1f}" for i, v in finite
    )
    svg = (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}'>"
        f"<polyline fill='none' stroke='{color}' stroke-width='1.4' points='{points}'/></svg>"
    )
    return "data:image/svg+xml," + quote(svg)


def runs_table(
    runs: list[dict[str, Any]],
    vocab: Vocabulary,
    selected: set[str] = frozenset(),
    metrics: list[str] = (),  # type: ignore[assignment]
    config_keys: list[str] = (),  # type: ignore[assignment]
) -> dmc.Card:
    heads = ["", "Run", "Project", "Status", "Health", SPARK_KIND.capitalize(), "Last step", "Active", "Tags"]
    head = dmc.TableThead(
        dmc.TableTr(
            [dmc.TableTh(h) for h in heads]
            + [
                dmc.TableTh(
                    dmc.Stack([dmc.Text(m, size="xs", fw=700), dmc.Text("last · best", size="xs", c="dimmed")], gap=0)
                )
                for m in metrics
            ]
            + [dmc.TableTh(dmc.Text(k, size="xs", fw=700, ff="monospace")) for k in config_keys]
        )
    )
    rows = []
    for r in runs:
        tags = dmc.Group([dmc.Badge(t, variant="outline", size="xs", color="gray") for t in r.get("tags") or []], gap=4)
        spark = r.get("sparkline") or {}
        picture = sparkline(spark.get("values") or [])
        config = flat_config(r.get("config") or {})
        cells = [
            dmc.TableTd(dmc.Checkbox(value=r["id"], size="xs", className="run-select")),
            dmc.TableTd(
                dmc.Stack(
                    [
                        link(visible(r.get("name") or r["id"]), f"/runs/{r['id']}", fw=600, className="run-link"),
                        dmc.Text(r["id"], size="xs", c="dimmed", ff="monospace"),
                    ],
                    gap=0,
                )
            ),
            dmc.TableTd(r.get("project")),
            dmc.TableTd(status_badge(r.get("status"), vocab)),
            dmc.TableTd(health_badge(r.get("health"), vocab, r.get("open_events"), r.get("problems"))),
            dmc.TableTd(
                html.Img(src=picture, title=f"{spark.get('metric')} over the run", className="run-sparkline")
                if picture
                else dmc.Text("—", c="dimmed", size="xs")
            ),
            dmc.TableTd(
                f"{r['last_step']:,}" if r.get("last_step") is not None else "—",
                style={"fontVariantNumeric": "tabular-nums"},
            ),
            dmc.TableTd(age(r.get("heartbeat_at") or r.get("updated_at"))),
            dmc.TableTd(tags),
        ]
        for m in metrics:
            column = (r.get("columns") or {}).get(m)
            best_at = column.get("best_step") if column else None
            cells.append(
                dmc.TableTd(
                    html.Span(
                        f"{shown_value(column['last'])} · {shown_value(column['best'])}" if column else "—",
                        title=f"best at step {best_at:,}" if best_at is not None else "",
                        className="metric-cell",
                        style={"fontFamily": "monospace", "fontSize": 12},
                    ),
                    style={"whiteSpace": "nowrap"},
                )
            )
        cells += [
            dmc.TableTd(dmc.Text(shown_value(config.get(k)), size="xs", ff="monospace", className="config-cell"))
            for k in config_keys
        ]
        rows.append(dmc.TableTr(cells, className="run-row"))
    # One group holds every row's checkbox: 200 rows of pattern-matching ids
    # ({"type": "run-select", "run": ALL}) kept the browser rebuilding Dash's callback graph for
    # ~16 s after each refresh of the table, and the page refreshed no more.
    return dmc.Card(
        dmc.CheckboxGroup(
            dmc.TableScrollContainer(
                dmc.Table([head, dmc.TableTbody(rows)], highlightOnHover=True, verticalSpacing="xs", fz="sm"),
                minWidth=900,
            ),
            id="runs-checked",
            value=sorted(selected & {r["id"] for r in runs}),
        ),
        padding=0,
    )


def register(app: Dash, api: HolterAPI) -> None:
    @app.callback(
        Output("runs-table", "children"),
        Output("runs-project", "data"),
        Output("runs-status", "data"),
        Output("runs-kind", "data"),
        Output("runs-cols", "data"),
        Output("runs-sort", "data"),
        Output("runs-pager", "total"),
        Input("runs-tick", "n_intervals"),
        Input("runs-project", "value"),
        Input("runs-status", "value"),
        Input("runs-tag", "value"),
        Input("runs-config", "value"),
        Input("runs-kind", "value"),
        Input("runs-sort", "value"),
        Input("runs-q", "value"),
        Input("runs-cols", "value"),
        Input("runs-ccols", "value"),
        Input("runs-asc", "checked"),
        Input("runs-archived", "checked"),
        Input("runs-pager", "value"),
        State("runs-selected", "data"),
    )
    async def refresh(
        _n: int | None,
        project: str | None,
        status: str | None,
        tag: str | None,
        config: str | None,
        kind: str | None,
        sort: str | None,
        query: str | None,
        metrics: list[str] | None,
        config_keys: list[str] | None,
        ascending: bool | None,
        archived: bool | None,
        page_number: int | None,
        selected: list[str] | None,
    ) -> tuple[Any, ...]:
        metrics, config_keys = (metrics or [])[:MAX_COLUMNS], (config_keys or [])[:MAX_CONFIG_COLUMNS]
        keep = (no_update,) * 3
        try:
            vocab = await api.vocabulary()
            projects = await api.projects()
            # The service searches every run (not a recent page) and sends each run's values at the
            # config columns shown, never its whole config: 200 runs of 10,000 keys each are a few
            # kilobytes here, not gigabytes.
            page = await api.list_runs(
                project=project,
                status=status,
                tag=tag or None,
                q=(query or "").strip() or None,
                config=(config or "").strip() or None,
                config_keys=config_keys or [""],  # an empty key: no config at all
                metric=metrics or None,
                sparkline_kind=SPARK_KIND,
                names="true",
                archived="include" if archived else None,
            )
        except ApiError as exc:
            return error_alert(exc.message, "Could not list runs"), [], no_update, no_update, *keep
        statuses = vocab.run_status_names
        kinds = [{"value": k["name"], "label": k["label"]} for k in vocab.event_kinds]
        names = [p["name"] for p in projects]
        if not projects:
            return (
                empty_state("No runs yet", "Start a demo run and watch it arrive here:", "holter demo"),
                names,
                statuses,
                kinds,
                *keep,
            )
        runs = page["data"]
        metric_names = sorted({*(page.get("metric_names") or []), *metrics})
        notice = None
        if kind:
            events, problem = await optional(api.events(kind=kind, status=vocab.open_event_status), None)
            if events is None:
                notice = error_alert(
                    problem or "this service does not report events yet", "Cannot filter by event kind"
                )
            else:
                with_kind = {e["run_id"] for e in events}
                runs = [r for r in runs if r["id"] in with_kind]
        shown = page_of(len(runs), page_number)
        if not runs:
            body: Any = empty_state("No run matches these filters", "Clear a filter or the search to see more runs.")
        else:
            ordered = sort_runs(runs, sort or "updated", vocab, ascending=bool(ascending))
            body = runs_table(ordered[shown.start : shown.stop], vocab, set(selected or []), metrics, config_keys)
        total = sum(p["runs"] for p in projects if not project or p["name"] == project)
        count = runs_count(shown, len(runs), page["count"] if not kind else len(runs), total)
        return (
            [x for x in (notice, count, body) if x is not None],
            names,
            statuses,
            kinds,
            metric_names,
            sort_options(metrics, config_keys, sort),
            max(1, math.ceil(len(runs) / ROWS_PER_PAGE)),
        )

    @app.callback(
        Output("runs-pager", "value"),
        Input("runs-project", "value"),
        Input("runs-status", "value"),
        Input("runs-tag", "value"),
        Input("runs-config", "value"),
        Input("runs-kind", "value"),
        Input("runs-q", "value"),
        Input("runs-archived", "checked"),
        prevent_initial_call=True,
    )
    def first_page(*_filters: Any) -> int:
        """Other filters, other runs: back to their first page."""
        return 1

    @app.callback(
        Output("runs-ccols", "data"),
        Input("runs-ccols", "searchValue"),
        Input("runs-project", "value"),
        State("runs-ccols", "value"),
    )
    async def config_key_options(search: str | None, project: str | None, chosen: list[str] | None) -> list[str]:
        """The config columns to choose from: those chosen, and a bounded page of the project's
        keys holding what is typed (the service keeps them; no config is read to list them)."""
        found, _ = await optional(api.config_keys(project=project, contains=(search or "").strip() or None), None)
        offered = (found or {}).get("keys", [])[:MAX_CONFIG_KEY_OPTIONS]
        return list(dict.fromkeys([*(chosen or []), *offered]))

    @app.callback(
        Output("runs-compare", "disabled"),
        Output("runs-compare-link", "href"),
        Output("runs-selected", "data"),
        Output("runs-levers", "disabled"),
        Output("runs-levers-link", "href"),
        Input("runs-checked", "value"),
    )
    def selection(checked: list[str] | None) -> tuple[bool, str, list[str], bool, str]:
        chosen = list(checked or [])
        query = urlencode({"runs": ",".join(chosen)})
        return len(chosen) < 2, "/compare?" + query, chosen, len(chosen) < 2, "/levers?" + query

    # The URL keeps the filters, columns and sort, so a view can be shared (history.replaceState: no reload)
    app.clientside_callback(
        """
        function(project, status, tag, config, kind, sort, q, cols, ccols, asc, archived, page) {
            const query = new URLSearchParams();
            const put = (k, v) => { if (v) query.set(k, v); };
            put('project', project); put('status', status); put('tag', tag); put('config', config); put('kind', kind);
            put('q', q);
            if (cols && cols.length) query.set('cols', cols.join(','));
            if (ccols && ccols.length) query.set('ccols', ccols.join(','));
            if (sort && sort !== 'updated') query.set('sort', sort);
            if (asc) query.set('asc', '1');
            if (archived) query.set('archived', '1');
            if (page && page > 1) query.set('page', String(page));
            const s = query.toString();
            if (window.location.pathname === '/') {
                setTimeout(() => window.history.replaceState(null, '', s ? '/?' + s : '/'), 0);
            }
            return window.dash_clientside.no_update;
        }
        """,
        Output("runs-url-sink", "children"),
        Input("runs-project", "value"),
        Input("runs-status", "value"),
        Input("runs-tag", "value"),
        Input("runs-config", "value"),
        Input("runs-kind", "value"),
        Input("runs-sort", "value"),
        Input("runs-q", "value"),
        Input("runs-cols", "value"),
        Input("runs-ccols", "value"),
        Input("runs-asc", "checked"),
        Input("runs-archived", "checked"),
        Input("runs-pager", "value"),
    )
