"""Levers page: which config keys change the *structure* of a failure across a set of runs.

Choose a project (and a tag), or arrive from the runs page with `?runs=a,b,c`; the service's
lever finder (`GET /levers`) ranks the candidates with their evidence, names the keys that move
together (the runs cannot tell those apart), and says so when there is no lever.
"""

from __future__ import annotations

from typing import Any

import dash_mantine_components as dmc
from dash import Dash, Input, Output, State, dcc, html, no_update
from holter_charts.vocabulary import Vocabulary

from holter_dashboard.api import ApiError, HolterAPI
from holter_dashboard.components import UNCLIPPED, empty_state, error_alert

FEATURES = {
    "presence": "whether it happens",
    "period": "its period",
    "first_step": "when it starts",
    "spike_spacing": "spike spacing",
    "count": "how often",
    "peak_score": "how bad",
}


def layout(project: str | None = None, tag: str | None = None, runs: str | None = None, **_: Any) -> html.Div:
    chosen = [r for r in (runs or "").split(",") if r]
    controls = dmc.Group(
        [
            dmc.Select(
                id="lev-project",
                label="Project",
                data=[project] if project else [],
                value=project,
                placeholder="choose",
                clearable=True,
                searchable=True,
                w=200,
                size="xs",
            ),
            dmc.TextInput(
                id="lev-tag", label="Tag", placeholder="any", value=tag or "", w=140, size="xs", debounce=400
            ),
            dmc.MultiSelect(
                id="lev-runs",
                label="Or these runs",
                value=chosen,
                data=[{"value": r, "label": r} for r in chosen],
                searchable=True,
                clearable=True,
                w=420,
                size="xs",
                placeholder="tick runs on the runs page",
            ),
            dmc.Button("Find levers", id="lev-go", size="xs"),
        ],
        gap="md",
        align="flex-end",
    )
    return html.Div(
        [
            dmc.Title("Levers", order=2),
            dmc.Text(
                "Config keys whose value changes the structure of a failure across runs (whether it happens, its "
                "period, "
                "when it starts), not just its size.",
                size="sm",
                c="dimmed",
                mb="sm",
            ),
            dmc.Card(controls, padding="sm", mb="md"),
            dcc.Loading(html.Div(id="lev-body"), type="dot", delay_show=300),
            html.Div(id="lev-url-sink", hidden=True),
        ]
    )


# ---------------------------------------------------------------------------------- views


def p_value_text(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}" if p < 0.1 else f"{p:.2f}"


def candidates_table(candidates: list[dict[str, Any]], vocab: Vocabulary) -> dmc.Card:
    head = dmc.TableThead(
        dmc.TableTr([dmc.TableTh(h) for h in ("#", "Key", "Failure", "Feature", "Relation", "Evidence", "p", "Runs")])
    )
    rows = []
    for rank, c in enumerate(candidates, 1):
        evidence: list[Any] = [dmc.Text(c.get("evidence"), size="sm", className="lever-evidence")]
        if c.get("confounded_with"):
            evidence.append(
                dmc.Text(
                    "moves together with " + ", ".join(c["confounded_with"]) + ": either could be the cause",
                    size="xs",
                    c="orange",
                )
            )
        rows.append(
            dmc.TableTr(
                [
                    dmc.TableTd(str(rank), style={"fontVariantNumeric": "tabular-nums"}),
                    dmc.TableTd(dmc.Code(c.get("key")), className="lever-key"),
                    dmc.TableTd(
                        dmc.Stack(
                            [
                                dmc.Text(c.get("metric"), size="xs", ff="monospace"),
                                dmc.Badge(vocab.event_kind_label(c.get("kind")), size="xs", variant="light"),
                            ],
                            gap=2,
                        )
                    ),
                    dmc.TableTd(FEATURES.get(c.get("feature"), c.get("feature"))),
                    dmc.TableTd(dmc.Badge(c.get("relation"), variant="outline", size="sm", styles=UNCLIPPED)),
                    dmc.TableTd(dmc.Stack(evidence, gap=2)),
                    dmc.TableTd(
                        p_value_text(float(c.get("p_value", 1.0))),
                        style={"fontVariantNumeric": "tabular-nums", "whiteSpace": "nowrap"},
                    ),
                    dmc.TableTd(str(c.get("runs"))),
                ],
                className="lever-row",
            )
        )
    return dmc.Card(
        dmc.Table([head, dmc.TableTbody(rows)], verticalSpacing="xs", fz="sm", highlightOnHover=True), padding=0
    )


