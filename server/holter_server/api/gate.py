"""The gate every request to the service passes before anything else runs: pure ASGI middleware.

Everything the service serves that is no API route (the dashboard's pages, its callbacks and
their websocket, its assets, the docs): with auth off (the loopback default), a `Host` that is
not this service's own is refused with 421, as the API refuses it (step 3), so a page elsewhere
cannot read or write through the dashboard by DNS rebinding.

An API request, in this order, each step before the request's body is read:
1. the route's entry in the access table (`api/access.py`); a path that is no API route passes
   on (404/405, no body read);
2. a declared body larger than the route's limit: 413; more than `MAX_NAMED_IDS` distinct ids
   named in the path and query, or one holding NUL or a lone surrogate: 422, before any of them
   is looked up;
3. with auth off (the loopback default): a `Host` that is not this machine's (DNS rebinding),
   a cross-site write (`Origin`, `Sec-Fetch-Site`) and a body that is not the route's JSON (or
   msgpack for points) are refused, so a web page elsewhere cannot write;
4. the key (401/403); a write that carries its key in the dashboard's cookie must come from
   this origin (`Origin`, `Sec-Fetch-Site`: a form on a sibling site sends the cookie too); and
   every run, channel, rule, delivery, key or project named in the path or query bound to the
   key's project (404 for another project's things, never their names), runs in one statement;
5. the body, read whole into one buffer under the route's limit (413 as soon as it passes) and
   an idle timeout (408), before the route opens any database session — a client trickling its
   body holds a socket, never a pooled connection; ids the body names are then bound as in 4.

The route then sees the buffered body, and `request.state.principal`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qsl, urlsplit

import anyio
from fastapi import FastAPI
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from holter_server.alerts import image_links
from holter_server.api.access import API_PREFIX, RouteAccess, match
from holter_server.api.bad_input import unstorable
from holter_server.services.auth import (
    NOT_FOUND,
    OPEN,
    ROW_ID_RULE,
    Principal,
    authenticate,
    is_loopback,
    projects_of,
    row_id,
)
from holter_server.settings import Settings
from holter_server.wire import MSGPACK_TYPES, UNSTORABLE

BODY_STATE = "holter.body"  # the scope key holding the buffered body (the points route reads it without a copy)
NO_BODY_LIMIT = 16 * 1024  # routes without a body: whatever a client sends with them is small
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
SIGNED_IMAGE_PATH = "/runs/{run_id}/events/{event_id}/sparkline.png"
# Distinct ids one request may name in its path and query (a levers selection takes at most 500
# runs); more is refused before any is looked up, so a long query string costs no database time.
MAX_NAMED_IDS = 500


def unknown(kind: str, value: str) -> str:
    """The one answer for a thing that does not exist or is another project's (never which)."""
    return f"unknown {kind} {value!r}"


