"""Hostile and broken input: every limit gets a clear 4xx and stores nothing partial."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import new_run_id
from tests.servers import ServerProcess


@pytest.fixture(scope="module")
def limited(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    env = {"HOLTER_MAX_METRICS_PER_RUN": "5", "HOLTER_MAX_CONFIG_BYTES": "1000", "HOLTER_MAX_BODY_BYTES": "100000",
           "HOLTER_MAX_POINTS_PER_BATCH": "1000"}
    server = ServerProcess(store_url, env=env, log_path=tmp_path_factory.mktemp("limits") / "server.log").start()
    with server.api() as client:
        yield client
    server.stop()


@pytest.fixture
def run_id(limited: httpx.Client) -> str:
    run_id = new_run_id()
    limited.post("/runs", json={"id": run_id, "project": "limits"}).raise_for_status()
    limited.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [0], "values": [1.0]}}}).raise_for_status()
    return run_id


def stored(api: httpx.Client, run_id: str) -> dict[str, int]:
    return {m["name"]: m["count"] for m in api.get(f"/runs/{run_id}").json()["metrics"]}


def test_a_batch_that_would_exceed_the_metrics_per_run_is_refused_whole(limited: httpx.Client, run_id: str) -> None:
    batch = {"metrics": {f"m{i}": {"steps": [1], "values": [1.0]} for i in range(5)} | {"loss": {"steps": [1], "values": [2.0]}}}
    answer = limited.post(f"/runs/{run_id}/points", json=batch)
    assert answer.status_code == 422 and "more than 5 metrics" in answer.json()["detail"]
    assert stored(limited, run_id) == {"loss": 1}


def test_a_config_over_the_size_limit_is_413(limited: httpx.Client) -> None:
    answer = limited.post("/runs", json={"id": new_run_id(), "project": "limits", "config": {"blob": "x" * 2000}})
    assert answer.status_code == 413 and "1000" in answer.json()["detail"]


def test_a_body_over_the_size_limit_is_413_before_it_is_read(limited: httpx.Client, run_id: str) -> None:
    answer = limited.post(f"/runs/{run_id}/points", content=b"{" + b" " * 200_000 + b"}", headers={"content-type": "application/json"})
    assert answer.status_code == 413
    assert stored(limited, run_id) == {"loss": 1}


def test_too_many_points_in_one_batch_is_413(limited: httpx.Client, run_id: str) -> None:
    answer = limited.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": list(range(1, 1002)), "values": [0.0] * 1001}}})
    assert answer.status_code == 413 and stored(limited, run_id) == {"loss": 1}


@pytest.mark.parametrize("name", ["x" * 257, "", "bad\nname", "<script>", "../../etc"])
def test_metric_names_are_checked_for_length_and_characters(limited: httpx.Client, run_id: str, name: str) -> None:
    answer = limited.post(f"/runs/{run_id}/points", json={"metrics": {name: {"steps": [1], "values": [1.0]}}})
    assert answer.status_code == 422 and stored(limited, run_id) == {"loss": 1}
