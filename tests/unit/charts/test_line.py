"""Line panels, their live appends, and a histogram's band chart."""

from __future__ import annotations

import math

from holter_charts.line import WEBGL_POINTS, band_figure, line_appends, line_figure
from holter_charts.panels import Panel, nonfinite_trace_index, trace_indexes
from holter_charts.series import Series, View

QUANTILES = ("min", "p5", "p25", "median", "p75", "p95", "max")


def test_the_band_fills_between_the_quantiles_in_order() -> None:
    panel = Panel(key="w-band", title="w (distribution)", metrics=tuple(f"w/{q}" for q in QUANTILES), kind="band")
    series = {f"w/{q}": Series([0, 1], [float(i), float(i) + 1]) for i, q in enumerate(QUANTILES)}
    figure = band_figure(panel, series)
    by_name = {t["name"]: t for t in figure["data"]}
    assert by_name["w 5–95%"]["fill"] == "tonexty" and by_name["w 5–95%"]["y"] == [5.0, 6.0]
    assert by_name["w 25–75%"]["fill"] == "tonexty" and by_name["w median"]["y"] == [3.0, 4.0]
    # each filled trace comes right after the lower edge it fills down to
    order = [t["name"] for t in figure["data"]]
    assert order.index("w 5–95%") == order.index("w p5") + 1 and order.index("w 25–75%") == order.index("w p25") + 1


def test_line_figure_draws_raw_smoothed_nonfinite_and_events(vocab) -> None:
    panel = Panel(key="loss", title="Loss", metrics=("loss", "eval_loss"))
    loss = Series(list(range(100)), [3.0 - i * 0.01 for i in range(100)])
    loss.values[50] = 9.0
    loss.values[70] = math.nan
    event = {
        "id": 7,
        "metric": "loss",
        "kind": "spike",
        "severity": "warning",
        "status": "open",
        "start_step": 50,
        "end_step": 53,
        "peak_step": 50,
        "summary": "loss spiked to 9.0 at step 50",
    }
    figure, states = line_figure(
        panel, {"loss": loss, "eval_loss": Series([0, 50], [3.1, 2.9])}, [event], view=View(smoothing=0.5), vocab=vocab
    )
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
    assert (
        markers["marker"]["color"] == [vocab.color("warning")]
        and figure["data"][nonfinite_trace_index(panel)]["marker"]["color"] == vocab.worst_color
    )


def test_a_zoomed_wall_time_chart_is_drawn_over_the_zoomed_steps(vocab) -> None:
    series = {"loss": Series(list(range(100)), [1.0] * 100, [1000.0 + step for step in range(100)])}
    figure, _ = line_figure(
        Panel("loss", "Loss", ("loss",)), series, view=View(x_axis="time", start=20, end=40), vocab=vocab
    )
    assert (
        figure["layout"]["xaxis"]["range"] == [1_020_000.0, 1_040_000.0] and figure["layout"]["xaxis"]["type"] == "date"
    )


def test_plotly_markup_in_names_notes_and_summaries_shows_as_text(vocab) -> None:
    name = '<a href="https://phish.example">loss</a>'
    panel = Panel(key="x", title=name, metrics=(name,))
    event = {
        "id": 1,
        "metric": name,
        "kind": "spike",
        "severity": "warning",
        "status": "open",
        "start_step": 5,
        "end_step": 5,
        "peak_step": 5,
        "summary": "<b>urgent</b> <a href='https://phish.example'>fix</a>",
    }
    note = {
        "id": 2,
        "start_step": 3,
        "end_step": 4,
        "author": "<i>mallory</i>",
        "text": '<a href="https://phish.example">see</a>',
    }
    figure, _ = line_figure(
        panel, {name: Series(list(range(10)), [1.0] * 5 + [9.0] + [1.0] * 4)}, [event], [note], view=View(), vocab=vocab
    )
    text = str([{k: v for k, v in trace.items() if k != "legendgroup"} for trace in figure["data"]]) + str(
        figure["layout"]
    )  # ids aside
    assert "<a href" not in text and "<b>urgent" not in text and "<i>mallory" not in text
    assert "&lt;a href" in text


def test_live_appends_extend_each_trace_as_the_figure_drew_it(vocab) -> None:  # type: ignore[no-untyped-def]
    panel = Panel(key="loss", title="Loss", metrics=("loss", "eval_loss"))
    values = [3.0, 2.5, math.nan, 2.0, math.inf, 1.5]
    whole, _ = line_figure(panel, {"loss": Series(list(range(6)), values)}, view=View(smoothing=0.5), vocab=vocab)
    first, states = line_figure(
        panel, {"loss": Series(list(range(3)), values[:3])}, view=View(smoothing=0.5), vocab=vocab
    )
    extensions, new_states = line_appends(
        panel, {"loss": Series(list(range(3, 6)), values[3:])}, View(smoothing=0.5), states
    )
    for index, x, y in extensions:
        trace = first["data"][index]
        trace["x"], trace["y"] = trace["x"] + x, trace["y"] + y  # (a raw and its smoothed trace share one x list)
    bad = nonfinite_trace_index(panel)
    for index in (*trace_indexes(panel, "loss"), bad):
        assert first["data"][index]["x"] == whole["data"][index]["x"]
        assert first["data"][index]["y"] == whole["data"][index]["y"]
    assert first["data"][bad]["x"] == [2, 4] and set(new_states) == {"loss"}


