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


def test_a_seed_group_is_drawn_behind_the_run_and_its_standing_told() -> None:
    import numpy as np

    from holter_server.analysis.seeds import group_band
    from holter_server.analysis.standing import standing

    steps = np.arange(0, 2_001, 50)
    seeds = {f"s{i}": (steps, 2 + np.exp(-steps / 500) + offset) for i, offset in enumerate((-0.006, 0.0, 0.006))}  # mean 0
    run_curve = (steps, 2 + np.exp(-steps / 500) + 0.031)
    band, found = group_band(seeds), standing("eval_loss", run_curve, seeds)
    assert found is not None
    html = render_report(run=RUN, summary="s", timeline=[], annotations=[], kinds={"eval_loss": "eval_loss"},
                         series={"eval_loss": (steps.tolist(), run_curve[1].tolist())},
                         seed_group={"sentences": [found.sentence], "runs": [{"id": "s0", "name": "seed-0"}, {"id": "s1", "name": None}],
                                     "bands": {"eval_loss": {"steps": band.steps.tolist(), "median": band.median.tolist(),
                                                             "low": band.low.tolist(), "high": band.high.tolist(), "seeds": 3}}})
    assert "eval_loss: 3-seed group min–max" in html and "eval_loss: 3-seed group median" in html and '"fill":"tonexty"' in html
    # the band comes before the run's own curve, so it is drawn behind it
    assert html.index("3-seed group median") < html.index('"name":"eval_loss"')
    assert "<h2>Seed group</h2>" in html and "seed-0 (s0), s1 (s1)" in html
    assert "eval_loss ends 0.031 above its 3-seed group&#x27;s mean (at step 2,000, its last: this run 2.049" in html
    assert "the seed spread there is 0.012: outside the spread, a real difference" in html


def test_a_run_without_seed_siblings_says_how_to_make_some() -> None:
    html = report([], seed_group={"sentences": ["This run has no seed siblings: run the same config again with another seed."],
                                  "runs": [], "bands": {}})
    assert "<h2>Seed group</h2>" in html and "This run has no seed siblings" in html and "seed group median" not in html
