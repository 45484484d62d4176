"""Signing in to the dashboard when the service's auth is on.

A person signs in with a `read` or `admin` API key at `/login`; the key is kept in an HttpOnly,
SameSite=Strict cookie (`holter_key`), which the API itself also accepts. `SignInGate`, a pure
ASGI middleware, then
* sends page requests without a valid cookie to `/login?next=<path>` (Dash's own callback and
  layout requests get a 401 instead), and
* puts the cookie's key into a context variable for the request, from which the dashboard's API
  client (`api.py`) sends it on as `Authorization: Bearer <key>`: the dashboard reads exactly what
  the signed-in key may read (its scope and its project), through the same checks as any client.

Whether auth is on and who a key is are the service's answer to `GET /api/v1/keys/me`, asked
through the dashboard's API client: sign-in works the same against the service the dashboard is
mounted in and against a remote one (`HOLTER_DASHBOARD_API_URL`), and the dashboard never opens
the database.

With auth off (`HOLTER_AUTH=off`, or `auto` on loopback with no keys) nothing is asked and
`/login` just leads to the dashboard.
"""

from __future__ import annotations

import html
from urllib.parse import parse_qs, quote, urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Receive, Scope, Send

from holter_dashboard.api import ApiError, HolterAPI, KeyIdentity, signed_in

COOKIE = "holter_key"
COOKIE_MAX_AGE = 30 * 24 * 3600  # a month; signing out or revoking the key ends it sooner
DASHBOARD_SCOPES = ("read", "admin")  # an ingest key is a training job's, not a person's
MAX_FORM_BYTES = 16 * 1024

# Paths the gate leaves alone: the API (it checks keys itself), its docs, Dash's static files, the
# sign-in pages. Dash's callback and layout requests are checked, but answered 401, not redirected.
OPEN_PREFIXES = ("/api/", "/assets/", "/_dash-component-suites/", "/_holter/docs/")
OPEN_PATHS = {
    "/api",
    "/docs",
    "/docs/oauth2-redirect",
    "/redoc",
    "/openapi.json",
    "/_favicon.ico",
    "/favicon.ico",
    "/login",
    "/logout",
}
DASH_PREFIX = "/_dash-"


def safe_next(value: str | None) -> str:
    """Where to go after signing in: a path on this site, never another host (`//evil`, `/\\evil`,
    `https://evil`), nor the sign-in pages themselves; anything else is `/`."""
    if not value or not value.startswith("/") or len(value) > 2048:
        return "/"
    if any(ord(c) < 0x20 or c in "\\\x7f" for c in value):  # browsers read "\" as "/" and drop tabs and newlines
        return "/"
    parts = urlsplit(value)
    if value.startswith("//") or parts.scheme or parts.netloc:
        return "/"
    if parts.path in ("/login", "/logout"):
        return "/"
    return value


def may_use_dashboard(identity: KeyIdentity | None) -> bool:
    return identity is not None and identity.scope in DASHBOARD_SCOPES


async def check(api: HolterAPI, token: str | None) -> tuple[bool, KeyIdentity | None]:
    """(auth on?, who `token` is), as the service answers `GET /keys/me`: a 401 is a missing,
    unknown or revoked key. Through the API client, so it works the same on the service the
    dashboard is mounted in and on a remote one (`HOLTER_DASHBOARD_API_URL`)."""
    try:
        identity = await api.who_am_i(token)
    except ApiError as exc:
        if exc.status == 401:
            return True, None
        raise
    return identity.auth, identity if identity.auth else None


def _is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


