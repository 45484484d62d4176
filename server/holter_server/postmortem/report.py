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

from holter_server.vocabulary import events as event_kinds
from holter_server.vocabulary import severities
from holter_server.vocabulary.signals import PANEL_KEYS, PANELS, panel_of

PANEL_TITLES = {p.key: p.title for p in PANELS}
OTHER_PANEL = "Other metrics"  # every metric whose kind has no shared chart


def _band_traces(name: str, band: dict[str, Any]) -> list[Any]:
    """A seed group's band on `name`: min–max filled, median dashed, drawn before (so behind)
    the run's own curve."""
    import plotly.graph_objects as go

    shown, seeds = plotly_text(name), band.get("seeds")
    group = f"{seeds}-seed group" if seeds else "seed group"
    grey = "rgba(102, 112, 133, {})"
    return [
        go.Scattergl(x=band["steps"], y=band["low"], mode="lines", line={"width": 0, "color": grey.format(0.3)}, showlegend=False,
                     hoverinfo="skip", legendgroup=f"band {shown}", name=f"{shown}: {group} min"),
        go.Scattergl(x=band["steps"], y=band["high"], mode="lines", fill="tonexty", fillcolor=grey.format(0.18),
                     line={"width": 0, "color": grey.format(0.3)}, legendgroup=f"band {shown}", name=f"{shown}: {group} min–max"),
        go.Scattergl(x=band["steps"], y=band["median"], mode="lines", line={"width": 1.2, "dash": "dash", "color": grey.format(0.9)},
                     legendgroup=f"band {shown}", name=f"{shown}: {group} median"),
    ]


def _figure(title: str, series: dict[str, tuple[Sequence[int], Sequence[float]]], events: list[dict[str, Any]],
            bands: dict[str, dict[str, Any]] | None = None) -> Any:
    """One panel, with the seed group's band behind each metric that has one. Event marks are
    built as plain shapes and set once: `add_vrect`/`add_vline` per event re-validate the whole
    figure each time (quadratic in events). Names are escaped: Plotly renders `<a href>`, `<b>`
    in trace names and titles as markup."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for name in series:
        if bands and name in bands:
            figure.add_traces(_band_traces(name, bands[name]))
    for name, (steps, values) in series.items():
        shown = plotly_text(name)
        finite = [v if isinstance(v, (int, float)) and math.isfinite(v) else None for v in values]
        figure.add_trace(go.Scattergl(x=list(steps), y=finite, mode="lines", name=shown, line={"width": 1.4}))
        bad = [(s, v) for s, v in zip(steps, values) if not (isinstance(v, (int, float)) and math.isfinite(v))]
        if bad:
            figure.add_trace(go.Scatter(x=[s for s, _ in bad], y=[0] * len(bad), mode="markers", name=f"{shown}: NaN/Inf",
                                        marker={"symbol": "x", "color": severities.WORST.color, "size": 9}, yaxis="y"))
    shapes: list[dict[str, Any]] = []
    labels: list[dict[str, Any]] = []
    for event in events:
        start, end = event.get("start_step"), event.get("end_step")
        if start is None:
            continue
        label = {"x": start, "xref": "x", "y": 1, "yref": "paper", "text": plotly_text(event_kinds.label(event["kind"])),
                 "showarrow": False, "xanchor": "left", "yanchor": "bottom", "font": {"size": 10}}
        severity = severities.severity(event["severity"])
        if end is not None and end > start:
            shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": start, "x1": end, "y0": 0, "y1": 1,
                           "fillcolor": severity.rgba(0.16), "line": {"width": 0}, "layer": "below"})
        else:
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": start, "x1": start, "y0": 0, "y1": 1,
                           "line": {"color": severity.color, "dash": "dot"}})
        labels.append(label)
    figure.update_layout(title=plotly_text(title), height=340, margin={"l": 50, "r": 20, "t": 50, "b": 40}, template="plotly_white",
                         legend={"orientation": "h", "y": -0.2}, xaxis_title="step", hovermode="x unified", shapes=shapes, annotations=labels)
    return figure


def plotly_text(text: str) -> str:
    """Text for a Plotly label: its markup (`<a href>`, `<b>`, `<br>`) escaped, so a name shows as written."""
    return html.escape(text, quote=False)


def render_report(*, run: dict[str, Any], summary: str, timeline: list[dict[str, Any]], annotations: list[dict[str, Any]],
                  series: dict[str, tuple[Sequence[int], Sequence[float]]], kinds: dict[str, str], max_drawn_events: int = 200,
                  seed_group: dict[str, Any] | None = None) -> str:
    """The report as one HTML document; `kinds` says what each metric is (its chart follows).
    At most `max_drawn_events` events are marked on the charts (the worst first); the timeline lists them all.
    `seed_group` (services.postmortem.seed_group_of: `sentences`, its `runs`, and `bands` by
    metric) draws each band behind the run's curve and fills the "Seed group" section; without
    it the section is left out."""
    import plotly.io as pio

    panels: dict[str, dict[str, tuple[Sequence[int], Sequence[float]]]] = {}
    for metric, data in sorted(series.items()):
        panels.setdefault(panel_of(kinds.get(metric, "unknown")) or OTHER_PANEL, {})[metric] = data
    drawn = sorted(timeline, key=lambda e: -severities.rank(e["severity"]))[:max_drawn_events]
    charts = []
    for index, (panel, members) in enumerate(sorted(panels.items(), key=lambda p: PANEL_KEYS.index(p[0]) if p[0] in PANEL_KEYS else 99)):
        events = [e for e in drawn if e.get("metric") in members]
        figure = _figure(PANEL_TITLES.get(panel, panel), members, events, (seed_group or {}).get("bands"))
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
    seeds_section = ""
    if seed_group is not None:
        said = "".join(f"<li>{esc(s)}</li>" for s in seed_group.get("sentences") or [])
        members = ", ".join(f"{esc(r.get('name') or r['id'])} ({esc(r['id'])})" for r in seed_group.get("runs") or [])
        runs_line = (f"<p>The group (this run left out; same config, other seeds): {members}. Its median and min–max band are "
                     "drawn behind this run's curves.</p>") if members else ""
        seeds_section = f"<h2>Seed group</h2>\n{runs_line}<ul class='seeds'>{said}</ul>\n"
    title = f"{run.get('name') or run['id']} — Holter post-mortem"
    notes_paragraph = f"<p>{esc(run['notes'])}</p>" if run.get("notes") else ""
    severity_css = " ".join(f"tr.{s.name} td:nth-child(4) {{ color: {s.color};{' font-weight: 600;' if s is severities.WORST else ''} }}"
                            for s in severities.SEVERITIES if s.alarm)
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
<h1>{esc(run.get('name') or run['id'])}</h1>
<div class="meta">project {esc(run['project'])} · run {esc(run['id'])} · {esc(run['status'])} · last step {step_text(run.get('last_step')) or '—'} · tags {esc(', '.join(run.get('tags') or []) or '—')}</div>
<p class="summary">{esc(summary)}</p>
<h2>Curves</h2>
{''.join(charts) or '<p>No metrics.</p>'}
{seeds_section}<h2>Timeline</h2>
<table><thead><tr><th>step</th><th>kind</th><th>metric</th><th>severity</th><th>what happened</th><th>status</th></tr></thead><tbody>{rows}</tbody></table>
<h2>Notes</h2><ul>{notes}</ul>
{notes_paragraph}
<h2>Config</h2><pre>{esc(json.dumps(run.get('config') or {}, indent=2, sort_keys=True))}</pre>
<p class="meta">Generated by Holter.</p>
</body></html>"""
