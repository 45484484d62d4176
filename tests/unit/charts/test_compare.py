"""Charts across runs: the service's reference band and drifts, event markers."""

from __future__ import annotations

from holter_charts.compare import band_traces, compare_figure
from holter_charts.series import Series


def test_events_of_a_run_at_one_step_share_one_marker_on_the_compare_chart(vocab) -> None:
    s = Series(list(range(100)), [1.0] * 100)
    events = [
        {"metric": "loss", "kind": kind, "status": "open", "start_step": 40, "peak_step": 40, "summary": kind}
        for kind in ("spike", "reference_drift", "grad_norm_precursor")
    ]
    figure = compare_figure("loss", [("a", "a", s, events)], vocab=vocab)
    markers = [t for t in figure["data"] if t.get("mode") == "markers+text"]
    assert len(markers) == 1 and markers[0]["text"] == ["spike +2"]
    assert all(kind in markers[0]["hovertext"][0] for kind in ("spike", "reference_drift", "grad_norm_precursor"))


def test_the_reference_band_and_the_drifts_are_the_services(vocab) -> None:  # type: ignore[no-untyped-def]
    ref = Series(list(range(0, 1000)), [2.0] * 1000)
    other = Series(list(range(0, 1000)), [2.0 if not 400 <= i < 600 else 3.0 for i in range(1000)])
    # what GET /runs/b/compare?reference=a answered (median ± 4·MAD; the dashboard computes no band)
    comparison = {
        "run_id": "b",
        "reference_id": "a",
        "metric": "loss",
        "steps": [0, 500, 999],
        "values": [2.0, 3.0, 2.0],
        "reference": [2.0, 2.0, 2.0],
        "low": [1.9, 1.8, "NaN"],
        "high": [2.1, 2.2, 2.3],
        "drifts": [{"start_step": 400, "end_step": 599, "mean_gap": 1.0, "direction": "above", "points": 200}],
    }
    figure = compare_figure(
        "loss", [("a", "a", ref, []), ("b", "b", other, [])], reference="a", vocab=vocab, comparisons={"b": comparison}
    )
    high, low = figure["data"][:2]
    # step 999's low edge is NaN: the band stops at 500 rather than fill down to the axis there
    assert high["x"] == [0, 500] and high["y"] == [2.1, 2.2]
    assert low["name"] == "reference band" and low["fill"] == "tonexty" and low["y"] == [1.9, 1.8]
    (span,) = figure["layout"]["shapes"]
    assert (span["x0"], span["x1"]) == (400, 599) and span["fillcolor"] == figure["data"][4]["line"][
        "color"
    ]  # b's colour
    without = compare_figure("loss", [("a", "a", ref, []), ("b", "b", other, [])], reference="a", vocab=vocab)
    assert "reference band" not in [t.get("name") for t in without["data"]] and without["layout"]["shapes"] == []


def test_a_band_with_a_gap_is_filled_only_where_both_edges_are_known() -> None:
    comparison = {"steps": [0, 1, 2, 3, 4], "low": [1.0, 1.0, "NaN", 1.0, 1.0], "high": [2.0, 2.0, 2.0, "NaN", 2.0]}
    high, low = band_traces(comparison)
    assert high["x"] == low["x"] == [0, 1, 4]
    assert None not in high["y"] and None not in low["y"]  # a None in a filled edge fills to the axis