class Refused(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers or {}


# A route the gate answers itself once it has admitted the request and read its body: the app,
# the scope (the body under `BODY_STATE`, the principal in its state), receive, send, and the
# path's parameters.
DirectRoute = Callable[[FastAPI, Scope, Receive, Send, dict[str, str]], Awaitable[None]]


class Gate:
    def __init__(
        self, app: ASGIApp, *, holter_app: FastAPI, direct: dict[tuple[str, str], DirectRoute] | None = None
    ) -> None:
        self.app = app
        self.holter_app = holter_app
        self.direct = direct or {}
        # requests under way per API key (read and changed on the event loop only)
        self._in_flight: dict[int, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        found = match(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if found is None or not scope["path"].startswith(API_PREFIX + "/"):
            # the dashboard, its socket, assets, docs, and paths that are no API route
            if await self._foreign_host(scope, receive, send):
                return
            await self.app(scope, receive, send)
            return
        route, path_params = found
        settings: Settings = self.holter_app.state.settings
        headers = _headers(scope)
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        try:
            limit = body_limit(route, settings)
            declared = headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise Refused(
                    413, f"request body of {int(declared):,} bytes exceeds the limit of {limit:,} for this route"
                )
            has_body = (declared.isdigit() and int(declared) > 0) or "chunked" in headers.get("transfer-encoding", "")
            named = named_ids(route, path_params, query)
            if self.holter_app.state.auth_mode.known() is False:
                # auth off (the loopback default): admission reads no database, so it runs here,
                # not in a thread of its own (a hand-off each way per request)
                principal = self._admit_open(route, headers, has_body)
            else:
                principal = await run_in_threadpool(self._admit, route, named, path_params, query, headers, has_body)
            body = (
                await read_body(receive, limit, idle=settings.body_timeout, total=settings.body_total_timeout)
                if has_body
                else bytearray()
            )
            if route.body_ids and principal.project is not None and body:
                await run_in_threadpool(self._bind_body, route, principal, body)
        except Refused as refusal:
            await _answer(send, refusal)
            return
        scope.setdefault("state", {})["principal"] = principal
        scope[BODY_STATE] = body
        key = principal.key_id
        if key is not None:
            # one key's flood takes at most its share of the service's threads and connections to
            # the database; the others' requests go on (issue 47: another project's read went from
            # 6 ms to 200 ms). The client takes a 429 as "try again" and spools meanwhile.
            if self._in_flight.get(key, 0) >= settings.max_requests_per_key:
                await _answer(
                    send,
                    Refused(
                        429,
                        f"this key has {settings.max_requests_per_key} requests under way, the most one key may "
                        "(HOLTER_MAX_REQUESTS_PER_KEY); try again in a moment",
                        {"Retry-After": "1"},
                    ),
                )
                return
            self._in_flight[key] = self._in_flight.get(key, 0) + 1
        try:
            direct = self.direct.get((route.method, route.path))
            if direct is not None:
                # the ingest route, answered here without the layers below (routing, dependencies,
                # the dashboard's middleware), as its route answers (api/routes/points.py)
                await direct(self.holter_app, scope, _replay(body, receive), send, path_params)
                return
            await self.app(scope, _replay(body, receive), send)
        finally:
            if key is not None:
                left = self._in_flight.pop(key) - 1
                if left:
                    self._in_flight[key] = left

    # --- not the API ----------------------------------------------------------------------

    async def _foreign_host(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """With auth off, refuse (421) a page, callback, socket or asset asked for under a `Host`
        that is not this service's: True when it was refused and answered here."""
        auth_mode = self.holter_app.state.auth_mode
        enabled = auth_mode.known()
        if enabled is None:  # `auto` mode, due to count the keys again
            enabled = await run_in_threadpool(self._auth_enabled)
        if enabled:
            return False
        try:
            self._known_host(_headers(scope))
        except Refused as refusal:
            if scope["type"] == "websocket":
                await receive()  # the handshake's websocket.connect, answered below
                await _refuse_socket(scope, send, refusal)
            else:
                await _answer(send, refusal)
            return True
        return False

    # --- before the body ------------------------------------------------------------------

    def _auth_enabled(self) -> bool:
        session: Session = self.holter_app.state.session_factory()
        try:
            return self.holter_app.state.auth_mode.enabled(session)
        finally:
            session.close()

    def _admit_open(self, route: RouteAccess, headers: dict[str, str], has_body: bool) -> Principal:
        """`_admit` when auth is known to be off: only this machine may call, and it is admitted."""
        self._same_machine_only(route, headers, has_body)
        return OPEN

    def _admit(
        self,
        route: RouteAccess,
        named: list[tuple[str, str]],
        path_params: dict[str, str],
        query: list[tuple[str, str]],
        headers: dict[str, str],
        has_body: bool,
    ) -> Principal:
        """Who is calling, with every id of the path and query bound to their project. Blocking: a thread."""
        session: Session = self.holter_app.state.session_factory()
        try:
            if not self.holter_app.state.auth_mode.enabled(session):
                return self._admit_open(route, headers, has_body)
            if route.scope == "open":
                return OPEN
            if route.path == SIGNED_IMAGE_PATH and self._signed_image(session, path_params, dict(query)):
                return Principal(scope="read", project=None)
            token, from_cookie = _presented_key(headers)
            principal = (
                authenticate(session=session, token=token, settings=self.holter_app.state.settings) if token else None
            )
            if principal is None:
                raise Refused(
                    401,
                    "an API key is needed: Authorization: Bearer <key>" if not token else "unknown or revoked API key",
                    {"WWW-Authenticate": "Bearer"},
                )
            if from_cookie and route.method in WRITE_METHODS:
                self._same_origin_only(headers)
            if route.scope != "any" and not principal.allows(route.scope):
                raise Refused(403, f"this key's scope is {principal.scope!r}; this needs {route.scope!r}")
            if principal.project is not None:
                _bind(session, principal, named)
            return principal
        finally:
            session.close()

    def _allowed_hosts(self) -> set[str]:
        """The names besides loopback this service answers to: HOLTER_ALLOWED_HOSTS and the public URL's."""
        settings: Settings = self.holter_app.state.settings
        allowed = {name.lower() for name in settings.allowed_hosts}
        if settings.public_url:
            allowed.add((urlsplit(settings.public_url).hostname or "").lower())
        return allowed

    def _known_host(self, headers: dict[str, str]) -> None:
        """Refuse (421) a `Host` that is not this service's when it listens on loopback (or names
        its hosts): a page on another name that resolves here (DNS rebinding) must not be served."""
        settings: Settings = self.holter_app.state.settings
        allowed = self._allowed_hosts()
        if is_loopback(settings.host) or allowed:
            host = _hostname(headers.get("host", ""))
            if not (is_loopback(host) or host in allowed):
                raise Refused(
                    421, f"this service answers to loopback names only, not Host {host!r} (HOLTER_ALLOWED_HOSTS)"
                )

    def _same_machine_only(self, route: RouteAccess, headers: dict[str, str], has_body: bool) -> None:
        """With auth off, only this machine may call: a page elsewhere in a browser must not (DNS
        rebinding through `Host`, cross-site writes through `Origin`, CORS-free `text/plain` posts)."""
        self._known_host(headers)
        allowed = self._allowed_hosts()
        if route.method in WRITE_METHODS:
            origin = headers.get("origin")
            if (
                origin is not None
                and origin != "null"
                and not (
                    is_loopback(_hostname(urlsplit(origin).netloc)) or _hostname(urlsplit(origin).netloc) in allowed
                )
            ):
                raise Refused(403, f"cross-site write from {origin!r} refused")
            if origin == "null" or headers.get("sec-fetch-site") == "cross-site":
                raise Refused(403, "cross-site write refused")
            if has_body and not _accepted_type(route, headers.get("content-type", "")):
                raise Refused(
                    415,
                    "the body must be application/json" + (" or application/msgpack" if route.body == "points" else ""),
                )

    def _same_origin_only(self, headers: dict[str, str]) -> None:
        """A write signed by the dashboard's cookie must come from this service's own pages. The
        cookie is SameSite=Strict, which still lets a page of the same site on another origin (a
        sibling port or subdomain) post a form with it; the browser says where a request comes
        from in `Sec-Fetch-Site`, older ones in `Origin`."""
        fetch_site = headers.get("sec-fetch-site")
        if fetch_site is not None and fetch_site not in ("same-origin", "none"):
            raise Refused(403, f"a write signed by the sign-in cookie from a {fetch_site} page is refused")
        origin = headers.get("origin")
        if origin is None:
            return  # no browser's write (browsers send Origin with every POST, PUT, PATCH and DELETE)
        netloc = urlsplit(origin).netloc.lower()
        public = urlsplit(self.holter_app.state.settings.public_url or "").netloc.lower()
        if origin == "null" or netloc not in {headers.get("host", "").lower(), public} - {""}:
            raise Refused(403, f"a write signed by the sign-in cookie from {origin!r} is refused (not this origin)")

    def _signed_image(self, session: Session, path_params: dict[str, str], query: dict[str, str]) -> bool:
        return image_links.verify(
            session=session,
            run_id=path_params.get("run_id", ""),
            event_id=path_params.get("event_id", ""),
            expires=query.get("expires", ""),
            signature=query.get("sig", ""),
        )

    # --- after the body -------------------------------------------------------------------

    def _bind_body(self, route: RouteAccess, principal: Principal, body: bytearray) -> None:
        try:
            document = json.loads(body)
        except (ValueError, RecursionError):
            return  # the route answers a body it cannot read
        if not isinstance(document, dict):
            return
        named = [(document[name], kind) for name, kind in route.body_ids.items() if document.get(name) is not None]
        for value, kind in named:
            if kind not in ("run", "project") and (type(value) is not int or row_id(str(value)) is None):
                # a row is named by a JSON number and nothing else: "1", 1.0 or true would pass here
                # as no row and be read as row 1 by a lenient schema
                raise Refused(422, f"body: {value!r} is not an id: {ROW_ID_RULE}")
        named = [
            (str(value), kind) for value, kind in named if isinstance(value, (str, int)) and not isinstance(value, bool)
        ]
        if any(UNSTORABLE.search(value) for value, _kind in named):
            return  # the route refuses the text (api/bad_input.py) before any lookup
        session: Session = self.holter_app.state.session_factory()
        try:
            _bind(session, principal, named, naming=False)
        finally:
            session.close()


def body_limit(route: RouteAccess, settings: Settings) -> int:
    """The most bytes the route's body may hold."""
    if route.body == "points":
        return settings.max_body_bytes
    if route.body == "run":  # a run's config has its own limit, checked by the route with its own message
        return max(settings.max_json_body_bytes, settings.max_config_bytes + 64 * 1024)
    if route.body == "json":
        return settings.max_json_body_bytes
    return NO_BODY_LIMIT


def _accepted_type(route: RouteAccess, content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (route.body == "points" and media in MSGPACK_TYPES)


def named_ids(route: RouteAccess, path_params: dict[str, str], query: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Every (id, kind) the path and query name, each once: 422 for more than `MAX_NAMED_IDS`, or
    for an id holding text no store can hold (it could only fail inside the database). Nothing
    is looked up here."""
    named: dict[tuple[str, str], None] = {}
    raw = [(path_params.get(name), kind, f"path.{name}") for name, kind in route.path_ids.items()]
    raw += [(value, route.query_ids[name], f"query.{name}") for name, value in query if name in route.query_ids]
    for text, kind, where in raw:
        if not text:
            continue
        if (problem := unstorable(text, where)) is not None:
            raise Refused(422, problem)  # as the routes' own check says it (api/bad_input.py)
        if kind not in ("run", "project") and row_id(text) is None:
            # one spelling for the gate and the route: "+1" or "1.0" must not pass as no row here
            # and be read as row 1 by the route (api/deps.py RowId)
            raise Refused(422, f"{where}: {text!r} is not an id: {ROW_ID_RULE}")
        # runs may be named as a comma-separated list
        for value in (part for part in text.split(",") if part) if kind == "run" else (text,):
            named[(value, kind)] = None
            if len(named) > MAX_NAMED_IDS:
                raise Refused(422, f"this request names more than {MAX_NAMED_IDS} ids; name fewer")
    return list(named)


def _bind(session: Session, principal: Principal, named: list[tuple[str, str]], *, naming: bool = True) -> None:
    """Refuse an id of another project's (`naming`: the ids a path or query names, of things that
    must exist, where one that does not is refused the same way: a key learns nothing of which it
    is; a body's ids may name a thing to make, a run to create)."""
    by_kind: dict[str, list[str]] = {}
    for value, kind in named:
        if kind == "project":
            if value != principal.project:
                raise Refused(403, f"this key is for project {principal.project!r}, not {value!r}")
            continue
        by_kind.setdefault(kind, []).append(value)
    for kind, values in by_kind.items():
        for value, owner in projects_of(session=session, kind=kind, values=values).items():
            if (owner is NOT_FOUND and naming) or (owner is not NOT_FOUND and owner != principal.project):
                raise Refused(404, unknown(kind, value))  # not even whether it exists


async def read_body(receive: Receive, limit: int, *, idle: float, total: float) -> bytearray:
    """The whole body in one buffer: 413 as soon as it passes `limit`, 408 when the client pauses
    longer than `idle` seconds or takes longer than `total`."""
    body = bytearray()
    deadline = time.monotonic() + total
    while True:
        wait = min(idle, deadline - time.monotonic())
        message: Message | None = None
        with anyio.move_on_after(max(wait, 0)):
            message = await receive()
        if message is None:
            raise Refused(
                408,
                f"the request body did not arrive in time (a pause of over {idle:g} s, or over {total:g} s in all)",
                {"Connection": "close"},
            )
        if message["type"] == "http.disconnect":
            raise Refused(400, "the client went away before its body arrived")
        body += message.get("body", b"")
        if len(body) > limit:
            raise Refused(
                413, f"request body exceeds the limit of {limit:,} bytes for this route", {"Connection": "close"}
            )
        if not message.get("more_body", False):
            return body


def _replay(body: bytearray, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: the disconnect, when it comes

    return replayed


def _headers(scope: Scope) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        found.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return found


# A Host header as RFC 9110 has it: a name, an IPv4 address or a bracketed IPv6 one, and at most a
# port. Anything else (`127.0.0.1:1@evil`, `localhost:1, evil`: no browser sends such) names no host.
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(:[0-9]{1,5})?")


def _hostname(host: str) -> str:
    """The host a `Host` header names, without its port; "" when it is not a well-formed one."""
    host = host.strip().lower()
    found = _HOST.fullmatch(host)
    if found is None:
        return ""
    name = found.group(1)
    return name[1:-1] if name.startswith("[") else name


def _presented_key(headers: dict[str, str]) -> tuple[str | None, bool]:
    """The key the request presents, and whether it came in the dashboard's sign-in cookie."""
    header = headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None, False
    if headers.get("x-api-key"):
        return headers["x-api-key"], False
    cookie = cookie_parser(headers.get("cookie", "")).get("holter_key") or None
    return cookie, cookie is not None


async def _refuse_socket(scope: Scope, send: Send, refusal: Refused) -> None:
    """Refuse a websocket at its handshake: the refusal's own HTTP answer where the server can
    send one, else a close before accepting (HTTP 403)."""
    if "websocket.http.response" in scope.get("extensions", {}):
        await _answer(send, refusal, prefix="websocket.")
    else:
        await send({"type": "websocket.close", "code": 1008, "reason": refusal.detail[:120]})


async def _answer(send: Send, refusal: Refused, *, prefix: str = "") -> None:
    # spelled as the routes' own JSON answers are (starlette's JSONResponse), byte for byte: a
    # refusal here and a route's must not tell apart what the gate knows and the route does not
    body = json.dumps({"detail": refusal.detail}, ensure_ascii=False, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(name.lower().encode(), value.encode()) for name, value in refusal.headers.items()]
    await send({"type": f"{prefix}http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": f"{prefix}http.response.body", "body": body})
