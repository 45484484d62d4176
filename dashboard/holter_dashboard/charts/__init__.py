"""Chart building: pure functions from API data to Plotly figures (plain dicts).

Nothing here does I/O, so tests call these directly. Colours, labels and panels come from the
service's vocabulary (`Vocabulary`, read from `GET /api/v1/vocabulary`), passed in; every band,
drift, zoom window and metric kind is the service's answer, drawn as it is. Figures are plain
dicts rather than `plotly.graph_objects` because they are built on every refresh and validating
a graph object costs more than drawing it; the dicts are exactly what `dcc.Graph` receives.

* `series` — a metric's points, the one NaN/±Inf decoding, smoothing, the x axis (step or wall time);
* `panels` — which charts a run page draws (the service's panel for each metric, layers, histograms);
* `style` — colours, the base layout, user text made safe for Plotly;
* `marks` — events and notes drawn on a chart;
* `line` — line panels, their live appends, a histogram's band chart;
* `heatmap` — per-layer families;
* `compare` — across runs: the service's reference band and drifts, seed bands, a run against its reference.
"""
