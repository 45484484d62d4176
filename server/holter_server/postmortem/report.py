"""The self-contained HTML report of a run: summary, annotated curves (interactive Plotly, with
plotly.js inlined so the file opens with no server and no network), timeline, notes, config.

Takes plain data, returns the HTML text; plotly is imported only here.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any

from holter_server.detect.kinds import infer_kind

SEVERITY_COLOURS = {"critical": "rgba(217,45,32,0.18)", "warning": "rgba(247,144,9,0.16)", "info": "rgba(46,144,250,0.12)"}
PANEL_TITLES = {"loss": "Loss", "grad_norm": "Gradient norm", "activation_norm": "Activation norms",
                "logprob_mismatch": "Logprob mismatch (rollout vs trainer)", "throughput": "Throughput", "step_time": "Step time",
                "other": "Other metrics"}


def panel_of(metric: str) -> str:
    """Which chart a metric goes on: train and eval loss share one."""
    kind = infer_kind(metric)
    if kind == "eval_loss":
        return "loss"
    if kind == "loss" and "loss" not in metric.lower() and "nll" not in metric.lower() and "perplexity" not in metric.lower():
        return "other"
    return kind


def _figure(title: str, series: dict[str, tuple[Sequence[int], Sequence[float]]], events: list[dict[str, Any]]) -> Any:
    import plotly.graph_objects as go

    figure = go.Figure()
    for name, (steps, values) in series.items():
        finite = [v if isinstance(v, (int, float)) and math.isfinite(v) else None for v in values]
        figure.add_trace(go.Scattergl(x=list(steps), y=finite, mode="lines", name=name, line={"width": 1.4}))
        bad = [(s, v) for s, v in zip(steps, values) if not (isinstance(v, (int, float)) and math.isfinite(v))]
        if bad:
            figure.add_trace(go.Scatter(x=[s for s, _ in bad], y=[0] * len(bad), mode="markers", name=f"{name}: NaN/Inf",
                                        marker={"symbol": "x", "color": "#d92d20", "size": 9}, yaxis="y"))
    for event in events:
        start, end = event.get("start_step"), event.get("end_step")
        if start is None:
            continue
        label = event["kind"].replace("_", " ")
        if end is not None and end > start:
            figure.add_vrect(x0=start, x1=end, fillcolor=SEVERITY_COLOURS.get(event["severity"], "rgba(0,0,0,0.08)"), line_width=0,
                             annotation_text=label, annotation_position="top left", annotation_font_size=10)
        else:
            figure.add_vline(x=start, line_color="#d92d20" if event["severity"] == "critical" else "#f79009", line_dash="dot",
                             annotation_text=label, annotation_font_size=10)
    figure.update_layout(title=title, height=340, margin={"l": 50, "r": 20, "t": 50, "b": 40}, template="plotly_white",
                         legend={"orientation": "h", "y": -0.2}, xaxis_title="step", hovermode="x unified")
    return figure


def render_report(*, run: dict[str, Any], summary: str, timeline: list[dict[str, Any]], annotations: list[dict[str, Any]],
                  series: dict[str, tuple[Sequence[int], Sequence[float]]]) -> str:
    """The report as one HTML document."""
    import plotly.io as pio

    panels: dict[str, dict[str, tuple[Sequence[int], Sequence[float]]]] = {}
    for metric, data in sorted(series.items()):
        panels.setdefault(panel_of(metric), {})[metric] = data
    charts = []
    for index, (panel, members) in enumerate(sorted(panels.items(), key=lambda p: list(PANEL_TITLES).index(p[0]) if p[0] in PANEL_TITLES else 99)):
        events = [e for e in timeline if e.get("metric") in members]
        figure = _figure(PANEL_TITLES.get(panel, panel), members, events)
        charts.append(pio.to_html(figure, full_html=False, include_plotlyjs=index == 0, config={"displaylogo": False}))
    esc = html.escape
    def step_text(step: int | None) -> str:
        return "" if step is None else f"{step:,}"

    rows = "".join(
        f"<tr class='{esc(e['severity'])}'><td>{step_text(e.get('start_step'))}</td><td>{esc(e['kind'])}</td>"
        f"<td>{esc(e.get('metric') or '—')}</td><td>{esc(e['severity'])}</td><td>{esc(e['summary'])}</td><td>{esc(e['status'])}</td></tr>"
        for e in timeline
    ) or "<tr><td colspan='6'>No events.</td></tr>"

    def note_text(a: dict[str, Any]) -> str:
        where = ""
        if a.get("start_step") is not None:
            where += f", steps {step_text(a['start_step'])}–{step_text(a.get('end_step') or a['start_step'])}"
        if a.get("metric"):
            where += f", {esc(a['metric'])}"
        return f"<li><b>{esc(a['author'])}</b> ({esc(str(a['created_at'])[:16])}{where}): {esc(a['text'])}</li>"

    notes = "".join(note_text(a) for a in annotations) or "<li>No notes.</li>"
    title = f"{run.get('name') or run['id']} — Holter post-mortem"
    notes_paragraph = f"<p>{esc(run['notes'])}</p>" if run.get("notes") else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>
body {{ font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 2rem auto; max-width: 1100px; color: #1d2939; }}
h1 {{ font-size: 1.6rem; margin-bottom: .2rem; }} .meta {{ color: #667085; margin-bottom: 1rem; }}
.summary {{ background: #f9fafb; border-left: 4px solid #7f56d9; padding: .8rem 1rem; font-size: 1.05rem; }}
table {{ border-collapse: collapse; width: 100%; font-size: .9rem; }} td, th {{ border-bottom: 1px solid #eaecf0; padding: .35rem .5rem; text-align: left; vertical-align: top; }}
tr.critical td:nth-child(4) {{ color: #d92d20; font-weight: 600; }} tr.warning td:nth-child(4) {{ color: #dc6803; }}
pre {{ background: #f9fafb; padding: .8rem; overflow-x: auto; }}
</style></head><body>
<h1>{esc(run.get('name') or run['id'])}</h1>
<div class="meta">project {esc(run['project'])} · run {esc(run['id'])} · {esc(run['status'])} · last step {step_text(run.get('last_step')) or '—'} · tags {esc(', '.join(run.get('tags') or []) or '—')}</div>
<p class="summary">{esc(summary)}</p>
<h2>Curves</h2>
{''.join(charts) or '<p>No metrics.</p>'}
<h2>Timeline</h2>
<table><thead><tr><th>step</th><th>kind</th><th>metric</th><th>severity</th><th>what happened</th><th>status</th></tr></thead><tbody>{rows}</tbody></table>
<h2>Notes</h2><ul>{notes}</ul>
{notes_paragraph}
<h2>Config</h2><pre>{esc(json.dumps(run.get('config') or {}, indent=2, sort_keys=True))}</pre>
<p class="meta">Generated by Holter.</p>
</body></html>"""
