"""Per-layer families as a heatmap."""

from __future__ import annotations

import math

from holter_charts.heatmap import family_matrix, heatmap_figure, worst_layer
from holter_charts.panels import Panel
from holter_charts.series import Series


def test_heatmap_calls_out_the_worst_layer(vocab) -> None:
    layers = {i: Series(list(range(100)), [1.0 + 0.1 * i] * 100) for i in range(4)}
    layers[2] = Series(list(range(100)), [1.0] * 90 + [8.0] * 10)
    assert worst_layer(layers) == (2, 8.0)
    x, order, z = family_matrix(layers, bins=10)
    assert order == [0, 1, 2, 3] and len(x) == 10 and z[2][-1] == 8.0
    panel = Panel(
        key="act",
        title="act_norm per layer",
        metrics=tuple(f"act/layer.{i}" for i in range(4)),
        kind="heatmap",
        layers=(0, 1, 2, 3),
    )
    figure = heatmap_figure(panel, {f"act/layer.{i}": s for i, s in layers.items()}, vocab=vocab)
    assert "worst: layer 2" in figure["layout"]["title"]["text"]


def test_a_downsampled_family_has_no_empty_columns_between_its_points() -> None:
    # a point every 64 steps (a downsampled read), on a grid of 50-step columns: some columns hold none
    steps = list(range(0, 20_000, 64))
    layers = {0: Series(steps, [1.0] * len(steps)), 1: Series(steps, [2.0 if s != 6400 else math.nan for s in steps])}
    _, _, rows = family_matrix(layers, bins=400)
    assert all(v == 1.0 for v in rows[0])
    assert sum(v is None for v in rows[1]) == 1  # the NaN, and only it, leaves a cell empty
