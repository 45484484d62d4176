"""How the dashboard gets plotly.js into the browser quickly.

dcc.Graph loads plotly.js only when the first chart mounts, that is after the page's data came
back, and compiling it is then most of the time until the charts are drawn. Instead:
* the dashboard ships plotly.js's cartesian bundle (scatter, heatmap, bar, ...: all it draws),
  a third of the full bundle's size and as much less to compile; `static/` says where it comes from;
* a page with charts preloads it alongside Dash's own bundles (fetched, not yet run);
* once the page's route is known (the moment Dash asks the service for the page), a clientside
  callback runs it, so that compiling it overlaps the service reading and drawing the data;
* its URL is also the one dcc.Graph falls back to, so the full bundle is never loaded.
"""

from __future__ import annotations

from pathlib import Path

from dash import Dash, Input, Output, dcc, html
from fastapi import FastAPI
from fastapi.responses import FileResponse

STATIC = Path(__file__).parent / "static"
PLOTLY_BUNDLE = "plotly-cartesian-4.1.1.min.js"
PLOTLY_URL = f"/_holter/{PLOTLY_BUNDLE}"
CHART_PAGES = r"^/(runs/|compare|levers)"  # pages that draw charts: plotly is fetched as they open

# Dash's page, plus: on a page with charts, the browser downloads plotly.js alongside Dash's own
# bundles (a preload: fetched, not run, so the dashboard starts as soon as before).
INDEX = """<!DOCTYPE html>
<html>
    <head>
        {%%metas%%}
        <title>{%%title%%}</title>
        {%%favicon%%}
        {%%css%%}
        <script>
            if (new RegExp('%(pages)s').test(window.location.pathname)) {
                const link = document.createElement('link');
                link.rel = 'preload'; link.as = 'script'; link.href = '%(url)s';
                document.head.appendChild(link);
            }
        </script>
    </head>
    <body>
        {%%app_entry%%}
        <footer>
            {%%config%%}
            {%%scripts%%}
            {%%renderer%%}
        </footer>
    </body>
</html>""" % {"pages": CHART_PAGES, "url": PLOTLY_URL}


def components() -> list[object]:
    """What the app shell holds for the loader: the URL it watches and an output it never fills."""
    return [dcc.Location(id="holter-location"), html.Div(id="plotly-sink", hidden=True)]


def install(app: FastAPI, dash_app: Dash) -> None:
    """Serve the bundle, preload it on chart pages and run it as soon as such a page's route is known."""

    async def plotly_js() -> FileResponse:
        return FileResponse(
            STATIC / PLOTLY_BUNDLE,
            media_type="text/javascript",
            headers={"Cache-Control": "public, max-age=31536000, immutable"},
        )  # the name holds the version

    dash_app.index_string = INDEX
    app.add_api_route(PLOTLY_URL, plotly_js, methods=["GET"], include_in_schema=False)
    dash_app.clientside_callback(
        """
        function(pathname) {
            window._dashPlotlyJSURL = '%(url)s';
            if (!window.Plotly && !document.getElementById('holter-plotly') && new RegExp('%(pages)s').test(pathname || '')) {
                const script = document.createElement('script');
                script.id = 'holter-plotly';
                script.src = '%(url)s';
                script.async = true;
                document.head.appendChild(script);
            }
            return window.dash_clientside.no_update;
        }
        """
        % {"url": PLOTLY_URL, "pages": CHART_PAGES},
        Output("plotly-sink", "children"),
        Input("holter-location", "pathname"),
    )
