"""Compare page: several metrics across runs (a chart each, runs by name in the legends),
aligned by step, with their events and, against a reference run, the service's band and each
run's drifts from it (`GET /runs/{id}/compare`); and the first two runs as arms of an ablation
(each a run or its seed group), drawn with the seed bands and judged by the service
(`GET /api/v1/compare`) per metric: the verdict with its interval, what the seeds could detect,
the config diff and the confounders (laid out in `ablation.py`). Each term says what it means
where it appears."""

from __future__ import annotations

import asyncio
from typing import Any

import dash_mantine_components as dmc
from dash import Dash, Input, Output, State, dcc, html, no_update
from holter_charts.compare import compare_figure, seed_band_figure
from holter_charts.series import Series, View

from holter_dashboard.api import ApiError, HolterAPI, optional
from holter_dashboard.components import empty_state, error_alert
from holter_dashboard.pages.ablation import suffixed, verdict_card

MAX_POINTS = 2000
MAX_METRICS = 4  # charts on the page at once

# One line each, shown where the term appears.
EXPLAIN_ARMS = (
    "Arm A and arm B are the first two runs chosen: each alone (the run) or with its seed group. The service "
    "tests whether B differs from A (a t-test on one value per seed) and gives the difference with its 95% "
    "confidence interval, or says what these seeds could not detect."
)
EXPLAIN_SEED_GROUP = "Seed group: the runs whose configs differ from this one's only in their seed keys."
EXPLAIN_BAND = (
    "Grey band: the reference run's curve, smoothed, widened by 4 robust standard deviations of its own "
    "step-to-step scatter; "
    "a strip of a run's colour along the bottom marks where it stayed outside the band (a drift)."
)
EXPLAIN_SEED_BANDS = (
    "Each arm: its median (line), the median ± robust spread of its seeds (dark), their min–max (light). "
    "The bands show how the seeds scatter; the verdict comes from the test below, not from whether they overlap."
)


ARM_KINDS = [{"value": "run", "label": "the run"}, {"value": "group", "label": "its seed group"}]


def layout(
    runs: str | None = None,
    metric: str | None = None,
    ref: str | None = None,
    smooth: Any = None,
    a: str | None = None,
    b: str | None = None,
    **_: Any,
) -> html.Div:
    chosen = [r for r in (runs or "").split(",") if r]
    metrics = [m for m in (metric or "").split(",") if m][:MAX_METRICS]
    try:
        smoothing = min(max(float(smooth), 0.0), 0.99) if smooth not in (None, "") else 0.6
    except ValueError:
        smoothing = 0.6
    controls = dmc.Group(
        [
            dmc.MultiSelect(
                id="cmp-runs",
                label="Runs",
                value=chosen,
                data=[{"value": r, "label": r} for r in chosen],
                searchable=True,
                clearable=True,
                w=420,
                size="xs",
            ),
            dmc.MultiSelect(
                id="cmp-metrics",
                label="Metrics",
                value=metrics,
                data=metrics,
                searchable=True,
                maxValues=MAX_METRICS,
                w=320,
                size="xs",
            ),
            dmc.Select(
                id="cmp-ref",
                label="Reference run",
                value=ref,
                data=[{"value": r, "label": r} for r in chosen],
                clearable=True,
                placeholder="none",
                w=220,
                size="xs",
            ),
            dmc.Select(
                id="cmp-arm-a",
                label="Arm A (first run)",
                description="the run, or it with its seed group",
                value=a if a in ("run", "group") else "run",
                data=ARM_KINDS,
                w=150,
                size="xs",
                allowDeselect=False,
            ),
            dmc.Select(
                id="cmp-arm-b",
                label="Arm B (second run)",
                description="the run, or it with its seed group",
                value=b if b in ("run", "group") else "run",
                data=ARM_KINDS,
                w=150,
                size="xs",
                allowDeselect=False,
            ),
            dmc.Stack(
                [
                    dmc.Text("smoothing", size="xs"),
                    dmc.Slider(
                        id="cmp-smooth", min=0, max=0.99, step=0.01, value=smoothing, w=140, updatemode="mouseup"
                    ),
                ],
                gap=4,
            ),
        ],
        gap="md",
        align="flex-end",
    )
    return html.Div(
        [
            dmc.Title("Compare runs", order=2, mb="sm"),
            dmc.Card(
                [
                    controls,
                    dmc.Text(EXPLAIN_ARMS, size="xs", c="dimmed", mt=6, className="cmp-explain-arms"),
                    dmc.Text(EXPLAIN_SEED_GROUP, size="xs", c="dimmed", className="cmp-explain-seed-group"),
                ],
                padding="sm",
                mb="md",
            ),
            dcc.Loading(html.Div(id="cmp-body"), type="dot", delay_show=400),
            dcc.Interval(id="cmp-tick", interval=5000),
            dcc.Store(id="cmp-redraw"),
            html.Div(id="cmp-url-sink", hidden=True),
        ]
    )


