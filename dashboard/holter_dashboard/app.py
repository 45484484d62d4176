"""The Dash app mounted on the service's FastAPI app: theme, header, pages and their callbacks."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import dash
import dash_mantine_components as dmc
import httpx
from dash import Dash, html
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from holter_dashboard import login, plotly_loader
from holter_dashboard.api import HolterAPI
from holter_dashboard.components import THEME, sign_out_link
from holter_dashboard.pages import alerts, compare, levers, postmortem, run, runs

API_URL_ENV = "HOLTER_DASHBOARD_API_URL"


def mount(app: FastAPI, *, api: HolterAPI | None = None) -> Dash:
    """Serve the dashboard from `app` at `/`.

    The dashboard's API client defaults to `app` itself over an in-process ASGI transport, or
    to `$HOLTER_DASHBOARD_API_URL` when set (another service); tests may pass their own.
    """
    if api is None:
        remote = os.environ.get(API_URL_ENV)
        api = HolterAPI(remote) if remote else HolterAPI("http://localhost", transport=httpx.ASGITransport(app=app))
    _guard_api_paths(app)
    login.install(app, api)  # sign-in when auth is on; before Dash, whose catch-all serves every other GET
    dash_app = Dash(
        __name__,
        server=app,
        url_base_pathname="/",
        use_pages=True,
        pages_folder="",
        title="Holter",
        update_title=None,
        suppress_callback_exceptions=True,
        use_async=True,  # page layouts may be coroutines (the run page reads the API in its layout)
        assets_folder=os.path.join(os.path.dirname(__file__), "assets"),
    )
    dash.register_page("holter_dashboard.pages.runs", path="/", name="Runs", title="Runs · Holter", layout=runs.layout)
    dash.register_page(
        "holter_dashboard.pages.run",
        path_template="/runs/<run_id>",
        name="Run",
        title=run.title,
        layout=run.page_layout(api),
    )
    dash.register_page(
        "holter_dashboard.pages.compare",
        path="/compare",
        name="Compare",
        title="Compare · Holter",
        layout=compare.layout,
    )
    # pages are matched in module-name order: ".postmortem" comes before ".run", whose template would also match
    dash.register_page(
        "holter_dashboard.pages.postmortem",
        path_template="/runs/<run_id>/postmortem",
        name="Post-mortem",
        title=postmortem.title,
        layout=postmortem.layout,
    )
    dash.register_page(
        "holter_dashboard.pages.levers", path="/levers", name="Levers", title="Levers · Holter", layout=levers.layout
    )
    dash.register_page(
        "holter_dashboard.pages.alerts", path="/alerts", name="Alerts", title="Alerts · Holter", layout=alerts.layout
    )
    dash_app.layout = shell
    plotly_loader.install(app, dash_app)
    runs.register(dash_app, api)
    run.register(dash_app, api)
    compare.register(dash_app, api)
    postmortem.register(dash_app, api)
    levers.register(dash_app, api)
    alerts.register(dash_app, api)
    app.state.dashboard = dash_app
    _set_up_dash_on_start(app)
    return dash_app


def _set_up_dash_on_start(app: FastAPI) -> None:
    """Let Dash finish its set-up when the service starts, not on its first request.

    Dash registers the pages' own callbacks (routing, the document title) on the first request to
    `/` or `/_dash-*`; a page first opened at another path (`/runs/<id>`) then gets an index
    without the title callback's script, and the browser reports a missing function. One
    in-process request at start-up does that set-up before anyone asks.
    """
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app_: FastAPI) -> AsyncIterator[Any]:
        async with inner(app_) as state:
            transport = httpx.ASGITransport(app=app_)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
                await client.get("/_dash-dependencies")
            yield state

    app.router.lifespan_context = lifespan


def _guard_api_paths(app: FastAPI) -> None:
    """Unknown paths under /api answer a JSON 404, not the dashboard's page (Dash serves its
    index for every other GET so that page URLs work on reload)."""

    async def not_found(path: str) -> JSONResponse:
        return JSONResponse({"detail": "Not Found"}, status_code=404)

    app.add_api_route("/api/{path:path}", not_found, methods=["GET"], include_in_schema=False)


def shell() -> dmc.MantineProvider:
    """The frame around every page: header with navigation and, when signed in, "Sign out" (notes and
    acknowledgements are signed by the service with the key's name, "local" with auth off)."""
    header = dmc.AppShellHeader(
        dmc.Group(
            [
                dmc.Group(
                    [
                        dmc.Anchor(
                            dmc.Group(
                                [
                                    html.Span("♥", style={"color": "#e03131", "fontSize": 22}),
                                    dmc.Text("Holter", fw=700, size="lg"),
                                ],
                                gap=6,
                            ),
                            href="/",
                            underline="never",
                            c="dark",
                        ),
                        dmc.Anchor("Runs", href="/", size="sm", c="dimmed", id="nav-runs"),
                        dmc.Anchor("Compare", href="/compare", size="sm", c="dimmed", id="nav-compare"),
                        dmc.Anchor("Levers", href="/levers", size="sm", c="dimmed", id="nav-levers"),
                        dmc.Anchor("Alerts", href="/alerts", size="sm", c="dimmed", id="nav-alerts"),
                        dmc.Anchor("API", href="/docs", size="sm", c="dimmed", target="_blank"),
                    ],
                    gap="lg",
                ),
                dmc.Group([*filter(None, [sign_out_link()])], gap="md"),
            ],
            justify="space-between",
            h="100%",
            px="md",
        )
    )
    return dmc.MantineProvider(
        dmc.AppShell(
            [*plotly_loader.components(), header, dmc.AppShellMain(dash.page_container, bg="#f8f9fa")],
            header={"height": 52},
            padding="md",
        ),
        theme=THEME,
    )
