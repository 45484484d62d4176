"""How the dashboard gets its scripts into the browser quickly.

dcc.Graph loads plotly.js only when the first chart mounts, that is after the page's data came
back, and compiling it is then most of the time until the charts are drawn. Instead:
* the dashboard ships a plotly.js of its own: the core with the traces it draws (scatter,
  scattergl, heatmap), built with esbuild (`static/README.md`), which the browser runs in about
  half the time of plotly.js's cartesian bundle and a third of the full one's;
* a page with charts preloads it alongside Dash's own bundles (fetched, not yet run), and the
  chunk of dcc.Graph that draws (fetched otherwise only once the first chart mounts);
* once the page's route is known (the moment Dash asks the service for the page), a clientside
  callback runs it, so that compiling it overlaps the service reading and drawing the data;
* its URL is also the one dcc.Graph falls back to, so the full bundle is never loaded;
* Dash's Babel polyfill for old browsers (core-js, 100 kB to run on every page) is replaced by
  the one part of it Dash's components use, regenerator-runtime (7 kB): every browser Mantine
  supports has the rest;
* the pages, their callbacks' answers and the scripts go out gzipped (the API's answers are
  left as they are: the dashboard reads them in-process).
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Any

from dash import Dash, Input, Output, dcc, html
from fastapi import FastAPI
from fastapi.responses import FileResponse
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

STATIC = Path(__file__).parent / "static"
PLOTLY_BUNDLE = "plotly-holter-4.1.1.min.js"
PLOTLY_URL = f"/_holter/{PLOTLY_BUNDLE}"
GRAPH_CHUNK_URL = "/_dash-component-suites/dash/dcc/async-graph.js"  # dcc.Graph's drawing code, loaded on demand
CHART_PAGES = r"^/(runs/|compare|levers)"  # pages that draw charts: plotly is fetched as they open
POLYFILL = re.compile(r'<script src="[^"]*/deps/polyfill@[^"]*"></script>\s*')
REGENERATOR = "regenerator-runtime-0.14.1.min.js"
REGENERATOR_URL = f"/_holter/{REGENERATOR}"
GZIP_LEVEL = 6  # most of the gain of 9 for a fraction of the CPU

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
                for (const href of ['%(url)s', '%(graph)s']) {
                    const link = document.createElement('link');
                    link.rel = 'preload'; link.as = 'script'; link.href = href;
                    document.head.appendChild(link);
                }
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
</html>""" % {"pages": CHART_PAGES, "url": PLOTLY_URL, "graph": GRAPH_CHUNK_URL}  # noqa: UP031 (the page is full of braces)


# Run plotly.js as soon as a chart page's route is known (and tell dcc.Graph where it is).
RUN_PLOTLY = """
function(pathname) {
    window._dashPlotlyJSURL = '__URL__';
    const chartPage = new RegExp('__PAGES__').test(pathname || '');
    if (!window.Plotly && !document.getElementById('holter-plotly') && chartPage) {
        const script = document.createElement('script');
        script.id = 'holter-plotly';
        script.src = '__URL__';
        script.async = true;
        document.head.appendChild(script);
    }
    return window.dash_clientside.no_update;
}
"""


def components() -> list[object]:
    """What the app shell holds for the loader: the URL it watches and an output it never fills."""
    return [dcc.Location(id="holter-location"), html.Div(id="plotly-sink", hidden=True)]


def install(app: FastAPI, dash_app: Dash) -> None:
    """Serve the bundle, preload it on chart pages and run it as soon as such a page's route is known."""

    def vendored(name: str) -> Any:
        async def script() -> FileResponse:
            return FileResponse(
                STATIC / name,
                media_type="text/javascript",
                headers={"Cache-Control": "public, max-age=31536000, immutable"},
            )  # the name holds the version

        return script

    dash_app.index_string = INDEX
    interpolate = dash_app.interpolate_index

    def without_polyfill(**parts: Any) -> str:
        parts["scripts"] = POLYFILL.sub(f'<script src="{REGENERATOR_URL}"></script>\n', parts.get("scripts", ""), 1)
        return interpolate(**parts)

    dash_app.interpolate_index = without_polyfill  # type: ignore[method-assign]
    app.add_api_route(PLOTLY_URL, vendored(PLOTLY_BUNDLE), methods=["GET"], include_in_schema=False)
    app.add_api_route(REGENERATOR_URL, vendored(REGENERATOR), methods=["GET"], include_in_schema=False)
    app.add_middleware(DashboardGzip)
    dash_app.clientside_callback(
        RUN_PLOTLY.replace("__URL__", PLOTLY_URL).replace("__PAGES__", CHART_PAGES),
        Output("plotly-sink", "children"),
        Input("holter-location", "pathname"),
    )


# Scripts and styles whose URL holds their version: compressed once, then served from memory.
VERSIONED_ASSETS = ("/_holter/", "/_dash-component-suites/")
MAX_CACHED_ASSETS = 64


class DashboardGzip:
    """Gzip what the dashboard sends a browser (pages, callback answers, scripts, styles), not the
    API: its clients ask for what they want, and the dashboard reads it in-process, where
    compressing would only cost CPU. The versioned scripts (plotly.js alone is 1.5 MB) are
    compressed once and kept: every page load would otherwise compress them again."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=1024, compresslevel=GZIP_LEVEL)
        self.assets: dict[str, tuple[list[tuple[bytes, bytes]], bytes]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/api/"):
            await self.app(scope, receive, send)
        elif _cacheable(scope):
            await self._asset(scope, receive, send)
        else:
            await self.gzip(scope, receive, send)

    async def _asset(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = f"{scope['path']}?{scope.get('query_string', b'').decode('latin-1')}"
        cached = self.assets.get(key)
        if cached is None:
            status, headers, body = await _answer(self.app, scope, receive)
            if status != 200:  # an error or a 304 goes out as it came
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
            compressed = gzip.compress(body, compresslevel=GZIP_LEVEL)
            kept = [(k, v) for k, v in headers if k.lower() not in (b"content-length", b"content-encoding", b"vary")]
            kept += [
                (b"content-encoding", b"gzip"),
                (b"content-length", str(len(compressed)).encode()),
                (b"vary", b"Accept-Encoding"),
            ]
            cached = (kept, compressed)
            if len(self.assets) < MAX_CACHED_ASSETS:
                self.assets[key] = cached
        await send({"type": "http.response.start", "status": 200, "headers": cached[0]})
        await send({"type": "http.response.body", "body": cached[1]})


def _cacheable(scope: Scope) -> bool:
    """A GET of a versioned script or style from a browser that takes gzip and is not revalidating."""
    headers = dict(scope.get("headers") or [])
    return (
        scope.get("method") == "GET"
        and scope["path"].startswith(VERSIONED_ASSETS)
        and b"gzip" in headers.get(b"accept-encoding", b"")
        and b"if-none-match" not in headers
        and b"if-modified-since" not in headers
    )


async def _answer(app: ASGIApp, scope: Scope, receive: Receive) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The app's whole answer to one request: status, headers and body."""
    start: dict[str, Any] = {}
    body = bytearray()

    async def keep(message: Message) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))

    await app(scope, receive, keep)
    return int(start.get("status", 500)), list(start.get("headers", [])), bytes(body)