def test_a_long_series_is_drawn_with_webgl_and_a_short_one_with_svg(vocab) -> None:
    panel = Panel(key="loss", title="Loss", metrics=("loss",))
    long = Series(list(range(WEBGL_POINTS + 1)), [1.0] * (WEBGL_POINTS + 1))
    short = Series(list(range(100)), [1.0] * 100)
    for series, kind in ((long, "scattergl"), (short, "scatter")):
        figure, _ = line_figure(panel, {"loss": series}, vocab=vocab)
        assert [t["type"] for t in figure["data"][:2]] == [kind, kind]


def test_a_small_multiple_pads_its_range_so_a_flat_line_at_its_top_is_drawn_whole(vocab) -> None:
    panel = Panel(key="cpu", title="holter/system/cpu.percent", metrics=("holter/system/cpu.percent",))
    values = [100.0] * 20 + [40.0] + [100.0] * 20
    figure, _ = line_figure(
        panel, {"holter/system/cpu.percent": Series(list(range(41)), values)}, vocab=vocab, compact=True
    )
    low, high = figure["layout"]["yaxis"]["range"]
    assert low < 40.0 and high > 100.0 and figure["layout"]["showlegend"] is False
    flat, _ = line_figure(
        panel, {"holter/system/cpu.percent": Series(list(range(5)), [0.0] * 5)}, vocab=vocab, compact=True
    )
    assert flat["layout"]["yaxis"]["range"] == [-1.0, 1.0]


def test_a_share_panel_draws_percent_and_fraction_on_one_percentage_axis(vocab) -> None:
    panel = Panel(key="mfu", title="MFU", metrics=("mfu(%)", "mfu"), share=True, percent=("mfu(%)",))
    series = {"mfu(%)": Series([0, 1], [41.0, math.nan]), "mfu": Series([0, 1], [0.38, 0.39])}
    figure, _ = line_figure(panel, series, view=View(smoothing=0.0), vocab=vocab)
    assert figure["data"][0]["y"] == [0.41, None] and figure["data"][2]["y"] == [0.38, 0.39]
    assert figure["layout"]["yaxis"]["tickformat"] == ".0%" and "%{y:.1%}" in figure["data"][0]["hovertemplate"]
    assert figure["data"][nonfinite_trace_index(panel)]["x"] == [1]  # the NaN stays a NaN


def test_live_appends_to_a_share_panel_are_scaled_as_the_figure_was(vocab) -> None:  # type: ignore[no-untyped-def]
    panel = Panel(key="mfu", title="MFU", metrics=("mfu(%)",), share=True, percent=("mfu(%)",))
    _, states = line_figure(panel, {"mfu(%)": Series([0], [40.0])}, view=View(smoothing=0.0), vocab=vocab)
    extensions, _ = line_appends(panel, {"mfu(%)": Series([1, 2], [42.0, 44.0])}, View(smoothing=0.0), states)
    assert extensions[0] == (0, [1, 2], [0.42, 0.44])


def test_the_step_s_own_work_is_dashed_in_its_whole_step_s_colour_and_the_chart_says_so(vocab) -> None:
    whole, compute = "holter/throughput/tokens_per_s", "holter/throughput/compute_tokens_per_s"
    panel = Panel(key="throughput", title="Throughput", metrics=(compute, whole), compute_only=(compute,))
    series = {whole: Series([0, 1], [800.0, 500.0]), compute: Series([0, 1], [1000.0, 1000.0])}
    figure, _ = line_figure(panel, series, view=View(smoothing=0.5), vocab=vocab)
    raw_c, smooth_c = (figure["data"][i] for i in trace_indexes(panel, compute))
    _, smooth_w = (figure["data"][i] for i in trace_indexes(panel, whole))
    assert smooth_c["line"]["dash"] == raw_c["line"]["dash"] == "dash" and "dash" not in smooth_w["line"]
    assert smooth_c["line"]["color"] == smooth_w["line"]["color"]
    assert "wait for data" in figure["layout"]["legend"]["title"]["text"]


def test_a_chart_without_the_step_s_own_work_keeps_its_plain_title_and_palette(vocab) -> None:
    panel = Panel(key="loss", title="Loss", metrics=("loss", "eval_loss"))
    figure, _ = line_figure(panel, {"loss": Series([0], [1.0])}, view=View(), vocab=vocab)
    assert figure["layout"]["title"]["text"] == "Loss" and "title" not in figure["layout"]["legend"]
    assert figure["data"][0]["line"]["color"] != figure["data"][2]["line"]["color"]


def test_a_direction_override_in_a_metric_name_is_spelled_out_in_the_legend(vocab) -> None:
    name = "loss\u202egnp.exe"  # reads "lossexe.png" where the override is obeyed
    panel = Panel(key="loss", title="Loss", metrics=(name,))
    figure, _ = line_figure(panel, {name: Series(list(range(10)), [1.0] * 10)}, [], [], view=View(), vocab=vocab)
    names = [trace["name"] for trace in figure["data"] if trace.get("name", "").startswith("loss")]
    assert names and all(n == "loss\\u202egnp.exe" for n in names)