def register(app: Dash, api: HolterAPI) -> None:
    @app.callback(
        Output("cmp-runs", "data"),
        Output("cmp-metrics", "data"),
        Output("cmp-metrics", "value"),
        Output("cmp-ref", "data"),
        Input("cmp-runs", "value"),
        State("cmp-metrics", "value"),
    )
    async def options(chosen: list[str] | None, wanted: list[str] | None) -> tuple:
        try:
            listing = await api.list_runs()
            details = await asyncio.gather(*(api.get_run(r) for r in chosen or []), return_exceptions=True)
        except ApiError:
            return no_update, no_update, no_update, no_update
        label = {r["id"]: f"{r.get('name') or r['id']} ({r['id']})" for r in listing["data"]}
        run_options = [{"value": r["id"], "label": label[r["id"]]} for r in listing["data"]]
        run_options += [{"value": r, "label": r} for r in chosen or [] if r not in label]
        kinds = {m["name"]: m.get("kind") for d in details if isinstance(d, dict) for m in d.get("metrics") or []}
        metrics: list[str] = sorted(kinds)
        kept = [m for m in wanted or [] if m in metrics]
        if not kept:
            # start on what the service reads as the training loss, else the first metric
            first = next((m for m in metrics if kinds[m] == "loss"), metrics[0] if metrics else None)
            kept = [first] if first else []
        refs = [{"value": r, "label": label.get(r, r)} for r in chosen or []]
        return run_options, metrics, kept if kept != (wanted or []) else no_update, refs

    @app.callback(
        Output("cmp-body", "children"),
        Input("cmp-runs", "value"),
        Input("cmp-metrics", "value"),
        Input("cmp-ref", "value"),
        Input("cmp-smooth", "value"),
        Input("cmp-arm-a", "value"),
        Input("cmp-arm-b", "value"),
        Input("cmp-redraw", "data"),
    )
    async def draw(
        chosen: list[str] | None,
        metrics: list[str] | None,
        ref: str | None,
        smoothing: float | None,
        arm_a: str | None,
        arm_b: str | None,
        _redraw: int | None,
    ) -> Any:
        if not chosen:
            return empty_state("Pick runs to compare", "Tick two or more runs on the runs page, or choose them above.")
        if not metrics:
            return empty_state("These runs have no metric in common yet")
        arms = (arm_a or "run", arm_b or "run")
        names = await run_names(api, chosen)
        sections = await asyncio.gather(
            *(
                metric_section(api, i, metric, chosen, names, ref, smoothing, arms)
                for i, metric in enumerate(metrics[:MAX_METRICS])
            )
        )
        return [part for section in sections for part in section]

    @app.callback(
        Output("cmp-redraw", "data"),
        Input("cmp-tick", "n_intervals"),
        State("cmp-runs", "value"),
        State("cmp-arm-a", "value"),
        State("cmp-arm-b", "value"),
        prevent_initial_call=True,
    )
    async def redraw_while_logging(
        n: int | None, chosen: list[str] | None, arm_a: str | None, arm_b: str | None
    ) -> Any:
        # Decided outside the loading veil around the body: a finished comparison is neither
        # recomputed nor hidden under the veil while a busy service answers the check.
        grouped = "group" in (arm_a, arm_b)
        if not chosen or not await still_logging(api, chosen, grouped=grouped):
            return no_update
        return n

    app.clientside_callback(
        """
        function(runs, metrics, ref, smooth, a, b) {
            if (window.location.pathname !== '/compare') return window.dash_clientside.no_update;
            const q = new URLSearchParams();
            if (runs && runs.length) q.set('runs', runs.join(','));
            if (metrics && metrics.length) q.set('metric', metrics.join(','));
            if (ref) q.set('ref', ref);
            if (smooth !== null && smooth !== undefined && smooth !== 0.6) q.set('smooth', smooth);
            if (a && a !== 'run') q.set('a', a);
            if (b && b !== 'run') q.set('b', b);
            const s = q.toString();
            setTimeout(() => window.history.replaceState(null, '', '/compare' + (s ? '?' + s : '')), 0);
            return window.dash_clientside.no_update;
        }
        """,
        Output("cmp-url-sink", "children"),
        Input("cmp-runs", "value"),
        Input("cmp-metrics", "value"),
        Input("cmp-ref", "value"),
        Input("cmp-smooth", "value"),
        Input("cmp-arm-a", "value"),
        Input("cmp-arm-b", "value"),
    )


