"""The self-contained HTML report of a run: summary, annotated curves (interactive Plotly, with
plotly.js inlined so the file opens with no server and no network), timeline, notes, config.

Takes plain data in the API's shapes, returns the HTML text. Its charts are the dashboard's:
the same panels, event and note marks, NaN crosses and smoothing, drawn by `holter_charts`
(`panel_figure`) from what the post-mortem page reads, so a chart in the file is the chart on
the page. plotly is imported only here; the page around the charts is templates/report.html.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
from holter_charts.compare import seed_group_traces
from holter_charts.figures import panel_figure
from holter_charts.panels import plan_panels
from holter_charts.series import Series, View
from holter_charts.vocabulary import Vocabulary

from holter_server.vocabulary import severities


def render_report(
    *,
    run: dict[str, Any],
    summary: str,
    timeline: list[dict[str, Any]],
    annotations: list[dict[str, Any]],
    series: Mapping[str, tuple[Sequence[int], Sequence[float]]],
    vocabulary: Mapping[str, Any],
    max_drawn_events: int = 200,
    seed_group: dict[str, Any] | None = None,
) -> str:
    """The report as one HTML document. `run` is the run as `GET /runs/{id}` shows it (its
    `metrics` say which chart each goes on), `timeline` and `annotations` as the post-mortem
    route lists them, `vocabulary` as `GET /vocabulary` serves it; `series` holds the points drawn,
    by metric (values as floats, NaN and ±Inf included).
    At most `max_drawn_events` events are marked on the charts (the worst first); the timeline lists them all.
    `seed_group` (services.postmortem.seed_group_of: `sentences`, its `runs`, and `bands` by
    metric) draws each band behind the run's curve and fills the "Seed group" section; without
    it the section is left out."""
    import plotly.io as pio

    vocab = Vocabulary.from_api(vocabulary)
    drawn = sorted(timeline, key=lambda e: -vocab.severity_rank(e["severity"]))[:max_drawn_events]
    shown = {
        name: Series(steps=list(steps), values=[float(v) for v in values]) for name, (steps, values) in series.items()
    }
    bands = (seed_group or {}).get("bands") or {}
    view = View()
    charts = []
    for index, panel in enumerate(plan_panels([m for m in run.get("metrics") or [] if m["name"] in shown], vocab)):
        figure, _ = panel_figure(panel, shown, drawn, annotations, view, vocab=vocab)
        behind = [
            trace for metric in panel.metrics if metric in bands for trace in seed_group_traces(metric, bands[metric])
        ]
        figure["data"] = behind + figure["data"]  # drawn first, so behind the run's own curves
        charts.append(pio.to_html(figure, full_html=False, include_plotlyjs=index == 0, config={"displaylogo": False}))
    return _template().render(
        title=f"{run.get('name') or run['id']} — Holter post-mortem",
        run=run,
        summary=summary,
        charts=charts,
        timeline=timeline,
        annotations=annotations,
        seed_group=None
        if seed_group is None
        else {"runs": seed_group.get("runs") or [], "sentences": seed_group.get("sentences") or []},
        alarm_severities=[
            {"name": s.name, "color": s.color, "worst": s is severities.WORST} for s in severities.SEVERITIES if s.alarm
        ],
        config_json=json.dumps(run.get("config") or {}, indent=2, sort_keys=True),
    )


def _step_text(step: int | None) -> str:
    """A step as the report prints it ('12,000'); nothing for none."""
    return "" if step is None else f"{step:,}"


@functools.cache
def _template() -> jinja2.Template:
    """templates/report.html, every value HTML-escaped unless marked safe (the charts)."""
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("holter_server.postmortem", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
    )
    environment.filters["step"] = _step_text
    return environment.get_template("report.html")
