"""The ids a request names are bounded before any is looked up, on a real server with auth on
and a key scoped to one project (the gate binds every id to it): a long query string is refused
at once, repeated ids count once, one that no store can hold is a 422, and none of them ties up
the database pool while another person reads."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN, new_run_id
from tests.servers import ServerProcess

MAX_NAMED_IDS = 500  # api/gate.py


@pytest.fixture(scope="module")
def world(secured: ServerProcess) -> Iterator[dict[str, str]]:
    with secured.api(key=ADMIN_TOKEN) as admin:
        ingest = admin.post("/keys", json={"name": "ids-ingest", "scope": "ingest", "project": "ids"}).json()["key"]
        read = admin.post("/keys", json={"name": "ids-read", "scope": "read", "project": "ids"}).json()["key"]
        run_id = new_run_id()
        admin.post("/runs", json={"id": run_id, "project": "ids"}).raise_for_status()
    yield {"ingest": ingest, "read": read, "run": run_id}


def test_a_request_naming_more_ids_than_the_limit_is_refused(secured: ServerProcess, world: dict) -> None:
    ids = ",".join(f"r{i}" for i in range(5_000))
    with secured.api(key=world["ingest"]) as api:
        answer = api.post(f"/runs/{world['run']}/heartbeat", params={"runs": ids})
    assert answer.status_code == 422
    assert f"more than {MAX_NAMED_IDS} ids" in answer.json()["detail"]


def test_ids_repeated_in_a_query_count_once(secured: ServerProcess, world: dict) -> None:
    same = ",".join([world["run"]] * 2_000)  # more copies than the limit allows distinct ids
    with secured.api(key=world["ingest"]) as api:
        assert api.post(f"/runs/{world['run']}/heartbeat", params={"runs": same}).status_code == 200


def test_ids_up_to_the_limit_are_bound_and_another_projects_among_them_is_refused(
    secured: ServerProcess, world: dict
) -> None:
    with secured.api(key=ADMIN_TOKEN) as admin:
        other = new_run_id()
        admin.post("/runs", json={"id": other, "project": "ids-other"}).raise_for_status()
    ids = [f"r{i}" for i in range(MAX_NAMED_IDS - 1)]
    with secured.api(key=world["ingest"]) as api:
        # every id looked up (none is a run: the first is refused as unknown, not the count)
        unknown_first = api.post(f"/runs/{world['run']}/heartbeat", params={"runs": ",".join(ids)})
        answer = api.post(f"/runs/{world['run']}/heartbeat", params={"runs": ",".join([world["run"], other])})
    assert unknown_first.status_code == 404 and unknown_first.json()["detail"] == "unknown run 'r0'"
    assert answer.status_code == 404
    assert answer.json()["detail"] == f"unknown run {other!r}"


def test_many_long_queries_at_once_leave_the_pool_to_other_readers(secured: ServerProcess, world: dict) -> None:
    """45 heartbeats naming 5,000 ids each, sent together, while another key reads a run and
    /health is asked: the reader and /health are answered at once, the heartbeats refused."""
    ids = ",".join(f"r{i}" for i in range(5_000))
    answers: list[int | str] = []

    def heartbeat() -> None:
        with secured.api(key=world["ingest"], timeout=30) as api:
            try:
                answers.append(api.post(f"/runs/{world['run']}/heartbeat", params={"runs": ids}).status_code)
            except httpx.HTTPError as exc:
                answers.append(type(exc).__name__)

    threads = [threading.Thread(target=heartbeat) for _ in range(45)]
    for thread in threads:
        thread.start()
    reads: list[tuple[int, float]] = []
    with secured.api(key=world["read"], timeout=10) as reader:
        while any(thread.is_alive() for thread in threads) or len(reads) < 5:
            started = time.monotonic()
            status = reader.get(f"/runs/{world['run']}").status_code
            health = httpx.get(f"{secured.url}/api/v1/health", timeout=10).status_code
            reads.append((status, time.monotonic() - started))
            assert (status, health) == (200, 200)
    for thread in threads:
        thread.join()
    assert answers == [422] * 45
    assert max(seconds for _status, seconds in reads) < 5, reads


@pytest.mark.parametrize(
    ("method", "path", "params"),
    [
        ("GET", "/runs/a%00b", {}),
        ("GET", "/events", {"run_id": "a\x00b"}),
        ("GET", "/series", {"run": "ok,a\x00b", "metric": "loss"}),
    ],
)
def test_an_id_holding_nul_is_a_422_with_a_project_key(
    secured: ServerProcess, world: dict, method: str, path: str, params: dict
) -> None:
    with secured.api(key=world["read"]) as api:
        answer = api.request(method, path, params=params)
    assert answer.status_code == 422, answer.text
    assert "NUL" in answer.text


@pytest.mark.parametrize("row_id", ["²", "٣", "9" * 5_000])
def test_a_row_id_of_other_digits_is_a_422_with_a_project_key(secured: ServerProcess, world: dict, row_id: str) -> None:
    with secured.api(key=ADMIN_TOKEN) as admin:
        key = admin.post("/keys", json={"name": "ids-admin", "scope": "admin", "project": "ids"}).json()["key"]
    with secured.api(key=key) as api:
        assert api.delete(f"/channels/{row_id}").status_code == 422
        assert api.get("/deliveries", params={"channel_id": row_id}).status_code == 422
