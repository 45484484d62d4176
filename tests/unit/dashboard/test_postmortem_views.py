"""Pure pieces of the post-mortem, levers and alerts pages: the reference-band figure, links, wording."""

from __future__ import annotations

import math

from holter_charts.compare import drift_sentence, reference_figure
from holter_dashboard.pages.alerts import rule_filters
from holter_dashboard.pages.levers import p_value_text, report_view
from holter_dashboard.pages.postmortem import default_reference_metric

COMPARISON = {
    "run_id": "r2",
    "reference_id": "r1",
    "metric": "eval_loss",
    "steps": [0, 50, 100, 150, 200],
    "values": [3.0, 2.6, "NaN", 2.55, 2.5],
    "reference": [3.0, 2.5, 2.3, 2.2, 2.1],
    "low": [2.9, 2.4, 2.2, 2.1, 2.0],
    "high": [3.1, 2.6, 2.4, 2.3, 2.2],
    "drifts": [{"start_step": 100, "end_step": 200, "mean_gap": 0.31, "direction": "above", "points": 3}],
}


def test_the_band_is_filled_between_low_and_high() -> None:
    figure = reference_figure(COMPARISON)
    high, low, reference, run = figure["data"]
    assert high["y"] == COMPARISON["high"] and "fill" not in high
    assert low["y"] == COMPARISON["low"] and low["fill"] == "tonexty"  # fills up to the trace before it: the upper edge
    assert reference["line"]["dash"] == "dash" and reference["y"] == COMPARISON["reference"]
    assert run["x"] == COMPARISON["steps"] and run["y"][2] is None  # a NaN is a gap, not a zero
    assert run["name"] == "r2" and "r1" in reference["name"]


def test_each_drift_is_shaded_and_labelled() -> None:
    figure = reference_figure(COMPARISON, run_label="seed2")
    (shape,) = figure["layout"]["shapes"]
    assert (shape["x0"], shape["x1"], shape["yref"]) == (100, 200, "paper")
    (label,) = figure["layout"]["annotations"]
    assert label["text"] == "drift above" and "0.31 above the reference from step 100 to 200" in label["hovertext"]
    assert figure["data"][3]["name"] == "seed2"


def test_a_comparison_without_common_steps_says_so() -> None:
    figure = reference_figure(
        {**COMPARISON, "steps": [], "values": [], "low": [], "high": [], "reference": [], "drifts": []}
    )
    assert figure["layout"]["shapes"] == []
    assert "share no steps" in figure["layout"]["annotations"][0]["text"]


def test_drift_sentence() -> None:
    sentence = drift_sentence(
        "eval_loss", {"start_step": 2000, "end_step": 3950, "mean_gap": -0.12, "direction": "below", "points": 40}
    )
    assert sentence == "eval_loss 0.12 below the reference from step 2,000 to 3,950 (40 points)"


def test_the_reference_comparison_starts_on_the_eval_loss(vocab) -> None:
    def metrics(*pairs: tuple[str, str]) -> list[dict]:
        return [{"name": name, "kind": kind} for name, kind in pairs]

    assert (
        default_reference_metric(
            metrics(("grad_norm", "grad_norm"), ("loss", "loss"), ("eval_loss", "eval_loss")), vocab
        )
        == "eval_loss"
    )
    assert (
        default_reference_metric(
            metrics(("grad_norm", "grad_norm"), ("lm loss validation", "eval_loss"), ("lm loss", "loss")), vocab
        )
        == "lm loss validation"
    )
    assert default_reference_metric(metrics(("grad_norm", "grad_norm"), ("trl", "loss")), vocab) == "trl"
    # a name with "loss" in it is not a loss unless the service reads it as one
    assert default_reference_metric(metrics(("policy/loss", "policy_loss"), ("a_grad", "grad_norm")), vocab) == "a_grad"
    assert default_reference_metric([], vocab) is None


def test_rule_filters_read_as_a_line(vocab) -> None:
    rule = {
        "project": "gpt2",
        "run_tag": None,
        "metric_pattern": "loss*",
        "kinds": ["spike", "divergence"],
        "min_severity": "warning",
        "threshold_op": None,
        "threshold_value": None,
        "cooldown_s": 300,
    }
    assert rule_filters(rule, vocab) == "project gpt2 · loss* · spike, divergence · warning or worse · cooldown 5 min"
    threshold = {"metric_pattern": "grad_norm", "threshold_op": "above", "threshold_value": 10.0, "cooldown_s": 0}
    assert rule_filters(threshold, vocab) == "grad_norm above 10"
    assert (
        rule_filters({"threshold_op": "nonfinite", "cooldown_s": 30}, vocab)
        == "any metric is NaN or ±Inf · cooldown 30 s"
    )
    assert (
        rule_filters({"kinds": None, "min_severity": "critical", "cooldown_s": 0}, vocab) == "any event · critical only"
    )


def test_levers_without_a_candidate_show_the_note(vocab) -> None:
    parts = report_view(
        {
            "runs": 3,
            "varying_keys": ["rollouts_num", "seed"],
            "candidates": [],
            "confounded": [["rollouts_num", "seed"]],
            "note": "no config key changes the failure",
        },
        vocab,
    )
    classes = [getattr(p, "className", None) for p in parts]
    assert classes == ["levers-scope", "levers-confounded", "levers-note"]
    assert parts[-1].children == "no config key changes the failure"
    assert p_value_text(0.0004) == "< 0.001" and p_value_text(0.0417) == "0.042" and p_value_text(0.5) == "0.50"
    assert not math.isnan(float(p_value_text(0.5)))


def test_the_figure_opens_on_the_drift_with_the_y_axis_fitted_there() -> None:
    steps = list(range(0, 4000, 50))
    reference = [2.0 + 8.0 * math.exp(-s / 600) for s in steps]
    values = [r + (0.12 if s >= 2000 else 0.0) for s, r in zip(steps, reference)]
    comparison = {
        **COMPARISON,
        "steps": steps,
        "values": values,
        "reference": reference,
        "low": [r - 0.03 for r in reference],
        "high": [r + 0.03 for r in reference],
        "drifts": [
            # as the service serves it: with the window every page opens it on (half its span either side)
            {
                "start_step": 2000,
                "end_step": 3950,
                "mean_gap": 0.12,
                "direction": "above",
                "points": 40,
                "zoom": {"start": 1025, "end": 4925},
            }
        ],
    }
    layout = reference_figure(comparison)["layout"]
    assert layout["xaxis"]["range"] == [1025, 4925]  # the served window, as the run page opens the drift
    y0, y1 = layout["yaxis"]["range"]
    assert 1.8 < y0 < 1.9 and 3.5 < y1 < 3.6  # 2..3.4 there, not 2..10: the 0.12 gap is visible
    without = reference_figure({**comparison, "drifts": []})["layout"]
    assert "range" not in without["yaxis"] and "range" not in without["xaxis"]
