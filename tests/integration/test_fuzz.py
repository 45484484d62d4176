"""Property-based fuzzing of the whole API (schemathesis against the OpenAPI document of a real
server, on SQLite and Postgres): whatever it sends, the service never answers 5xx.

Every operation of the document is fuzzed with valid data (positive), with data that breaks
the schema (negative), and with both again where the path names things that exist (a run with
metrics and events, a note, a channel, a rule, a key), so the fuzzing gets past the 404s into
the code behind them. Channels are pointed at a closed loopback port: a fuzzed channel is never
a real address.

Bounded budget: HOLTER_FUZZ_EXAMPLES examples per operation and strategy (default 10). Driven
through Hypothesis directly rather than schemathesis' pytest plugin, which does not run under
pytest 9.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import requests
from holter_server.connections import MAX_HEADER_BYTES

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from tests.conftest import ADMIN_TOKEN, new_run_id, own_store
from tests.servers import InProcessServer, ServerProcess

EXAMPLES = int(os.environ.get("HOLTER_FUZZ_EXAMPLES", "10"))
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(max(300, 60 * EXAMPLES)),  # more examples take longer than the suite's 300 s
]
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
CLOSED_LOOPBACK = "http://127.0.0.1:9/fuzz"  # the discard port: nothing listens there, so a channel test is a 502


def existing_things(api: httpx.Client) -> dict[str, Any]:
    """Create one of everything a path can name, and return the path parameters naming them."""
    run_id = new_run_id()
    api.post(
        "/runs", json={"id": run_id, "project": "fuzz", "config": {"lr": 0.1}, "rank": {"rank": 0, "world_size": 2}}
    ).raise_for_status()
    loss = [2.0 - i / 100 for i in range(200)]
    loss[120] = 40.0  # a spike, so the analysis finds an event
    api.post(
        f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": list(range(200)), "values": loss}}}
    ).raise_for_status()
    api.post(f"/runs/{run_id}/analyze").raise_for_status()
    events = api.get(f"/runs/{run_id}/events").json()["data"]
    note = api.post(f"/runs/{run_id}/annotations", json={"author": "fuzz", "text": "a note"}).json()
    channel = api.post(
        "/channels", json={"name": "fuzz", "kind": "webhook", "target": CLOSED_LOOPBACK, "default_rules": False}
    ).json()
    rule = api.post("/rules", json={"channel_id": channel["id"], "name": "fuzz"}).json()
    key = api.post("/keys", json={"name": "fuzz", "scope": "read"}).json()
    return {
        "run_id": run_id,
        "metric": "loss",
        "rank": 0,
        "event_id": events[0]["id"] if events else 1,
        "annotation_id": note["id"],
        "channel_id": channel["id"],
        "rule_id": rule["id"],
        "delivery_id": 1,
        "key_id": key["id"],
        "project": "fuzz",
    }


def no_outside_targets(case: Any) -> None:
    """A fuzzed channel may only point at a closed loopback port (webhook, Slack, ... and Apprise)."""
    if (
        case.method.upper() == "POST"
        and case.path.endswith("/channels")
        and isinstance(case.body, dict)
        and "target" in case.body
    ):
        case.body["target"] = "json://127.0.0.1:9/fuzz" if case.body.get("kind") == "apprise" else CLOSED_LOOPBACK


def fuzz_every_operation(
    server: ServerProcess, known: dict[str, Any], *, examples: int, headers: dict[str, str] | None = None
) -> list[str]:
    """Fuzz every operation of the server's document; returns the 5xx answers found."""
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    failures: list[str] = []
    operations = []
    sent = [0]
    # deletions last, so the things the other operations name still exist when they run, and
    # revoking keys last of all (a fuzzed id may be the fuzzing key's own: nothing after it would
    # get past the gate)
    every = sorted(
        (result.ok() for result in schema.get_all_operations()),
        key=lambda operation: (operation.method.upper() == "DELETE", operation.path.startswith("/api/v1/keys/")),
    )
    for operation in every:
        operations.append(f"{operation.method.upper()} {operation.path}")
        names = [p.name for p in operation.path_parameters]
        strategies = [operation.as_strategy(mode) for mode in GenerationMode]
        if names:
            strategies += [
                operation.as_strategy(mode, path_parameters={n: known[n] for n in names}) for mode in GenerationMode
            ]

        @settings(FUZZ_SETTINGS, max_examples=examples * len(strategies))
        @given(case=st.one_of(strategies))
        def fuzz(case) -> None:  # type: ignore[no-untyped-def]
            no_outside_targets(case)
            try:
                response = case.call(timeout=60, headers=headers)
            except (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError):
                # a request line and headers over the service's 64 KiB header block are answered
                # 400 and the connection closed while the client is still sending: not a fault
                if len(case.formatted_path) + len(urlencode(case.query or {}, doseq=True)) > MAX_HEADER_BYTES:
                    sent[0] += 1
                    return
                raise
            sent[0] += 1
            if response.status_code >= 500 and not (response.status_code == 502 and case.path.endswith("/test")):
                failures.append(f"{case.method} {case.formatted_path} {response.status_code}: {response.text[:200]}")

        fuzz()
    assert len(operations) == len(set(operations)) >= 43
    assert operations[-1] == "DELETE /api/v1/keys/{key_id}"
    print(f"fuzzed {len(operations)} operations with {sent[0]:,} requests: {len(failures)} server errors")
    return failures


@pytest.fixture(scope="module")
def fuzzed_store(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store of the fuzzing's own: what it leaves (hostile runs and points, a rule that sends
    every event to a closed port, revoked keys) never reaches the servers of the modules that
    run after it in this worker, whose detection and dispatch would inherit it as a backlog."""
    return own_store(store_url, tmp_path_factory.mktemp("fuzz"))


@pytest.fixture(scope="module")
def server(fuzzed_store: str) -> Iterator[InProcessServer]:
    """The service with auth off, on the fuzzing's own store."""
    server = InProcessServer(fuzzed_store).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def secured(fuzzed_store: str) -> Iterator[InProcessServer]:
    """The service with auth on, on the fuzzing's own store."""
    server = InProcessServer(fuzzed_store, settings={"auth": "on", "admin_token": ADMIN_TOKEN}).start()
    yield server
    server.stop()


def test_no_request_makes_the_service_fail(server: ServerProcess) -> None:
    with server.api() as api:
        known = existing_things(api)
    failures = fuzz_every_operation(server, known, examples=EXAMPLES)
    assert failures == [], "\n".join(failures)


def test_no_request_makes_the_service_fail_with_auth_on(secured: ServerProcess) -> None:
    """With auth on, through the gate, as a key scoped to one project (every id is bound to it):
    fewer examples, the auth-off run above covers the routes' own input."""
    with secured.api(key=ADMIN_TOKEN) as api:
        known = existing_things(api)
        key = api.post("/keys", json={"name": "fuzz-scoped", "scope": "admin", "project": "fuzz"}).json()["key"]
    failures = fuzz_every_operation(
        secured, known, examples=max(1, EXAMPLES // 4), headers={"Authorization": f"Bearer {key}"}
    )
    assert failures == [], "\n".join(failures)