def report_view(report: dict[str, Any], vocab: Vocabulary) -> list[Any]:
    varying = report.get("varying_keys") or []
    parts: list[Any] = [
        dmc.Text(
            f"{report.get('runs', 0)} run{'' if report.get('runs') == 1 else 's'} · config keys that vary: "
            + (", ".join(varying) if varying else "none"),
            size="sm",
            c="dimmed",
            mb=6,
            className="levers-scope",
        )
    ]
    for group in report.get("confounded") or []:
        parts.append(
            dmc.Alert(
                f"{' and '.join(group)} move together across these runs, so the runs cannot tell them apart. "
                "Vary one while holding the others to find out which matters.",
                title="Confounded keys",
                color="orange",
                variant="light",
                mb=6,
                className="levers-confounded",
            )
        )
    candidates = report.get("candidates") or []
    if not candidates:
        parts.append(
            dmc.Alert(
                report.get("note") or "No config key changes the structure of a failure across these runs.",
                title="No lever",
                color="gray",
                variant="light",
                className="levers-note",
            )
        )
        return parts
    parts.append(candidates_table(candidates, vocab))
    if report.get("note"):
        parts.append(dmc.Text(report["note"], size="xs", c="dimmed", mt=6, className="levers-note"))
    return parts


# ---------------------------------------------------------------------------------- callbacks


def register(app: Dash, api: HolterAPI) -> None:
    @app.callback(
        Output("lev-project", "data"),
        Output("lev-runs", "data"),
        Input("lev-runs", "value"),
        State("lev-project", "value"),
    )
    async def options(chosen: list[str] | None, project: str | None) -> tuple:
        try:
            listing = await api.list_runs()
        except ApiError:
            return no_update, no_update
        projects = sorted({r["project"] for r in listing["data"]} | ({project} if project else set()))
        label = {r["id"]: f"{r.get('name') or r['id']} ({r['id']})" for r in listing["data"]}
        run_options = [{"value": r["id"], "label": label[r["id"]]} for r in listing["data"]]
        run_options += [{"value": r, "label": r} for r in chosen or [] if r not in label]
        return projects, run_options

    @app.callback(
        Output("lev-body", "children"),
        Input("lev-go", "n_clicks"),
        Input("lev-project", "value"),
        Input("lev-tag", "value"),
        Input("lev-runs", "value"),
    )
    async def find(_n: int | None, project: str | None, tag: str | None, runs: list[str] | None) -> Any:
        if not (project or (tag or "").strip() or runs):
            return empty_state(
                "Choose the runs to examine",
                "Pick a project (and a tag), or tick runs on the runs page and press “Find levers”. "
                "Runs that differ in their config and share a failure say the most.",
            )
        try:
            report = await api.levers(
                project=None if runs else project,
                tag=None if runs else (tag or "").strip() or None,
                run_ids=runs or None,
            )
            vocab = await api.vocabulary()
        except ApiError as exc:
            return error_alert(exc.message, "Could not look for levers")
        if not report.get("runs"):
            return empty_state("No runs match", "Choose another project or tag.")
        return report_view(report, vocab)

    app.clientside_callback(
        """
        function(project, tag, runs) {
            if (window.location.pathname !== '/levers') return window.dash_clientside.no_update;
            const q = new URLSearchParams();
            if (runs && runs.length) q.set('runs', runs.join(','));
            else { if (project) q.set('project', project); if (tag) q.set('tag', tag); }
            const query = q.toString() ? '?' + q.toString() : '';
            setTimeout(() => window.history.replaceState(null, '', '/levers' + query), 0);
            return window.dash_clientside.no_update;
        }
        """,
        Output("lev-url-sink", "children"),
        Input("lev-project", "value"),
        Input("lev-tag", "value"),
        Input("lev-runs", "value"),
    )
