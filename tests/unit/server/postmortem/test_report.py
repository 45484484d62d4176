"""The HTML report costs time linear in its events, draws a bounded number of them, and shows
names as written (Plotly markup escaped)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("plotly")

from holter_server.postmortem.report import render_report  # noqa: E402

RUN = {"id": "r1", "name": "run", "project": "p", "status": "finished", "last_step": 999, "tags": [], "config": {}, "notes": None}


def events(count: int) -> list[dict]:
    return [{"kind": "loss_spike", "metric": "loss", "severity": "warning", "start_step": i * 3, "end_step": i * 3 + (i % 2),
             "summary": f"spike {i}", "status": "open"} for i in range(count)]


def report(timeline: list[dict], **options: object) -> str:
    return render_report(run=RUN, summary="s", timeline=timeline, annotations=[], series={"loss": (list(range(1000)), [1.0] * 1000)},
                         kinds={"loss": "loss"}, **options)  # type: ignore[arg-type]


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
    html = render_report(run=RUN, summary="s", timeline=[], annotations=[], kinds={},
                         series={'<a href="https://phish.example">x</a>': ([0, 1], [1.0, 2.0])})
    assert 'href=\\"https://phish.example\\"' not in html and "&lt;a href" in html
