"""Chart building: pure functions from API data to Plotly figures (plain dicts), shared by the
dashboard's pages and the service's self-contained report.html, so both draw the same charts.
It imports nothing of Holter's (neither the server nor the dashboard): data comes in the API's shapes.

Nothing here does I/O, so tests call these directly. Colours, labels and panels come from the
service's vocabulary (`Vocabulary`, read from `GET /api/v1/vocabulary`), passed in; every band,
drift, zoom window and metric kind is the service's answer, drawn as it is. Figures are plain
dicts rather than `plotly.graph_objects` because they are built on every refresh and validating
a graph object costs more than drawing it; the dicts are exactly what `dcc.Graph` receives.

* `series` — a metric's points, the one NaN/±Inf decoding, smoothing, the x axis (step or wall time);
* `panels` — which charts a run page draws (the service's panel for each metric, layers, histograms)
  and in which section (main, System, Ranks);
* `figures` — `panel_figure`, a panel's figure whichever its kind (pages and report draw through it);
* `vocabulary` — the service's vocabulary (`GET /api/v1/vocabulary`) shaped for drawing;
* `style` — colours, the base layout, user text made safe for Plotly;
* `marks` — events and notes drawn on a chart;
* `line` — line panels, their live appends, a histogram's band chart;
* `heatmap` — per-layer families;
* `ranks` — a distributed job's ranks side by side: one metric as a rank × step heatmap, the
  ranks the job's events name;
* `compare` — across runs: the service's reference band and drifts, seed bands (a run's seed
  group in the report), a run against its reference;
* `verdicts` — an ablation's verdict: each measure's difference with its confidence interval.
"""