async def still_logging(api: HolterAPI, run_ids: list[str], *, grouped: bool) -> bool:
    """Whether a chosen run is still logging, or, when an arm is a seed group, any run of their
    projects (a seed of the group may be): only then can a tick find something new to draw."""
    vocab = await api.vocabulary()
    reads = await asyncio.gather(*(api.get_run(r) for r in run_ids), return_exceptions=True)
    runs = [r for r in reads if isinstance(r, dict)]
    if len(runs) < len(run_ids) or any(vocab.is_live(r.get("status")) for r in runs):
        return True  # a run that could not be read: draw again, the page says what went wrong
    if not grouped:
        return False
    live = vocab.data.get("live_run_status")
    projects = {r.get("project") for r in runs}
    listings = await asyncio.gather(
        *(api.list_runs(project=p, status=live, limit=1) for p in projects), return_exceptions=True
    )
    return any(not isinstance(found, dict) or found.get("count") for found in listings)


async def run_names(api: HolterAPI, run_ids: list[str]) -> dict[str, str]:
    """What each run is called in the legends: its name, with its id when two runs share a name."""
    reads = await asyncio.gather(*(api.get_run(r) for r in run_ids), return_exceptions=True)
    names = {r: (read.get("name") if isinstance(read, dict) else None) or r for r, read in zip(run_ids, reads)}
    shared = {n for n in names.values() if list(names.values()).count(n) > 1}
    return {r: f"{n} ({r})" if n in shared and n != r else n for r, n in names.items()}


async def metric_section(
    api: HolterAPI,
    index: int,
    metric: str,
    chosen: list[str],
    names: dict[str, str],
    ref: str | None,
    smoothing: float | None,
    arms: tuple[str, str],
) -> list[Any]:
    """One metric across the runs: its chart (with the reference's band), and the arms' verdict."""
    reads = await asyncio.gather(
        *(api.points(r, metric, max_points=MAX_POINTS) for r in chosen), return_exceptions=True
    )
    runs: list[tuple[str, str, Series, list]] = []
    problems: list[str] = []
    for run_id, read in zip(chosen, reads):
        if isinstance(read, ApiError):
            problems.append(f"{names.get(run_id, run_id)}: {read.message}")
            continue
        if isinstance(read, BaseException):
            raise read
        events, _ = await optional(api.run_events(run_id, metric=metric), [])
        runs.append((run_id, names.get(run_id, run_id), Series.from_api(read), events))
    reference = ref if ref in chosen else None
    comparisons, band_problems = await against_reference(api, [r for r, *_ in runs], reference, metric)
    problems += band_problems
    vocab = await api.vocabulary()
    figure = compare_figure(
        metric,
        runs,
        reference=reference,
        view=View(smoothing=smoothing or 0.0),
        vocab=vocab,
        comparisons=comparisons,
    )
    figure["layout"]["uirevision"] = f"{','.join(chosen)}:{metric}:{ref}"
    body: list[Any] = [dmc.Title(metric, order=4, mt="md" if index else 0, mb=6, className="cmp-metric-title")]
    if problems:
        body.append(error_alert("; ".join(problems), "Some runs could not be read"))
    if len(chosen) >= 2:
        try:
            comparison = await api.compare_arms(metric, f"{arms[0]}:{chosen[0]}", f"{arms[1]}:{chosen[1]}")
        except ApiError as exc:
            body.append(error_alert(exc.message, "These arms could not be compared"))
        else:
            if "group" in arms:
                body.append(
                    dmc.Paper(
                        [
                            dcc.Graph(
                                id=suffixed("cmp-seed-graph", index),
                                figure=seed_band_figure(comparison),
                                config={"displaylogo": False},
                            ),
                            dmc.Text(EXPLAIN_SEED_BANDS, size="xs", c="dimmed", px="xs", pb=4),
                        ],
                        withBorder=True,
                        radius="md",
                        p=4,
                        mb="md",
                    )
                )
            body.append(verdict_card(comparison, vocab, index))
    chart: list[Any] = [dcc.Graph(id=suffixed("cmp-graph", index), figure=figure, config={"displaylogo": False})]
    if reference is not None:
        chart.append(dmc.Text(EXPLAIN_BAND, size="xs", c="dimmed", px="xs", pb=4, className="cmp-explain-band"))
    body.append(dmc.Paper(chart, withBorder=True, radius="md", p=4))
    return body


async def against_reference(
    api: HolterAPI, run_ids: list[str], reference: str | None, metric: str
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Each run's `metric` against the reference run as the service compares them (its band and
    the run's drifts out of it), by run id; and what could not be compared."""
    others = [r for r in run_ids if reference is not None and r != reference]
    answers = await asyncio.gather(
        *(api.compare_to_reference(r, metric, reference=reference) for r in others), return_exceptions=True
    )
    comparisons: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for run_id, answer in zip(others, answers):
        if isinstance(answer, ApiError):
            problems.append(f"{run_id} against the reference: {answer.message}")
        elif isinstance(answer, BaseException):
            raise answer
        else:
            comparisons[run_id] = answer
    return comparisons, problems