class SignInGate:
    """Pure ASGI middleware (a context variable set here is seen by the route and by the Dash
    callbacks it runs, which `BaseHTTPMiddleware` would not guarantee)."""

    def __init__(self, app: ASGIApp, *, api: HolterAPI) -> None:
        self.app = app
        self.api = api

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        key = _cookie(scope)
        path: str = scope["path"]
        if not _is_open(path):
            try:
                enabled, identity = await check(self.api, key)
            except ApiError as exc:  # the service (a remote one) cannot say who this is: let no one in
                await _unavailable(scope, exc)(scope, receive, send)
                return
            if enabled and not may_use_dashboard(identity):
                if scope["type"] == "websocket":  # Dash's callback socket: refused at the handshake (HTTP 403)
                    await send({"type": "websocket.close", "code": 1008, "reason": "sign in to the dashboard: /login"})
                    return
                await _refuse(scope, path, had_cookie=key is not None)(scope, receive, send)
                return
        with signed_in(key):
            await self.app(scope, receive, send)


def _cookie(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"cookie":
            found = cookie_parser(value.decode("latin-1")).get(COOKIE)
            if found:
                return found
    return None


def _unavailable(scope: Scope, problem: ApiError) -> ASGIApp:
    """What a request gets when the service cannot say who its key is: 503, or a socket closed."""
    if scope["type"] == "websocket":
        return _SocketClose("the Holter API did not answer")
    return JSONResponse({"detail": f"cannot check the sign-in: {problem.message}"}, status_code=503)


class _SocketClose:
    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "websocket.close", "code": 1011, "reason": self.reason})


def _refuse(scope: Scope, path: str, *, had_cookie: bool) -> Response:
    response: Response
    if path.startswith(DASH_PREFIX) or scope["method"] not in ("GET", "HEAD"):
        response = JSONResponse({"detail": "sign in to the dashboard: /login"}, status_code=401)
    else:
        query = scope.get("query_string", b"").decode("latin-1")
        target = safe_next(path + (f"?{query}" if query else ""))
        response = RedirectResponse(
            "/login" + ("" if target == "/" else f"?next={quote(target, safe='')}"), status_code=303
        )
    if had_cookie:  # unknown, revoked or not a dashboard key: forget it
        response.delete_cookie(COOKIE, path="/")
    return response


# --- the pages --------------------------------------------------------------------------------


def add_routes(app: FastAPI, api: HolterAPI) -> None:
    """`GET/POST /login`, `GET /logout`. Add them before Dash, whose catch-all serves every other GET."""

    async def login_form(request: Request) -> Response:
        target = safe_next(request.query_params.get("next"))
        try:
            enabled, identity = await check(api, request.cookies.get(COOKIE))
        except ApiError as exc:
            return _page(target, error=f"The Holter API cannot check keys now: {exc.message}", status=503)
        if not enabled or may_use_dashboard(identity):
            return RedirectResponse(target, status_code=303)
        return _page(target)

    async def login(request: Request) -> Response:
        form = await _form(request)
        target = safe_next(form.get("next"))
        if from_another_site(request):
            return _page(target, error="This sign-in was sent from another site; sign in here instead.", status=403)
        key = form.get("key", "").strip()
        try:
            enabled, identity = await check(api, key or None)
        except ApiError as exc:
            return _page(target, error=f"The Holter API cannot check keys now: {exc.message}", status=503)
        if not enabled:
            return RedirectResponse(target, status_code=303)
        if identity is None:
            return _page(
                target, error="That key is unknown or has been revoked." if key else "Enter an API key.", status=401
            )
        if not may_use_dashboard(identity):
            return _page(
                target,
                error=f"This is an {identity.scope} key (for training jobs): the dashboard needs a read or admin key.",
                status=403,
            )
        response = RedirectResponse(target, status_code=303)
        secure = (
            request.url.scheme == "https"
            or request.headers.get("x-forwarded-proto", "").split(",")[0].strip() == "https"
        )
        response.set_cookie(
            COOKIE, key, max_age=COOKIE_MAX_AGE, path="/", httponly=True, samesite="strict", secure=secure
        )
        return response

    async def logout(request: Request) -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    app.add_api_route("/login", login_form, methods=["GET"], include_in_schema=False)
    app.add_api_route("/login", login, methods=["POST"], include_in_schema=False)
    app.add_api_route("/logout", logout, methods=["GET", "POST"], include_in_schema=False)


