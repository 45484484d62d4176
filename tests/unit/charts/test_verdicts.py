"""An ablation's verdict drawn: each measure's difference with its confidence interval, against zero."""

from __future__ import annotations

import numpy as np
from holter_charts.verdicts import DETECTABLE_NAME, measure_label, verdict_interval_figure
from holter_server.analysis.verdicts import Arm, compare_arms
from holter_server.schemas.compare import VerdictPublic

STEPS = np.arange(0, 5_001, 100)
OFFSETS = (-0.006, 0.001, 0.006)  # three seeds 0.012 apart


def arm(label: str, shift: float) -> Arm:
    curves = {}
    for i, offset in enumerate(OFFSETS):
        noise = np.random.default_rng(i + (100 if shift else 0)).normal(0, 0.001, len(STEPS))
        curves[f"{label}{i}"] = (STEPS, 2 + 3 * np.exp(-STEPS / 1000) + shift + offset + noise)
    return Arm(label, curves)


def served(shift: float) -> dict:
    """What GET /compare answers for two three-seed arms B − A = `shift` (the verdicts as the service serves them)."""
    verdicts = compare_arms("eval_loss", arm("a", 0.0), arm("b", shift))
    return {"metric": "eval_loss", "verdicts": [VerdictPublic.from_verdict(v).model_dump() for v in verdicts]}


def rows(figure: dict) -> dict[str, dict]:
    """Each measure's point (its difference and whiskers) by row label."""
    return {t["y"][0]: t for t in figure["data"] if t.get("error_x") or "circle-open" in str(t["marker"]["symbol"])}


def test_each_measure_is_its_difference_with_its_interval_the_primary_on_top(vocab) -> None:
    comparison = served(-0.031)
    figure = verdict_interval_figure(comparison, vocab=vocab)
    primary = next(v for v in comparison["verdicts"] if v["primary"])
    assert figure["layout"]["yaxis"]["categoryarray"][0] == measure_label(primary) == f"{primary['where']} (primary)"
    assert len(rows(figure)) == len(comparison["verdicts"])
    point = rows(figure)[measure_label(primary)]
    assert point["x"] == [primary["difference"]]
    assert point["x"][0] + point["error_x"]["array"][0] == primary["ci_high"] < 0  # the whole interval below zero
    assert abs(point["x"][0] - point["error_x"]["arrayminus"][0] - primary["ci_low"]) < 1e-12
    assert point["marker"]["color"] == vocab.verdict_color("real effect") != vocab.verdict_color("unknown")
    assert figure["layout"]["shapes"][0]["x0"] == figure["layout"]["shapes"][0]["x1"] == 0  # the zero line
    low, high = figure["layout"]["xaxis"]["range"]
    assert low < primary["ci_low"] and high > 0


def test_where_nothing_was_detected_the_smallest_difference_these_seeds_find_is_marked(vocab) -> None:
    comparison = served(-0.001)
    figure = verdict_interval_figure(comparison, vocab=vocab)
    primary = next(v for v in comparison["verdicts"] if v["primary"])
    assert primary["verdict"] == "no detectable difference" and primary["detectable_difference"] > 0
    ticks = [t for t in figure["data"] if t.get("name") == DETECTABLE_NAME and t["y"][0] == measure_label(primary)]
    assert ticks and ticks[0]["x"] == [-primary["detectable_difference"], primary["detectable_difference"]]
    point = rows(figure)[measure_label(primary)]
    assert point["error_x"]["arrayminus"][0] > 0 and point["x"][0] + point["error_x"]["array"][0] > 0  # straddles 0
    assert point["marker"]["color"] == vocab.verdict_color("no detectable difference")
    assert "80% of the time" in point["hovertext"][0] and "noise" not in point["hovertext"][0]


def test_a_measure_that_could_not_be_tested_is_an_open_dot_without_whiskers(vocab) -> None:
    comparison = {
        "metric": "loss",
        "verdicts": [
            {"measure": "at_step", "where": "at step 300", "verdict": "unknown", "primary": True, "difference": 0.02}
        ],
    }
    figure = verdict_interval_figure(comparison, vocab=vocab)
    (point,) = figure["data"]
    assert point["marker"]["symbol"] == "circle-open" and "error_x" not in point
    assert point["marker"]["color"] == vocab.verdict_color("unknown")
