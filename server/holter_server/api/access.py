"""Who may call each API route, how large its body may be, and which request values name things
that belong to a project. One table, read by the gate (`api/gate.py`) before any body is read;
a test checks that every route of the app is in it, so a new route cannot slip past.

Resource ids are bound to the caller's project by kind:
* `run` — a run id (its project is looked up);
* `channel`, `rule`, `delivery`, `key` — row ids (a rule's and a delivery's project is their channel's);
* `project` — a project name, which must be the key's own.
Annotations and events live under a run path, so binding the run binds them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from starlette.routing import compile_path

API_PREFIX = "/api/v1"

# "any": every valid key whatever its scope (a key asking who it is); anyone with auth off
Scope = Literal["open", "any", "ingest", "read", "admin"]
BodyKind = Literal["none", "json", "run", "points"]
IdKind = Literal["run", "channel", "rule", "delivery", "key", "project"]


@dataclass(frozen=True)
class RouteAccess:
    """One route: the scope it needs, the kind of body it takes, and where its resource ids are
    (`path`/`query`/`body`: parameter name → kind of thing it names)."""

    method: str
    path: str
    scope: Scope
    body: BodyKind = "none"
    path_ids: dict[str, IdKind] = field(default_factory=dict)
    query_ids: dict[str, IdKind] = field(default_factory=dict)
    body_ids: dict[str, IdKind] = field(default_factory=dict)

    @property
    def pattern(self) -> re.Pattern[str]:
        return _compiled(API_PREFIX + self.path)


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _compiled(template: str) -> re.Pattern[str]:
    if template not in _PATTERNS:
        _PATTERNS[template] = compile_path(template)[0]
    return _PATTERNS[template]


RUN = {"run_id": "run"}
RUN_QUERY: dict[str, IdKind] = {"run_id": "run", "run": "run"}
# Query parameters bound on every route, whether the route reads them or not: naming another
# project's thing is refused the same way everywhere.
EVERY_QUERY: dict[str, IdKind] = {
    "run_id": "run",
    "run": "run",
    "runs": "run",
    "reference": "run",
    "project": "project",
    "channel_id": "channel",
}


def _route(
    method: str,
    path: str,
    scope: Scope,
    body: BodyKind = "none",
    *,
    path_ids: dict[str, IdKind] | None = None,
    query_ids: dict[str, IdKind] | None = None,
    body_ids: dict[str, IdKind] | None = None,
) -> RouteAccess:
    # every path parameter called run_id names a run
    ids: dict[str, IdKind] = dict(RUN) if "{run_id}" in path else {}  # type: ignore[arg-type]
    ids.update(path_ids or {})
    return RouteAccess(method, path, scope, body, ids, {**EVERY_QUERY, **(query_ids or {})}, dict(body_ids or {}))


ROUTES: tuple[RouteAccess, ...] = (
    _route("GET", "/health", "open"),
    # runs
    # the id to create or resume: another project's is "unknown" here as everywhere, never "taken"
    _route("POST", "/runs", "ingest", "run", body_ids={"project": "project", "id": "run"}),
    _route("GET", "/runs", "read", query_ids={"project": "project"}),
    _route("GET", "/projects", "read"),
    _route("GET", "/config-keys", "read", query_ids={"project": "project"}),
    _route("GET", "/runs/{run_id}", "read"),
    _route("PATCH", "/runs/{run_id}/metrics/{metric:path}", "read", "json"),
    _route("PATCH", "/runs/{run_id}", "read", "json"),
    _route("POST", "/runs/{run_id}/heartbeat", "ingest"),
    _route("POST", "/runs/{run_id}/finish", "ingest", "json"),
    _route("POST", "/runs/{run_id}/analyze", "read"),
    # deleting a run and archiving one are an admin's (api/routes/runs.py)
    _route("DELETE", "/runs/{run_id}", "admin"),
    _route("POST", "/runs/{run_id}/archive", "admin"),
    _route("POST", "/runs/{run_id}/unarchive", "admin"),
    _route("POST", "/runs/{run_id}/nonfinite", "ingest", "json"),
    # the ranks of a distributed job's run: each rank's beat, where they stand, a metric across them
    _route("POST", "/runs/{run_id}/ranks/{rank}/beat", "ingest", "json"),
    _route("GET", "/runs/{run_id}/ranks", "read"),
    _route("GET", "/runs/{run_id}/ranks/matrix", "read"),
    # what the training job itself reports (the wandb-style summary and alert)
    _route("POST", "/runs/{run_id}/summary", "ingest", "json"),
    _route("POST", "/runs/{run_id}/alerts", "ingest", "json"),
    _route("POST", "/runs/{run_id}/preflight", "ingest", "json"),
    # points and series
    _route("POST", "/runs/{run_id}/points", "ingest", "points"),
    _route("GET", "/runs/{run_id}/metrics/{metric:path}/points", "read"),
    _route("GET", "/series", "read", query_ids=RUN_QUERY),
    _route("GET", "/runs/{run_id}/metrics", "read"),
    _route("GET", "/runs/{run_id}/family", "read"),
    _route("GET", "/runs/{run_id}/export", "read"),
    # events and notes
    _route("GET", "/runs/{run_id}/events", "read"),
    _route("GET", "/runs/{run_id}/incidents", "read"),
    _route("GET", "/events", "read", query_ids={"project": "project", "run_id": "run"}),
    _route("POST", "/runs/{run_id}/events/{event_id}/acknowledge", "read", "json"),
    _route("POST", "/runs/{run_id}/events/{event_id}/dismiss", "read", "json"),
    _route("GET", "/runs/{run_id}/annotations", "read"),
    _route("POST", "/runs/{run_id}/annotations", "read", "json"),
    _route("PATCH", "/runs/{run_id}/annotations/{annotation_id}", "read", "json"),
    _route("DELETE", "/runs/{run_id}/annotations/{annotation_id}", "read"),
    # alerting
    _route("POST", "/channels", "admin", "json", body_ids={"project": "project"}),
    _route("GET", "/channels", "admin", query_ids={"project": "project"}),
    _route("DELETE", "/channels/{channel_id}", "admin", path_ids={"channel_id": "channel"}),
    _route("POST", "/channels/{channel_id}/test", "admin", path_ids={"channel_id": "channel"}),
    _route("POST", "/rules", "admin", "json", body_ids={"channel_id": "channel", "project": "project"}),
    _route("GET", "/rules", "admin", query_ids={"channel_id": "channel"}),
    _route("PATCH", "/rules/{rule_id}", "admin", "json", path_ids={"rule_id": "rule"}),
    _route("DELETE", "/rules/{rule_id}", "admin", path_ids={"rule_id": "rule"}),
    _route("GET", "/deliveries", "admin", query_ids={"channel_id": "channel", "run_id": "run"}),
    _route("POST", "/deliveries/{delivery_id}/retry", "admin", path_ids={"delivery_id": "delivery"}),
    # the chart picture a chat message shows: a key, or a signed link (alerts/image_links.py)
    _route("GET", "/runs/{run_id}/events/{event_id}/sparkline.png", "read"),
    # post-mortem
    _route("GET", "/levers", "read", query_ids={"project": "project", "run_id": "run"}),
    _route(
        "PUT",
        "/projects/{project}/reference",
        "admin",
        "json",
        path_ids={"project": "project"},
        body_ids={"run_id": "run"},
    ),
    _route("GET", "/projects/{project}/references", "read", path_ids={"project": "project"}),
    _route("DELETE", "/projects/{project}/reference", "admin", path_ids={"project": "project"}),
    _route("GET", "/runs/{run_id}/compare", "read", query_ids={"reference": "run"}),
    _route("GET", "/runs/{run_id}/postmortem", "read"),
    _route("GET", "/runs/{run_id}/report.html", "read"),
    # signal or noise: the arms `a` and `b` ("run:<id>", "group:<id>") are bound by the route
    _route("GET", "/compare", "read"),
    _route("GET", "/runs/{run_id}/seed-group", "read"),
    _route("GET", "/runs/{run_id}/twins", "read"),
    _route("GET", "/runs/{run_id}/repeats", "read"),
    _route("GET", "/projects/{project}/seed-groups", "read", path_ids={"project": "project"}),
    _route("GET", "/projects/{project}/settings", "read", path_ids={"project": "project"}),
    _route("PUT", "/projects/{project}/settings", "admin", "json", path_ids={"project": "project"}),
    # keys
    _route("POST", "/keys", "admin", "json", body_ids={"project": "project"}),
    _route("GET", "/keys", "admin"),
    _route("DELETE", "/keys/{key_id}", "admin", path_ids={"key_id": "key"}),
    _route("GET", "/keys/me", "any"),
    # vocabulary
    _route("GET", "/vocabulary", "read"),
)


def match(method: str, path: str) -> tuple[RouteAccess, dict[str, str]] | None:
    """The table's entry for a request and its path parameters, or None (not an API route:
    the app answers 404 or 405 without reading a body)."""
    for route in ROUTES:
        if route.method != method:
            continue
        found = route.pattern.match(path)
        if found is not None:
            return route, found.groupdict()
    return None
