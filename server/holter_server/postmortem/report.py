"""The self-contained HTML report of a run: summary, annotated curves (interactive Plotly, with
plotly.js inlined so the file opens with no server and no network), timeline, notes, config.

Takes plain data in the API's shapes, returns the HTML text. Its charts are the dashboard's:
the same panels, event and note marks, NaN crosses and smoothing, drawn by `holter_charts`
(`panel_figure`) from what the post-mortem page reads, so a chart in the file is the chart on
the page. plotly is imported only here.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

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
    esc = html.escape

    def step_text(step: int | None) -> str:
        return "" if step is None else f"{step:,}"

    rows = (
        "".join(
            f"<tr class='{esc(e['severity'])}'><td>{step_text(e.get('start_step'))}</td><td>{esc(e['kind'])}</td>"
            f"<td>{esc(e.get('metric') or '—')}</td><td>{esc(e['severity'])}</td><td>{esc(e['summary'])}</td><td>{esc(e['status'])}</td></tr>"
            for e in timeline
        )
        or "<tr><td colspan='6'>No events.</td></tr>"
    )

    def note_text(a: dict[str, Any]) -> str:
        where = ""
        if a.get("start_step") is not None:
            where += f", steps {step_text(a['start_step'])}–{step_text(a.get('end_step') or a['start_step'])}"
        if a.get("metric"):
            where += f", {esc(a['metric'])}"
        return f"<li><b>{esc(a['author'])}</b> ({esc(str(a['created_at'])[:16])}{where}): {esc(a['text'])}</li>"

    notes = "".join(note_text(a) for a in annotations) or "<li>No notes.</li>"
    seeds_section = ""
    if seed_group is not None:
        said = "".join(f"<li>{esc(s)}</li>" for s in seed_group.get("sentences") or [])
        members = ", ".join(f"{esc(r.get('name') or r['id'])} ({esc(r['id'])})" for r in seed_group.get("runs") or [])
        runs_line = (
            (
                f"<p>The group (this run left out; same config, other seeds): {members}. Its median and min–max band are "
                "drawn behind this run's curves.</p>"
            )
            if members
            else ""
        )
        seeds_section = f"<h2>Seed group</h2>\n{runs_line}<ul class='seeds'>{said}</ul>\n"
    title = f"{run.get('name') or run['id']} — Holter post-mortem"
    notes_paragraph = f"<p>{esc(run['notes'])}</p>" if run.get("notes") else ""
    severity_css = " ".join(
        f"tr.{s.name} td:nth-child(4) {{ color: {s.color};{' font-weight: 600;' if s is severities.WORST else ''} }}"
        for s in severities.SEVERITIES
        if s.alarm
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>
body {{ font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 2rem auto; max-width: 1100px; color: #1d2939; }}
h1 {{ font-size: 1.6rem; margin-bottom: .2rem; }} .meta {{ color: #667085; margin-bottom: 1rem; }}
.summary {{ background: #f9fafb; border-left: 4px solid #7f56d9; padding: .8rem 1rem; font-size: 1.05rem; }}
table {{ border-collapse: collapse; width: 100%; font-size: .9rem; }} td, th {{ border-bottom: 1px solid #eaecf0; padding: .35rem .5rem; text-align: left; vertical-align: top; }}
{severity_css}
pre {{ background: #f9fafb; padding: .8rem; overflow-x: auto; }}
</style></head><body>
<h1>{esc(run.get("name") or run["id"])}</h1>
<div class="meta">project {esc(run["project"])} · run {esc(run["id"])} · {esc(run["status"])} · last step {step_text(run.get("last_step")) or "—"} · tags {esc(", ".join(run.get("tags") or []) or "—")}</div>
<p class="summary">{esc(summary)}</p>
<h2>Curves</h2>
{"".join(charts) or "<p>No metrics.</p>"}
{seeds_section}<h2>Timeline</h2>
<table><thead><tr><th>step</th><th>kind</th><th>metric</th><th>severity</th><th>what happened</th><th>status</th></tr></thead><tbody>{rows}</tbody></table>
<h2>Notes</h2><ul>{notes}</ul>
{notes_paragraph}
<h2>Config</h2><pre>{esc(json.dumps(run.get("config") or {}, indent=2, sort_keys=True))}</pre>
<p class="meta">Generated by Holter.</p>
</body></html>"""
