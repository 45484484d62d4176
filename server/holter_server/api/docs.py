"""The API's own pages, `/docs` (Swagger UI) and `/redoc`, working offline.

Their files come from the fastapi-offline package, served by the service itself (no CDN, which
an air-gapped install cannot reach), and each page carries a Content-Security-Policy that keeps
the browser on this service: ReDoc's bundle, for one, shows its maker's logo from their CDN.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse

# Where the Swagger UI and ReDoc files are served (fastapi-offline mounts them there); the
# dashboard's sign-in leaves this path open, as it does the pages.
ASSETS = "/_holter/docs"
# Scripts, styles, pictures, fonts and requests from this service only; ReDoc searches in a web
# worker it makes from a blob.
POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' blob:; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; frame-ancestors 'self'"
)


def install(app: FastAPI) -> None:
    """Add `/docs`, its OAuth2 redirect and `/redoc` to `app` (made with docs_url=None, redoc_url=None)."""
    openapi_url = app.openapi_url or "/openapi.json"
    redirect_url = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    async def swagger() -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} API",
            oauth2_redirect_url=redirect_url,
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
            # Swagger UI would otherwise send the document to its public validator for a badge
            swagger_ui_parameters={"validatorUrl": None},
        )
        return _confined(page)

    async def redirect() -> HTMLResponse:
        return _confined(get_swagger_ui_oauth2_redirect_html())

    async def redoc() -> HTMLResponse:
        page = get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} API",
            redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png",
            with_google_fonts=False,
        )
        return _confined(page)

    app.add_api_route("/docs", swagger, methods=["GET"], include_in_schema=False)
    app.add_api_route(redirect_url, redirect, methods=["GET"], include_in_schema=False)
    app.add_api_route("/redoc", redoc, methods=["GET"], include_in_schema=False)


def _confined(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = POLICY
    return page
