"""The dashboard's only way to the data: Holter's HTTP API, through httpx.

By default the dashboard mounted in `holter serve` talks to the very service it is mounted in,
over an in-process ASGI transport: the same routes, validation and JSON as any other client,
without a socket or a guess at the service's public address (which may be 0.0.0.0, or behind a
proxy). Set `HOLTER_DASHBOARD_API_URL` to read from another Holter service over the network.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from holter_charts.vocabulary import Vocabulary

API_PREFIX = "/api/v1"
SERIES_PER_READ = 200  # the service takes at most 256 series per /series read

# The signed-in person's key for the request being served (set by login.SignInGate from the cookie)
_current_key: ContextVar[str | None] = ContextVar("holter_dashboard_key", default=None)


def current_key() -> str | None:
    """The signed-in person's key for the request being served (None: no one signed in, or auth off)."""
    return _current_key.get()


@contextmanager
def signed_in(key: str | None) -> Iterator[None]:
    """API calls made inside send `key` as the caller's (`Authorization: Bearer`)."""
    token = _current_key.set(key)
    try:
        yield
    finally:
        _current_key.reset(token)


@dataclass(frozen=True)
class KeyIdentity:
    """Who a key is, as `GET /keys/me` answers (`auth` false: the service asks for no key)."""

    auth: bool
    scope: str
    project: str | None = None
    name: str | None = None
    id: int | None = None
    signs_as: str | None = None  # the name the service signs this key's notes and acknowledgements with


def metric_path(name: str) -> str:
    """A metric name as a path segment: any printable text is a name (`mfu(%)`, `loss?`, `a#b`),
    so everything but `/` is escaped, dots too (a client would read `../` as a step up)."""
    return quote(name, safe="/").replace(".", "%2E")


