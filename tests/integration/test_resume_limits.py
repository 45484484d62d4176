"""Resuming a run merges its config and tags into the stored ones within their limits: a resume
that would grow them past a limit is refused with a clear 4xx and changes nothing, on a real
server over SQLite and Postgres."""

from __future__ import annotations

import httpx

from tests.conftest import new_run_id

MAX_CONFIG_BYTES = 256 * 1024  # HOLTER_MAX_CONFIG_BYTES default
MAX_TAGS = 64


def big_config(prefix: str, size: int) -> dict[str, str]:
    """Keys starting with `prefix` holding about `size` bytes as JSON."""
    return {f"{prefix}{i}": "x" * 1000 for i in range(size // 1010)}


def test_resumes_that_would_grow_the_config_past_its_limit_are_refused(api: httpx.Client) -> None:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "resume", "config": big_config("a", 200_000)}).raise_for_status()
    answer = api.post("/runs", json={"id": run_id, "project": "resume", "config": big_config("b", 200_000)})
    assert answer.status_code == 413
    assert "resuming" in answer.json()["detail"] and f"{MAX_CONFIG_BYTES:,}" in answer.json()["detail"]
    stored = api.get(f"/runs/{run_id}").json()["config"]
    assert sorted(stored) == sorted(big_config("a", 200_000))  # nothing of the refused resume


def test_thirty_resumes_leave_the_config_under_its_limit(api: httpx.Client) -> None:
    run_id = new_run_id()
    statuses = [
        api.post("/runs", json={"id": run_id, "project": "resume", "config": big_config(f"k{n}_", 100_000)}).status_code
        for n in range(30)
    ]
    assert statuses[:2] == [200, 200] and set(statuses[3:]) == {413}
    assert len(api.get(f"/runs/{run_id}").content) < 2 * MAX_CONFIG_BYTES


def test_a_resume_with_the_same_config_is_taken(api: httpx.Client) -> None:
    run_id = new_run_id()
    config = big_config("a", 250_000)
    api.post("/runs", json={"id": run_id, "project": "resume", "config": config}).raise_for_status()
    api.post(
        f"/runs/{run_id}/finish", json={"status": "crashed"}
    ).raise_for_status()  # a real resume, not a resent create
    again = api.post("/runs", json={"id": run_id, "project": "resume", "config": config})
    assert again.status_code == 200 and again.json()["resumed"] is True
    assert sorted(again.json()["config"]) == sorted(config)


def test_resumes_that_would_give_more_tags_than_the_limit_are_refused(api: httpx.Client) -> None:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "resume", "tags": [f"a{i}" for i in range(40)]}).raise_for_status()
    answer = api.post("/runs", json={"id": run_id, "project": "resume", "tags": [f"b{i}" for i in range(40)]})
    assert answer.status_code == 422
    assert f"over the limit of {MAX_TAGS}" in answer.json()["detail"]
    assert api.get(f"/runs/{run_id}").json()["tags"] == [f"a{i}" for i in range(40)]
    repeated = api.post("/runs", json={"id": run_id, "project": "resume", "tags": ["a1", "a2"]})
    assert repeated.status_code == 200  # tags it already has add nothing