def from_another_site(request: Request) -> bool:
    """Whether a browser posted this form from another site: a page elsewhere could otherwise sign
    a visitor in with the page's own key (login CSRF) and read what they then annotate.

    Browsers say where a request comes from in `Sec-Fetch-Site`, older ones in `Origin`; a
    request with neither is no browser's form post (curl, a script) and is let through.
    """
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site not in ("same-origin", "none")
    origin = request.headers.get("origin")
    if not origin:
        return False
    return origin == "null" or urlsplit(origin).netloc != request.headers.get("host")


async def _form(request: Request) -> dict[str, str]:
    """A small url-encoded form, parsed here (no python-multipart needed)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return {}
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items()}


def _page(target: str, *, error: str | None = None, status: int = 200) -> HTMLResponse:
    body = PAGE.format(
        next=html.escape(target, quote=True), error=html.escape(error or ""), error_hidden="" if error else " hidden"
    )
    return HTMLResponse(
        body,
        status_code=status,
        headers={
            "Cache-Control": "no-store",
            "X-Frame-Options": "DENY",
            "Content-Security-Policy": (
                "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
            ),
            "Referrer-Policy": "same-origin",
        },
    )


# Self-contained (no Dash, no assets): the dashboard's look, the indigo of its theme.
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · Holter</title>
<style>
  * {{ box-sizing: border-box; }}
  body {{ margin: 0; min-height: 100vh; display: flex; align-items: center; justify-content: center;
         background: #f8f9fa; color: #212529; font-family: Inter, -apple-system, 'Segoe UI', Roboto, sans-serif; }}
  .card {{ width: 360px; background: #fff; border: 1px solid #dee2e6; border-radius: 8px; padding: 28px 24px;
          box-shadow: 0 1px 3px rgba(0,0,0,.05), 0 1px 2px rgba(0,0,0,.1); }}
  .brand {{ display: flex; align-items: center; gap: 6px; margin-bottom: 4px; }}
  .heart {{ color: #e03131; font-size: 22px; }}
  .name {{ font-weight: 700; font-size: 18px; }}
  .hint {{ color: #868e96; font-size: 13px; margin: 0 0 20px; }}
  .hint code {{ white-space: nowrap; }}
  label {{ display: block; font-size: 14px; font-weight: 500; margin-bottom: 4px; }}
  input[type=password] {{ width: 100%; height: 36px; padding: 0 12px; font-size: 14px; border: 1px solid #ced4da;
                          border-radius: 8px; outline: none; font-family: inherit; }}
  input[type=password]:focus {{ border-color: #4c6ef5; }}
  button {{ width: 100%; height: 36px; margin-top: 16px; border: 0; border-radius: 8px; background: #4c6ef5;
           color: #fff; font-size: 14px; font-weight: 600; cursor: pointer; font-family: inherit; }}
  button:hover {{ background: #4263eb; }}
  .error {{ color: #e03131; font-size: 13px; margin: 10px 0 0; }}
  .error[hidden] {{ display: none; }}
</style>
</head>
<body>
<form class="card" method="post" action="/login">
  <div class="brand"><span class="heart">&#9829;</span><span class="name">Holter</span></div>
  <p class="hint">Sign in with a read or admin API key (<code>holter keys create</code>).</p>
  <input type="hidden" name="next" value="{next}">
  <label for="key">API key</label>
  <input type="password" id="key" name="key" autocomplete="current-password" autofocus required>
  <p class="error" id="login-error" role="alert"{error_hidden}>{error}</p>
  <button type="submit" id="sign-in">Sign in</button>
</form>
</body>
</html>
"""


def install(app: FastAPI, api: HolterAPI) -> None:
    """The sign-in routes and the gate, asking the service behind `api` who a key is; call before Dash is mounted."""
    add_routes(app, api)
    app.add_middleware(SignInGate, api=api)
