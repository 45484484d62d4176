"""The dashboard's pure chart builders: panels, NaN handling, downsampling, events, heatmaps, compare."""

from __future__ import annotations

import math

from holter_dashboard.figures import (
    Panel, Series, View, band_exits, compare_figure, ema, event_shapes, family_matrix, heatmap_figure, layer_of, line_figure,
    minmax_downsample, nonfinite_trace_index, parse_values, plan_panels, stagger, trace_indexes, wall_clock,
    worst_layer,
)
from holter_dashboard.pages.runs import config_matches
from holter_dashboard.pages.run import view_from_query


def test_values_from_the_api_keep_nan_and_infinities() -> None:
    values = parse_values([1.5, "NaN", "Infinity", "-Infinity", None])
    assert values[0] == 1.5 and math.isnan(values[1]) and values[2] == math.inf and values[3] == -math.inf and math.isnan(values[4])


def test_panels_group_signal_families() -> None:
    names = ["loss", "eval_loss", "grad_norm", "logprob_mismatch", "tokens_per_s", "lr",
             *(f"act_norm/layer.{i}" for i in range(4)), "training/rollout_probs_diff_mean"]
    panels = plan_panels(names)
    titles = [p.title for p in panels]
    assert titles[:4] == ["Loss", "Gradient norm", "Logprob mismatch", "Throughput"]
    assert panels[0].metrics == ("loss", "eval_loss")  # train and eval on one chart, train first
    assert "training/rollout_probs_diff_mean" in panels[2].metrics  # verl's name for the mismatch
    heat = next(p for p in panels if p.kind == "heatmap")
    assert heat.layers == (0, 1, 2, 3) and heat.metrics[0] == "act_norm/layer.0"
    assert titles[-1] == "lr"


def test_layer_names() -> None:
    assert layer_of("act_norm/layer.11") == ("act_norm/layer*", 11)
    assert layer_of("model.layers.3.mlp/grad_norm") == ("model.layers*.mlp/grad_norm", 3)
    assert layer_of("loss") is None


def test_downsampling_keeps_a_one_step_spike_and_a_nan() -> None:
    steps = list(range(10_000))
    values = [1.0] * 10_000
    values[4321] = 50.0
    values[7777] = math.nan
    x, y = minmax_downsample(steps, values, 100)
    assert len(x) <= 300
    assert 4321 in x and 50.0 in y
    assert any(math.isnan(v) for v in y)


def test_ema_skips_non_finite_values_and_continues_from_its_state() -> None:
    whole, _ = ema([1.0, 2.0, math.nan, 3.0, 4.0], 0.5)
    first, state = ema([1.0, 2.0, math.nan], 0.5)
    rest, _ = ema([3.0, 4.0], 0.5, state)
    assert first + rest == whole
    assert whole[0] == 1.0  # debiased: starts at the first value, not at zero
    assert whole[2] == whole[1]


def test_line_figure_draws_raw_smoothed_nonfinite_and_events() -> None:
    panel = Panel(key="loss", title="Loss", metrics=("loss", "eval_loss"))
    loss = Series(list(range(100)), [3.0 - i * 0.01 for i in range(100)])
    loss.values[50] = 9.0
    loss.values[70] = math.nan
    event = {"id": 7, "metric": "loss", "kind": "spike", "severity": "warning", "status": "open", "start_step": 50,
             "end_step": 53, "peak_step": 50, "summary": "loss spiked to 9.0 at step 50"}
    figure, states = line_figure(panel, {"loss": loss, "eval_loss": Series([0, 50], [3.1, 2.9])}, [event], view=View(smoothing=0.5))
    raw, smooth = trace_indexes(panel, "loss")
    assert figure["data"][raw]["y"][70] is None  # a gap, and ...
    assert figure["data"][nonfinite_trace_index(panel)]["x"] == [70]  # ... a cross marking the NaN
    assert figure["data"][smooth]["visible"] is True and figure["data"][raw]["opacity"] < 1
    labels = [a for a in figure["layout"]["annotations"] if a.get("name") == "event-7"]
    assert labels[0]["text"] == "spike" and "9.0" in labels[0]["hovertext"]
    assert figure["layout"]["shapes"][0]["type"] == "rect" and figure["layout"]["shapes"][0]["x0"] == 50
    markers = figure["data"][-1]
    assert markers["x"] == [50] and markers["y"] == [9.0] and markers["customdata"] == [7]
    assert set(states) == {"loss", "eval_loss"}


def test_dismissed_events_are_not_drawn_and_handled_ones_are_grey() -> None:
    base = {"metric": "loss", "kind": "spike", "severity": "critical", "start_step": 5, "end_step": 5}
    shapes, labels = event_shapes([dict(base, id=1, status="dismissed"), dict(base, id=2, status="acknowledged")], [], View())
    assert len(labels) == 1 and labels[0]["text"] == "spike (acknowledged)" and labels[0]["font"]["color"] == "#868e96"
    assert shapes[0]["type"] == "line"