class ApiError(Exception):
    """An API call failed; `message` is fit to show a person."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class HolterAPI:
    """Async client for the read/write routes the dashboard uses.

    `base_url` is the service's address (ends before `/api/v1`); `transport` lets the mounted
    dashboard call its own app in-process (`httpx.ASGITransport`).
    """

    def __init__(
        self,
        base_url: str = "http://holter",
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._transport = transport
        self._timeout = timeout
        self._clients: dict[int, httpx.AsyncClient] = {}
        self._vocabulary: Vocabulary | None = None

    def _client(self) -> httpx.AsyncClient:
        # one client per event loop: an AsyncClient must not cross loops
        loop = id(asyncio.get_running_loop())
        client = self._clients.get(loop)
        if client is None:
            client = httpx.AsyncClient(
                base_url=self.base_url + API_PREFIX, transport=self._transport, timeout=self._timeout
            )
            self._clients[loop] = client
        return client

    def browser_url(self, path: str) -> str:
        """Where a browser finds an API path (a download): the page's own origin when the dashboard
        reads its own service in-process, else the remote service's address."""
        return (API_PREFIX if self._transport is not None else self.base_url + API_PREFIX) + path

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        clean = {k: v for k, v in (params or {}).items() if v is not None and v != ""}
        try:
            response = await self._client().request(
                method, path, params=clean, json=json, headers=_auth_headers() if headers is None else headers
            )
        except httpx.HTTPError as exc:
            raise ApiError(
                f"the Holter API at {self.base_url} did not answer: {exc.__class__.__name__} {exc}".strip()
            ) from exc
        if response.status_code >= 400:
            raise ApiError(_detail(response), response.status_code)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    # -- who a key is (sign-in)
    async def who_am_i(self, key: str | None) -> KeyIdentity:
        """Who `key` is (None: no key presented); an ApiError 401 for a missing, unknown or revoked key with auth on."""
        body = await self._request("GET", "/keys/me", headers={"Authorization": f"Bearer {key}"} if key else {})
        return KeyIdentity(
            auth=bool(body["auth"]),
            scope=body["scope"],
            project=body.get("project"),
            name=body.get("name"),
            id=body.get("id"),
            signs_as=body.get("signs_as"),
        )

    async def signature(self) -> str | None:
        """The name this reader's notes and acknowledgements are signed with, as the service signs
        them (`signs_as`: the key's name with auth on, "local" with it off; None when it cannot say)."""
        try:
            me = await self.who_am_i(current_key())
        except ApiError:
            return None
        if me.signs_as is not None:
            return me.signs_as
        return (me.name or "key") if me.auth else "local"  # a service older than `signs_as`

    # -- the vocabulary: read once, it changes only with the service's version
    async def vocabulary(self) -> Vocabulary:
        """Kinds, severities (with colours), statuses and panels, as the service defines them."""
        if self._vocabulary is None:
            self._vocabulary = Vocabulary.from_api(await self._request("GET", "/vocabulary"))
        return self._vocabulary

    # -- runs
    async def list_runs(self, **filters: Any) -> dict[str, Any]:
        return await self._request("GET", "/runs", params={"limit": 500, **filters})

    async def projects(self) -> list[dict[str, Any]]:
        """The projects that have runs, each with its runs and archived runs counted."""
        return await self._request("GET", "/projects")

    async def config_keys(self, project: str | None = None, contains: str | None = None) -> dict[str, Any]:
        """A bounded page of the dotted config keys the project's runs were created with."""
        params = {k: v for k, v in {"project": project, "contains": contains}.items() if v}
        return await self._request("GET", "/config-keys", params=params)

    async def get_run(self, run_id: str) -> dict[str, Any]:
        return await self._request("GET", f"/runs/{run_id}")

    async def update_run(self, run_id: str, **fields: Any) -> dict[str, Any]:
        return await self._request("PATCH", f"/runs/{run_id}", json=fields)

    async def delete_run(self, run_id: str) -> dict[str, Any]:
        """Delete a run and everything stored under it (an admin key's right)."""
        return await self._request("DELETE", f"/runs/{run_id}")

    async def archive_run(self, run_id: str, archived: bool = True) -> dict[str, Any]:
        """Archive a run (hidden from the runs list unless asked for), or bring it back."""
        return await self._request("POST", f"/runs/{run_id}/{'archive' if archived else 'unarchive'}")

    async def set_metric_kind(self, run_id: str, metric: str, kind: str | None) -> dict[str, Any]:
        """Say what a metric is (None: as its name says); the service analyses it again."""
        return await self._request("PATCH", f"/runs/{run_id}/metrics/{metric_path(metric)}", json={"kind": kind})

    # -- points
    async def points(
        self,
        run_id: str,
        metric: str,
        *,
        start: int | None = None,
        end: int | None = None,
        max_points: int | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """One metric's points; with `max_points` the service downsamples (min/max per bucket)."""
        return await self._request(
            "GET",
            f"/runs/{run_id}/metrics/{metric_path(metric)}/points",
            params={"start": start, "end": end, "max_points": max_points, "limit": limit},
        )

    async def many_points(
        self,
        run_id: str,
        metrics: list[str],
        *,
        start: int | None = None,
        end: int | None = None,
        max_points: int = 2000,
        with_times: bool = False,
    ) -> dict[str, dict[str, Any] | ApiError]:
        """Several metrics of a run in one read (`GET /series`), each downsampled to `max_points`
        (with the drawn points' wall times when `with_times`); a metric the run lacks comes back as an ApiError."""
        if not metrics:
            return {}
        if len(metrics) > SERIES_PER_READ:
            parts = await asyncio.gather(
                *(
                    self.many_points(
                        run_id,
                        metrics[i : i + SERIES_PER_READ],
                        start=start,
                        end=end,
                        max_points=max_points,
                        with_times=with_times,
                    )
                    for i in range(0, len(metrics), SERIES_PER_READ)
                )
            )
            return {k: v for part in parts for k, v in part.items()}
        params: list[tuple[str, Any]] = [("run", run_id), *(("metric", m) for m in metrics), ("max_points", max_points)]
        params += [(k, v) for k, v in (("start", start), ("end", end)) if v is not None]
        if with_times:
            params.append(("with_times", "true"))
        try:
            response = await self._client().get("/series", params=params, headers=_auth_headers())
        except httpx.HTTPError as exc:
            raise ApiError(
                f"the Holter API at {self.base_url} did not answer: {exc.__class__.__name__} {exc}".strip()
            ) from exc
        if response.status_code >= 400:
            raise ApiError(_detail(response), response.status_code)
        body = response.json()
        out: dict[str, dict[str, Any] | ApiError] = {item["metric"]: item for item in body["data"]}
        for missing in body.get("missing", []):
            out[missing["metric"]] = ApiError(f"run {run_id!r} has no metric {missing['metric']!r}", 404)
        return out

    # -- the ranks of a distributed job's run
    async def ranks(self, run_id: str) -> dict[str, Any]:
        """Where each rank of the run's job stands (`data`: status, life, step, collective,
        stack, timings), and its ranks by host (`hosts`)."""
        return await self._request("GET", f"/runs/{run_id}/ranks")

    async def rank_matrix(
        self,
        run_id: str,
        metric: str,
        *,
        max_buckets: int = 200,
        stat: str = "mean",
        start: int | None = None,
        end: int | None = None,
    ) -> dict[str, Any]:
        """`metric` of every rank (rank 0's under its own name) as a ranks × step-buckets matrix
        (`ranks`, `bucket_starts`, `bucket_width`, `values`: a row per rank)."""
        return await self._request(
            "GET",
            f"/runs/{run_id}/ranks/matrix",
            params={"metric": metric, "max_buckets": max_buckets, "stat": stat, "start": start, "end": end},
        )

    # -- events
    async def run_events(self, run_id: str, **filters: Any) -> list[dict[str, Any]]:
        return (await self._request("GET", f"/runs/{run_id}/events", params=filters))["data"]

    async def run_incidents(self, run_id: str) -> list[dict[str, Any]]:
        return (await self._request("GET", f"/runs/{run_id}/incidents"))["data"]

    async def events(self, **filters: Any) -> list[dict[str, Any]]:
        return (await self._request("GET", "/events", params={"limit": 1000, **filters}))["data"]

    # Notes and decisions on events are signed with `signature()`: a service that signs them by the
    # key itself ignores the name sent; an older one stores it (the same name).
    async def acknowledge(self, run_id: str, event_id: int, *, reason: str) -> dict[str, Any]:
        return await self._request(
            "POST",
            f"/runs/{run_id}/events/{event_id}/acknowledge",
            json={"by": await self.signature() or "local", "reason": reason},
        )

    async def dismiss(self, run_id: str, event_id: int, *, reason: str, mute: bool = False) -> dict[str, Any]:
        return await self._request(
            "POST",
            f"/runs/{run_id}/events/{event_id}/dismiss",
            json={"by": await self.signature() or "local", "reason": reason, "mute": mute},
        )

    # -- annotations
    async def annotations(self, run_id: str) -> list[dict[str, Any]]:
        return (await self._request("GET", f"/runs/{run_id}/annotations"))["data"]

    async def add_annotation(self, run_id: str, **fields: Any) -> dict[str, Any]:
        fields = {"author": await self.signature() or "local", **fields}
        return await self._request(
            "POST", f"/runs/{run_id}/annotations", json={k: v for k, v in fields.items() if v is not None}
        )

    async def delete_annotation(self, run_id: str, annotation_id: int) -> None:
        await self._request(
            "DELETE",
            f"/runs/{run_id}/annotations/{annotation_id}",
            params={"author": await self.signature() or "local"},
        )

    # -- alerts: channels, rules, deliveries
    async def channels(self) -> list[dict[str, Any]]:
        return await self._request("GET", "/channels")

    async def add_channel(self, **fields: Any) -> dict[str, Any]:
        return await self._request("POST", "/channels", json={k: v for k, v in fields.items() if v not in (None, "")})

    async def delete_channel(self, channel_id: int) -> None:
        await self._request("DELETE", f"/channels/{channel_id}")

    async def test_channel(self, channel_id: int) -> dict[str, Any]:
        """Send a test message now; an ApiError (502) carries the channel's answer."""
        return await self._request("POST", f"/channels/{channel_id}/test")

    async def rules(self, channel_id: int | None = None) -> list[dict[str, Any]]:
        return await self._request("GET", "/rules", params={"channel_id": channel_id})

    async def add_rule(self, **fields: Any) -> dict[str, Any]:
        return await self._request("POST", "/rules", json={k: v for k, v in fields.items() if v not in (None, "", [])})

    async def set_rule_enabled(self, rule_id: int, enabled: bool) -> dict[str, Any]:
        return await self._request("PATCH", f"/rules/{rule_id}", json={"enabled": enabled})

    async def delete_rule(self, rule_id: int) -> None:
        await self._request("DELETE", f"/rules/{rule_id}")

    async def deliveries(self, **filters: Any) -> list[dict[str, Any]]:
        return await self._request("GET", "/deliveries", params={"limit": 50, **filters})

    async def retry_delivery(self, delivery_id: int) -> dict[str, Any]:
        return await self._request("POST", f"/deliveries/{delivery_id}/retry")

    # -- post-mortem: review, reference runs, levers
    async def postmortem(self, run_id: str) -> dict[str, Any]:
        return await self._request("GET", f"/runs/{run_id}/postmortem")

    async def set_reference(
        self, project: str, run_id: str, *, tag: str | None = None, by: str | None = None
    ) -> dict[str, Any]:
        return await self._request(
            "PUT",
            f"/projects/{project}/reference",
            json={k: v for k, v in {"run_id": run_id, "tag": tag, "by": by}.items() if v},
        )

    async def references(self, project: str) -> list[dict[str, Any]]:
        return await self._request("GET", f"/projects/{project}/references")

    async def compare_to_reference(self, run_id: str, metric: str, *, reference: str | None = None) -> dict[str, Any]:
        """The run's `metric` against its reference's band; an ApiError 404 when it has no reference."""
        return await self._request("GET", f"/runs/{run_id}/compare", params={"metric": metric, "reference": reference})

    async def compare_arms(self, metric: str, a: str, b: str) -> dict[str, Any]:
        """Arm A against arm B (`run:<id>` or `group:<id>`): bands, verdicts, config diff, warnings."""
        return await self._request("GET", "/compare", params={"metric": metric, "a": a, "b": b})

    async def twins(self, run_id: str) -> dict[str, Any]:
        """The runs of the run's project that read the same batches in the same order (`sentence`, `twins`)."""
        return await self._request("GET", f"/runs/{run_id}/twins")

    async def repeats(self, run_id: str) -> dict[str, Any]:
        """The runs with the run's config and seeds, compared value for value (`sentence`, `repeats`)."""
        return await self._request("GET", f"/runs/{run_id}/repeats")

    async def levers(
        self, *, project: str | None = None, tag: str | None = None, run_ids: list[str] | None = None
    ) -> dict[str, Any]:
        return await self._request("GET", "/levers", params={"project": project, "tag": tag, "run_id": run_ids or None})


async def optional(call: Any, default: Any) -> tuple[Any, str | None]:
    """Await an API call whose route may not exist on an older service: (result, None), or
    (default, message) when it failed; a 404/405 for the route itself is not an error worth showing."""
    try:
        return await call, None
    except ApiError as exc:
        if exc.status in (404, 405) and "Not Found" in exc.message:
            return default, None
        return default, exc.message


def _auth_headers() -> dict[str, str]:
    """The signed-in person's key, when the dashboard serves a request from one (auth on)."""
    key = current_key()
    return {"Authorization": f"Bearer {key}"} if key else {}


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:200]}"
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list):  # FastAPI validation errors
        detail = "; ".join(f"{'.'.join(str(p) for p in d.get('loc', [])[1:])}: {d.get('msg')}" for d in detail)
    return str(detail or f"HTTP {response.status_code}")
