"""The HTML report costs time linear in its events, draws a bounded number of them, and shows
names as written (Plotly markup escaped)."""

from __future__ import annotations

import json
import re
import time

import pytest

pytest.importorskip("plotly")

from holter_server import vocabulary
from holter_server.postmortem.report import render_report
from holter_server.schemas.runs import MetricLayer
from holter_server.vocabulary.names import layer_index
from holter_server.vocabulary.signals import panel_of

VOCABULARY = vocabulary.as_dict()


def served_layer(name: str) -> dict | None:
    """A metric's `layer` as GET /runs/{id} serves it."""
    layered = layer_index(name)
    return MetricLayer(family=layered[0], index=layered[1]).model_dump() if layered else None


def run_of(**kinds: str | None) -> dict:
    """A run as `GET /runs/{id}` shows it, with these metrics of these kinds."""
    return {
        "id": "r1",
        "name": "run",
        "project": "p",
        "status": "finished",
        "last_step": 999,
        "tags": [],
        "config": {},
        "notes": None,
        "metrics": [
            {"name": name, "kind": kind, "panel": panel_of(kind) if kind else None, "layer": served_layer(name)}
            for name, kind in kinds.items()
        ],
    }


RUN = run_of(loss="loss")


def events(count: int) -> list[dict]:
    return [
        {
            "kind": "loss_spike",
            "metric": "loss",
            "severity": "warning",
            "start_step": i * 3,
            "end_step": i * 3 + (i % 2),
            "summary": f"spike {i}",
            "status": "open",
        }
        for i in range(count)
    ]


def report(timeline: list[dict], **options: object) -> str:
    return render_report(
        run=RUN,
        summary="s",
        timeline=timeline,
        annotations=[],
        series={"loss": (list(range(1000)), [1.0] * 1000)},
        vocabulary=VOCABULARY,
        **options,
    )  # type: ignore[arg-type]


def test_three_hundred_twenty_events_render_in_about_the_time_of_ten() -> None:
    report(events(10))  # warm plotly up
    started = time.process_time()
    report(events(10))
    few = time.process_time() - started
    started = time.process_time()
    report(events(320))
    many = time.process_time() - started
    assert many < max(10 * few, 2.0), (few, many)  # per-event re-validation made this ~80 s


def test_at_most_max_drawn_events_are_marked_but_all_are_listed() -> None:
    html = report(events(50), max_drawn_events=5)
    assert html.count('"type":"rect"') + html.count('"type":"line"') <= 5
    assert "spike 49" in html


def test_metric_names_with_plotly_markup_show_as_text() -> None:
    name = '<a href="https://phish.example">x</a>'
    html = render_report(
        run=run_of(**{name: None}),
        summary="s",
        timeline=[],
        annotations=[],
        vocabulary=VOCABULARY,
        series={name: ([0, 1], [1.0, 2.0])},
    )
    assert 'href=\\"https://phish.example\\"' not in html and "&lt;a href" in html


def test_a_seed_group_is_drawn_behind_the_run_and_its_standing_told() -> None:
    import numpy as np
    from holter_server.analysis.seeds import group_band
    from holter_server.analysis.standing import standing

    steps = np.arange(0, 2_001, 50)
    seeds = {
        f"s{i}": (steps, 2 + np.exp(-steps / 500) + offset) for i, offset in enumerate((-0.006, 0.0, 0.006))
    }  # mean 0
    run_curve = (steps, 2 + np.exp(-steps / 500) + 0.031)
    band, found = group_band(seeds), standing("eval_loss", run_curve, seeds)
    assert found is not None
    html = render_report(
        run=run_of(eval_loss="eval_loss"),
        summary="s",
        timeline=[],
        annotations=[],
        vocabulary=VOCABULARY,
        series={"eval_loss": (steps.tolist(), run_curve[1].tolist())},
        seed_group={
            "sentences": [found.sentence],
            "runs": [{"id": "s0", "name": "seed-0"}, {"id": "s1", "name": None}],
            "bands": {
                "eval_loss": {
                    "steps": band.steps.tolist(),
                    "median": band.median.tolist(),
                    "low": band.low.tolist(),
                    "high": band.high.tolist(),
                    "seeds": 3,
                }
            },
        },
    )
    assert (
        "eval_loss: 3-seed group min–max" in html
        and "eval_loss: 3-seed group median" in html
        and '"fill":"tonexty"' in html
    )
    # the band comes before the run's own curve, so it is drawn behind it
    assert html.index("3-seed group median") < html.index('"name":"eval_loss"')
    assert "<h2>Seed group</h2>" in html and "seed-0 (s0), s1 (s1)" in html
    assert "eval_loss ends 0.031 above its 3-seed group&#39;s mean (at step 2,000, its last: this run 2.049" in html
    assert "the seeds&#39; standard deviation there is 0.006: a real difference (95% CI +0.0" in html


def test_a_run_without_seed_siblings_says_how_to_make_some() -> None:
    html = report(
        [],
        seed_group={
            "sentences": ["This run has no seed siblings: run the same config again with another seed."],
            "runs": [],
            "bands": {},
        },
    )
    assert "<h2>Seed group</h2>" in html and "This run has no seed siblings" in html and "seed group median" not in html


def test_the_report_draws_the_panels_of_the_post_mortem_page_with_the_same_chart_builder() -> None:
    """The charts of report.html are the dashboard's (holter_charts.panel_figure): the same panels
    in the same order, per-layer metrics as one heatmap, a histogram as its band chart, NaN crosses
    on the line panels (the report once drew its own figures and lumped every other metric together)."""
    from holter_charts.figures import panel_figure
    from holter_charts.panels import HISTOGRAM_QUANTILES, plan_panels
    from holter_charts.series import Series, View
    from holter_charts.vocabulary import Vocabulary

    layers = {f"act_norm/layer.{i}": "activation_norm" for i in range(4)}
    quantiles = {f"weights/{q}": None for q in HISTOGRAM_QUANTILES}
    run = run_of(loss="loss", eval_loss="eval_loss", grad_norm="grad_norm", tokens_per_s=None, **layers, **quantiles)
    steps = list(range(200))
    series = {
        m["name"]: (steps, [float("nan") if m["name"] == "loss" and s == 150 else 1.0 + s / 1000 for s in steps])
        for m in run["metrics"]
    }
    timeline = [
        {
            "id": 1,
            "kind": "loss_spike",
            "metric": "loss",
            "severity": "warning",
            "start_step": 40,
            "end_step": 45,
            "peak_step": 42,
            "summary": "a spike",
            "status": "open",
        }
    ]
    html = render_report(run=run, summary="s", timeline=timeline, annotations=[], series=series, vocabulary=VOCABULARY)

    vocab = Vocabulary.from_api(VOCABULARY)
    panels = plan_panels(run["metrics"], vocab)
    assert {p.kind for p in panels} == {"lines", "heatmap", "band"}
    titles = [
        panel_figure(p, {k: Series(*v) for k, v in series.items()}, timeline, (), View(), vocab=vocab)[0]["layout"][
            "title"
        ]["text"]
        for p in panels
    ]
    drawn = [
        json.loads(text) for text in re.findall(r'"title":\{"font":\{"size":14\},"text":("(?:[^"\\]|\\.)*")', html)
    ]
    assert drawn == titles  # the page's charts, in the page's order
    names = {json.loads(text) for text in re.findall(r'"name":("(?:[^"\\]|\\.)*")', html)}
    assert '"type":"heatmap"' in html and {"weights 5–95%", "NaN / Inf"} <= names
    assert '"hovertext":"a spike"' in html  # the event's label as the page draws it
