"""Runs page: every run with status, health, last step, age and tags; filters, sort, compare."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import dash_mantine_components as dmc
from dash import ALL, Dash, Input, Output, State, dcc, html, no_update
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


def layout(
    project: str | None = None,
    status: str | None = None,
    tag: str | None = None,
    config: str | None = None,
    kind: str | None = None,
    sort: str | None = None,
    **_: Any,
) -> html.Div:
    """The runs page; its filters come from (and go back to) the URL's query string."""
    filters = dmc.Group(
        [
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
                value=sort if sort in SORTS else "updated",
                w=170,
                size="xs",
                data=[{"value": k, "label": v} for k, v in SORTS.items()],
            ),
        ],
        gap="sm",
        align="flex-end",
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
            dmc.Card(filters, padding="sm", mb="md"),
            html.Div(id="runs-table", children=dmc.Skeleton(h=200)),
            dcc.Interval(id="runs-tick", interval=3000),
            dcc.Store(id="runs-selected", data=[]),
            html.Div(id="runs-url-sink", hidden=True),
        ]
    )


def config_matches(config: dict[str, Any], expression: str) -> bool:
    """`key=value` (nested keys with dots) against a run's config; a bare word matches a key."""
    expression = expression.strip()
    if not expression:
        return True
    key, sep, wanted = expression.partition("=")
    node: Any = config
    for part in key.strip().split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return not sep or str(node).strip().lower() == wanted.strip().lower()


def sort_runs(runs: list[dict[str, Any]], sort: str, vocab: Vocabulary) -> list[dict[str, Any]]:
    if sort == "created":
        return sorted(runs, key=lambda r: r.get("created_at") or "", reverse=True)
    if sort == "health":
        return sorted(runs, key=lambda r: (vocab.health_rank(r.get("health")), -(r.get("open_events") or 0)))
    if sort == "name":
        return sorted(runs, key=lambda r: (r.get("name") or r["id"]).lower())
    if sort == "step":
        return sorted(runs, key=lambda r: r.get("last_step") or -1, reverse=True)
    return sorted(runs, key=lambda r: r.get("updated_at") or r.get("heartbeat_at") or "", reverse=True)


def runs_table(runs: list[dict[str, Any]], vocab: Vocabulary, selected: set[str] = frozenset()) -> dmc.Card:
    head = dmc.TableThead(
        dmc.TableTr([dmc.TableTh(h) for h in ("", "Run", "Project", "Status", "Health", "Last step", "Active", "Tags")])
    )
    rows = []
    for r in runs:
        tags = dmc.Group([dmc.Badge(t, variant="outline", size="xs", color="gray") for t in r.get("tags") or []], gap=4)
        rows.append(
            dmc.TableTr(
                [
                    dmc.TableTd(
                        dmc.Checkbox(id={"type": "run-select", "run": r["id"]}, size="xs", checked=r["id"] in selected)
                    ),
                    dmc.TableTd(
                        dmc.Stack(
                            [
                                link(r.get("name") or r["id"], f"/runs/{r['id']}", fw=600, className="run-link"),
                                dmc.Text(r["id"], size="xs", c="dimmed", ff="monospace"),
                            ],
                            gap=0,
                        )
                    ),
                    dmc.TableTd(r.get("project")),
                    dmc.TableTd(status_badge(r.get("status"), vocab)),
                    dmc.TableTd(health_badge(r.get("health"), vocab, r.get("open_events"))),
                    dmc.TableTd(
                        f"{r['last_step']:,}" if r.get("last_step") is not None else "—",
                        style={"fontVariantNumeric": "tabular-nums"},
                    ),
                    dmc.TableTd(age(r.get("heartbeat_at") or r.get("updated_at"))),
                    dmc.TableTd(tags),
                ],
                className="run-row",
            )
        )
    return dmc.Card(
        dmc.Table([head, dmc.TableTbody(rows)], highlightOnHover=True, verticalSpacing="xs", fz="sm"), padding=0
    )


def register(app: Dash, api: HolterAPI) -> None:
    @app.callback(
        Output("runs-table", "children"),
        Output("runs-project", "data"),
        Output("runs-status", "data"),
        Output("runs-kind", "data"),
        Input("runs-tick", "n_intervals"),
        Input("runs-project", "value"),
        Input("runs-status", "value"),
        Input("runs-tag", "value"),
        Input("runs-config", "value"),
        Input("runs-kind", "value"),
        Input("runs-sort", "value"),
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
        selected: list[str] | None,
    ) -> tuple[Any, list[str], Any, Any]:
        try:
            vocab = await api.vocabulary()
            everything = await api.list_runs()
            page = await api.list_runs(project=project, status=status, tag=tag or None)
        except ApiError as exc:
            return error_alert(exc.message, "Could not list runs"), [], no_update, no_update
        statuses = vocab.run_status_names
        kinds = [{"value": k["name"], "label": k["label"]} for k in vocab.event_kinds]
        projects = sorted({r["project"] for r in everything["data"]})
        if not everything["data"]:
            return (
                empty_state("No runs yet", "Start a demo run and watch it arrive here:", "holter demo"),
                projects,
                statuses,
                kinds,
            )
        runs = page["data"]
        # filters the service may not know yet (or at all) are applied here as well
        if status:
            runs = [r for r in runs if r.get("status") == status]
        if tag:
            runs = [r for r in runs if tag in (r.get("tags") or [])]
        if config:
            runs = [r for r in runs if config_matches(r.get("config") or {}, config)]
        notice = None
        if kind:
            events, problem = await optional(api.events(kind=kind, status="open"), None)
            if events is None:
                notice = error_alert(
                    problem or "this service does not report events yet", "Cannot filter by event kind"
                )
            else:
                with_kind = {e["run_id"] for e in events}
                runs = [r for r in runs if r["id"] in with_kind]
        if not runs:
            body: Any = empty_state("No run matches these filters", "Clear a filter to see more runs.")
        else:
            body = runs_table(sort_runs(runs, sort or "updated", vocab), vocab, set(selected or []))
        count = dmc.Text(f"{len(runs)} of {everything['count']} runs", size="xs", c="dimmed", mb=4)
        return [x for x in (notice, count, body) if x is not None], projects, statuses, kinds

    @app.callback(
        Output("runs-compare", "disabled"),
        Output("runs-compare-link", "href"),
        Output("runs-selected", "data"),
        Output("runs-levers", "disabled"),
        Output("runs-levers-link", "href"),
        Input({"type": "run-select", "run": ALL}, "checked"),
        State({"type": "run-select", "run": ALL}, "id"),
    )
    def selection(checked: list[bool | None], ids: list[dict[str, str]]) -> tuple[bool, str, list[str], bool, str]:
        chosen = [i["run"] for c, i in zip(checked, ids) if c]
        query = urlencode({"runs": ",".join(chosen)})
        return len(chosen) < 2, "/compare?" + query, chosen, len(chosen) < 2, "/levers?" + query

    # The URL keeps the filters, so a filtered view can be shared (history.replaceState: no reload)
    app.clientside_callback(
        """
        function(project, status, tag, config, kind, sort) {
            const q = new URLSearchParams();
            const put = (k, v) => { if (v) q.set(k, v); };
            put('project', project); put('status', status); put('tag', tag); put('config', config); put('kind', kind);
            if (sort && sort !== 'updated') q.set('sort', sort);
            const s = q.toString();
            if (window.location.pathname === '/') setTimeout(() => window.history.replaceState(null, '', s ? '/?' + s : '/'), 0);
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
    )
