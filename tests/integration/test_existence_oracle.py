"""A key for one project learns nothing of whether a run id exists in another: every route
answers another project's run exactly as a run that does not exist (status, words and bytes),
creating a run with that id included (never 409 "taken")."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN, new_run_id
from tests.servers import ServerProcess


@pytest.fixture(scope="module")
def keys(secured: ServerProcess) -> Iterator[dict[str, str]]:
    with secured.api(key=ADMIN_TOKEN) as admin:
        key = admin.post("/keys", json={"name": "oracle", "scope": "admin", "project": "oracle-a"}).json()["key"]
        theirs, mine = new_run_id(), new_run_id()
        admin.post("/runs", json={"id": theirs, "project": "oracle-b"}).raise_for_status()
        admin.post("/runs", json={"id": mine, "project": "oracle-a"}).raise_for_status()
    yield {"key": key, "theirs": theirs, "mine": mine}


REQUESTS = [
    ("GET", "/runs/{id}", None),
    ("POST", "/runs/{id}/points", {"metrics": {"loss": {"steps": [0], "values": [1.0]}}}),
    ("POST", "/runs/{id}/heartbeat", None),
    ("GET", "/runs/{id}/events", None),
    ("POST", "/runs/{id}/summary", {"values": {"a": 1}}),
    # issue 47: a run named in a query, another project's 404, no run's 200 with nothing in it
    ("GET", "/series?run={id}&metric=loss", None),
    ("GET", "/levers?run_id={id}", None),
    ("GET", "/events?run_id={id}", None),
    ("GET", "/deliveries?run_id={id}", None),
    ("GET", "/runs/{mine}/compare?metric=loss&reference={id}", None),
]


@pytest.mark.parametrize(("method", "path", "body"), REQUESTS)
def test_another_projects_run_is_answered_as_one_that_does_not_exist(
    secured: ServerProcess, keys: dict, method: str, path: str, body: dict | None
) -> None:
    nobodys = new_run_id()
    with secured.api(key=keys["key"]) as api:
        theirs = api.request(method, path.format(id=keys["theirs"], mine=keys["mine"]), json=body)
        missing = api.request(method, path.format(id=nobodys, mine=keys["mine"]), json=body)
    assert theirs.status_code == missing.status_code == 404
    assert theirs.content == missing.content.replace(nobodys.encode(), keys["theirs"].encode())
    assert theirs.headers["content-type"] == missing.headers["content-type"]


def test_creating_a_run_with_another_projects_id_is_refused_as_unknown_not_taken(
    secured: ServerProcess, keys: dict
) -> None:
    with secured.api(key=keys["key"]) as api:
        answer = api.post("/runs", json={"id": keys["theirs"], "project": "oracle-a"})
        read = api.get(f"/runs/{keys['theirs']}")
    assert answer.status_code == 404
    assert answer.content == read.content
    assert "oracle-b" not in answer.text


def test_an_admin_of_every_project_is_still_told_the_id_is_taken(secured: ServerProcess, keys: dict) -> None:
    with secured.api(key=ADMIN_TOKEN) as api:
        answer = api.post("/runs", json={"id": keys["theirs"], "project": "oracle-a"})
    assert answer.status_code == 409


def test_refusals_are_spelled_as_the_routes_spell_theirs(secured: ServerProcess) -> None:
    # a refusal of the gate (no key) and one of a route (bad input) in the same JSON shape, byte for byte
    refused = httpx.get(f"{secured.url}/api/v1/runs")
    assert refused.status_code == 401
    assert refused.content == b'{"detail":"an API key is needed: Authorization: Bearer <key>"}'
