"""The gate every API request passes before any route runs: pure ASGI middleware.

In this order, each step before the request's body is read:
1. the route's entry in the access table (`api/access.py`); a path that is no API route passes
   on (404/405, no body read);
2. a declared body larger than the route's limit: 413;
3. with auth off (the loopback default): a `Host` that is not this machine's (DNS rebinding),
   a cross-site write (`Origin`, `Sec-Fetch-Site`) and a body that is not the route's JSON (or
   msgpack for points) are refused, so a web page elsewhere cannot write;
4. the key (401/403), and every run, channel, rule, delivery, key or project named in the path
   or query bound to the key's project (404 for another project's things, never their names);
5. the body, read whole into one buffer under the route's limit (413 as soon as it passes) and
   an idle timeout (408), before the route opens any database session — a client trickling its
   body holds a socket, never a pooled connection; ids the body names are then bound as in 4.

The route then sees the buffered body, and `request.state.principal`.
"""

from __future__ import annotations

import json
import time
from urllib.parse import parse_qsl, urlsplit

import anyio
from fastapi import FastAPI
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from holter_server.alerts import image_links
from holter_server.api.access import API_PREFIX, RouteAccess, match
from holter_server.services.auth import NOT_FOUND, OPEN, Principal, authenticate, is_loopback, project_of
from holter_server.settings import Settings
from holter_server.wire import MSGPACK_TYPES

BODY_STATE = "holter.body"  # the scope key holding the buffered body (the points route reads it without a copy)
NO_BODY_LIMIT = 16 * 1024  # routes without a body: whatever a client sends with them is small
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
SIGNED_IMAGE_PATH = "/runs/{run_id}/events/{event_id}/sparkline.png"


class Refused(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers or {}


class Gate:
    def __init__(self, app: ASGIApp, *, holter_app: FastAPI) -> None:
        self.app = app
        self.holter_app = holter_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(API_PREFIX + "/"):
            await self.app(scope, receive, send)
            return
        found = match(scope["method"], scope["path"])
        if found is None:
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
            principal = await run_in_threadpool(self._admit, route, path_params, query, headers, has_body)
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
        await self.app(scope, _replay(body, receive), send)

    # --- before the body ------------------------------------------------------------------

    def _admit(
        self,
        route: RouteAccess,
        path_params: dict[str, str],
        query: list[tuple[str, str]],
        headers: dict[str, str],
        has_body: bool,
    ) -> Principal:
        """Who is calling, with every id of the path and query bound to their project. Blocking: a thread."""
        session: Session = self.holter_app.state.session_factory()
        try:
            enabled = self.holter_app.state.auth_mode.enabled(session)
            if not enabled:
                self._same_machine_only(route, headers, has_body)
            if route.scope == "open":
                return OPEN
            if not enabled:
                return OPEN
            if route.path == SIGNED_IMAGE_PATH and self._signed_image(session, path_params, dict(query)):
                return Principal(scope="read", project=None)
            token = _presented_key(headers)
            principal = (
                authenticate(session=session, token=token, settings=self.holter_app.state.settings) if token else None
            )
            if principal is None:
                raise Refused(
                    401,
                    "an API key is needed: Authorization: Bearer <key>" if not token else "unknown or revoked API key",
                    {"WWW-Authenticate": "Bearer"},
                )
            if route.scope != "any" and not principal.allows(route.scope):
                raise Refused(403, f"this key's scope is {principal.scope!r}; this needs {route.scope!r}")
            if principal.project is not None:
                named = [(path_params.get(name), kind) for name, kind in route.path_ids.items()]
                named += [(value, route.query_ids[name]) for name, value in query if name in route.query_ids]
                _bind(session, principal, [(value, kind) for raw, kind in named if raw for value in _ids(raw, kind)])
            return principal
        finally:
            session.close()

    def _same_machine_only(self, route: RouteAccess, headers: dict[str, str], has_body: bool) -> None:
        """With auth off, only this machine may call: a page elsewhere in a browser must not (DNS
        rebinding through `Host`, cross-site writes through `Origin`, CORS-free `text/plain` posts)."""
        settings: Settings = self.holter_app.state.settings
        allowed = {name.lower() for name in settings.allowed_hosts}
        if settings.public_url:
            allowed.add((urlsplit(settings.public_url).hostname or "").lower())
        if is_loopback(settings.host) or allowed:
            host = _hostname(headers.get("host", ""))
            if not (is_loopback(host) or host in allowed):
                raise Refused(
                    421, f"this service answers to loopback names only, not Host {host!r} (HOLTER_ALLOWED_HOSTS)"
                )
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
        session: Session = self.holter_app.state.session_factory()
        try:
            _bind(session, principal, [(str(value), kind) for value, kind in named if isinstance(value, (str, int))])
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


def _ids(raw: str, kind: str) -> list[str]:
    # runs may be named as a comma-separated list
    return [part for part in raw.split(",") if part] if kind == "run" else [raw]


def _bind(session: Session, principal: Principal, named: list[tuple[str, str]]) -> None:
    for value, kind in named:
        if kind == "project":
            if value != principal.project:
                raise Refused(403, f"this key is for project {principal.project!r}, not {value!r}")
            continue
        owner = project_of(session=session, kind=kind, value=value)
        if owner is not NOT_FOUND and owner != principal.project:
            raise Refused(404, f"unknown {kind} {value!r}")  # not even whether it exists


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


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _presented_key(headers: dict[str, str]) -> str | None:
    header = headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    if headers.get("x-api-key"):
        return headers["x-api-key"]
    return cookie_parser(headers.get("cookie", "")).get("holter_key") or None


async def _answer(send: Send, refusal: Refused) -> None:
    body = json.dumps({"detail": refusal.detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(name.lower().encode(), value.encode()) for name, value in refusal.headers.items()]
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