def test_heatmap_calls_out_the_worst_layer() -> None:
    layers = {i: Series(list(range(100)), [1.0 + 0.1 * i] * 100) for i in range(4)}
    layers[2] = Series(list(range(100)), [1.0] * 90 + [8.0] * 10)
    assert worst_layer(layers) == (2, 8.0)
    x, order, z = family_matrix(layers, bins=10)
    assert order == [0, 1, 2, 3] and len(x) == 10 and z[2][-1] == 8.0
    panel = Panel(key="act", title="act_norm per layer", metrics=tuple(f"act/layer.{i}" for i in range(4)), kind="heatmap", layers=(0, 1, 2, 3))
    figure = heatmap_figure(panel, {f"act/layer.{i}": s for i, s in layers.items()})
    assert "worst: layer 2" in figure["layout"]["title"]["text"]


def test_band_exits_find_where_a_run_leaves_the_reference() -> None:
    steps = list(range(0, 1000))
    ref = Series(steps, [2.0 + 0.01 * math.sin(i) for i in steps])
    other = Series(steps, [2.0 if not 400 <= i < 600 else 3.0 for i in steps])
    exits = band_exits(ref, other, smoothing=0.0)
    assert len(exits) == 1 and 395 <= exits[0][0] <= 405 and 590 <= exits[0][1] <= 600
    figure = compare_figure("loss", [("a", "a", ref, []), ("b", "b", other, [])], reference="a")
    assert figure["data"][0]["name"] == "reference band" and len(figure["layout"]["shapes"]) == 1


def test_config_filter_and_view_from_url() -> None:
    assert config_matches({"optim": {"lr": 0.0003}}, "optim.lr=0.0003")
    assert not config_matches({"lr": 1}, "lr=2") and config_matches({"lr": 1}, "lr") and config_matches({}, "")
    view = view_from_query(smooth="0.9", log="1", x="time", start="100", end="200", metrics="loss,grad_norm")
    assert view == {"smoothing": 0.9, "log_y": True, "x_axis": "time", "start": 100, "end": 200, "metrics": ["loss", "grad_norm"]}


def test_a_wall_clock_keeps_first_and_last_of_the_first_series_with_times() -> None:
    series = Series(list(range(0, 10_000, 2)), [1.0] * 5000, [100.0 + step for step in range(0, 10_000, 2)])
    clock = wall_clock([Series([1], [1.0], [None]), series], most=100)  # the first series has no times
    assert len(clock) <= 101 and clock[0] == [0, 100_000.0] and clock[-1] == [9998, 10_098_000.0]
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(clock, clock[1:]))


def test_a_zoomed_wall_time_chart_is_drawn_over_the_zoomed_steps() -> None:
    series = {"loss": Series(list(range(100)), [1.0] * 100, [1000.0 + step for step in range(100)])}
    figure, _ = line_figure(Panel("loss", "Loss", ("loss",)), series, view=View(x_axis="time", start=20, end=40))
    assert figure["layout"]["xaxis"]["range"] == [1_020_000.0, 1_040_000.0] and figure["layout"]["xaxis"]["type"] == "date"


def test_labels_on_a_wall_time_axis_are_staggered_by_their_distance_in_time() -> None:
    series = [Series(list(range(1000)), [1.0] * 1000, [1000.0 + 10 * step for step in range(1000)])]
    view = View(x_axis="time")
    near = [{"x": 1_000_000.0 + 10_000 * step} for step in (100, 101)]
    far = [{"x": 1_000_000.0 + 10_000 * step} for step in (100, 600)]
    assert [label["yshift"] for label in stagger(near, series, view)] == [0, 17]
    assert [label["yshift"] for label in stagger(far, series, view)] == [0, 0]


def test_overlapping_events_of_a_family_draw_one_span_and_one_counted_label() -> None:
    series = [Series(list(range(200)), [1.0] * 200)]
    events = [{"id": i, "metric": f"mismatch/{i}", "kind": "sawtooth", "severity": "warning", "status": "open",
               "start_step": 11 + i, "end_step": 150 + i, "summary": f"metric {i} saws"} for i in range(5)]
    events.append({"id": 9, "metric": "mismatch/0", "kind": "spike", "severity": "warning", "status": "open",
                   "start_step": 180, "end_step": 190, "summary": "a spike"})
    shapes, labels = event_shapes(events, series, View())
    assert [(r["x0"], r["x1"]) for r in shapes if r["type"] == "rect"] == [(11, 154), (180, 190)]
    texts = sorted(label["text"] for label in labels)
    assert texts == ["sawtooth ×5", "spike"]
    counted = next(label for label in labels if label["text"] == "sawtooth ×5")
    assert counted["hovertext"].count("saws") == 4 and "1 more" in counted["hovertext"]


def test_events_of_a_run_at_one_step_share_one_marker_on_the_compare_chart() -> None:
    s = Series(list(range(100)), [1.0] * 100)
    events = [{"metric": "loss", "kind": kind, "status": "open", "start_step": 40, "peak_step": 40, "summary": kind}
              for kind in ("spike", "reference_drift", "grad_norm_precursor")]
    figure = compare_figure("loss", [("a", "a", s, events)])
    markers = [t for t in figure["data"] if t.get("mode") == "markers+text"]
    assert len(markers) == 1 and markers[0]["text"] == ["spike +2"]
    assert all(kind in markers[0]["hovertext"][0] for kind in ("spike", "reference_drift", "grad_norm_precursor"))

