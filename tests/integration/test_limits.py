"""Hostile and broken input: every limit gets a clear 4xx and stores nothing partial."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import new_run_id, own_store
from tests.servers import InProcessServer, ServerProcess


@pytest.fixture(scope="module")
def limited(store_url: str) -> Iterator[httpx.Client]:
    settings = {
        "max_metrics_per_run": 5,
        "max_config_bytes": 1000,
        "max_body_bytes": 100_000,
        "max_points_per_batch": 1000,
    }
    server = InProcessServer(store_url, settings=settings).start()
    with server.api() as client:
        yield client
    server.stop()


@pytest.fixture
def run_id(limited: httpx.Client) -> str:
    run_id = new_run_id()
    limited.post("/runs", json={"id": run_id, "project": "limits"}).raise_for_status()
    limited.post(
        f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [0], "values": [1.0]}}}
    ).raise_for_status()
    return run_id


def stored(api: httpx.Client, run_id: str) -> dict[str, int]:
    return {m["name"]: m["count"] for m in api.get(f"/runs/{run_id}").json()["metrics"]}


def test_metrics_past_the_run_limit_are_refused_one_by_one_and_the_rest_stored(
    limited: httpx.Client, run_id: str
) -> None:
    limited.post(f"/runs/{run_id}/points", json={"metrics": {"m0": {"steps": [0], "values": [1.0]}}}).raise_for_status()
    # the run has loss and m0: room for three more of m1..m4
    batch = {
        "metrics": {f"m{i}": {"steps": [1], "values": [1.0]} for i in range(1, 5)}
        | {"loss": {"steps": [1], "values": [2.0]}}
    }
    answer = limited.post(f"/runs/{run_id}/points", json=batch)
    assert answer.status_code == 200
    assert answer.json()["refused"] == [
        {
            "metric": "m4",
            "reason": "the run already has 5 metrics, the most one run may have (HOLTER_MAX_METRICS_PER_RUN)",
            "points": 1,
        }
    ]
    assert stored(limited, run_id) == {"loss": 2, "m0": 1, "m1": 1, "m2": 1, "m3": 1}


def test_a_batch_of_new_metrics_only_on_a_full_run_is_422_naming_each(limited: httpx.Client, run_id: str) -> None:
    limited.post(
        f"/runs/{run_id}/points", json={"metrics": {f"m{i}": {"steps": [1], "values": [1.0]} for i in range(4)}}
    ).raise_for_status()
    answer = limited.post(f"/runs/{run_id}/points", json={"metrics": {"late": {"steps": [2], "values": [1.0]}}})
    assert answer.status_code == 422
    assert (
        answer.json()["detail"][0]["loc"] == ["body", "metrics", "late"]
        and "5 metrics" in answer.json()["detail"][0]["msg"]
    )


def test_parallel_batches_never_take_a_run_past_its_metric_limit(limited: httpx.Client, run_id: str) -> None:
    def send(writer: int) -> httpx.Response:
        return limited.post(
            f"/runs/{run_id}/points",
            json={"metrics": {f"w{writer}/m{j}": {"steps": [1], "values": [1.0]} for j in range(2)}},
        )

    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(send, range(16)))
    assert {a.status_code for a in answers} <= {200, 422}
    assert len(stored(limited, run_id)) == 5
    accepted = sum(a.json()["stored"] for a in answers if a.status_code == 200)
    assert accepted == 4  # "loss" was there first


def test_a_config_over_the_size_limit_is_413(limited: httpx.Client) -> None:
    answer = limited.post("/runs", json={"id": new_run_id(), "project": "limits", "config": {"blob": "x" * 2000}})
    assert answer.status_code == 413 and "1000" in answer.json()["detail"]


def test_a_body_over_the_size_limit_is_413_before_it_is_read(limited: httpx.Client, run_id: str) -> None:
    answer = limited.post(
        f"/runs/{run_id}/points", content=b"{" + b" " * 200_000 + b"}", headers={"content-type": "application/json"}
    )
    assert answer.status_code == 413
    assert stored(limited, run_id) == {"loss": 1}


def test_too_many_points_in_one_batch_is_413(limited: httpx.Client, run_id: str) -> None:
    answer = limited.post(
        f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": list(range(1, 1002)), "values": [0.0] * 1001}}}
    )
    assert answer.status_code == 413 and stored(limited, run_id) == {"loss": 1}


@pytest.mark.parametrize(
    "name", ["x" * 257, "", "bad\nname", "tab\tname", "nul\x00name", "del\x7fname", "line\u2028break"]
)
def test_metric_names_are_checked_for_length_and_control_characters(
    limited: httpx.Client, run_id: str, name: str
) -> None:
    answer = limited.post(f"/runs/{run_id}/points", json={"metrics": {name: {"steps": [1], "values": [1.0]}}})
    assert answer.status_code == 422 and stored(limited, run_id) == {"loss": 1}


def peak_memory(server: ServerProcess) -> int:
    """The server process's peak resident memory so far, in bytes (Linux)."""
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024


def test_a_batch_of_too_many_small_numbers_is_413_before_it_is_decoded(store_url: str, tmp_path: Path) -> None:
    # 63 MiB of "0," (22M steps, 11M values): decoded whole, a body like it took 1.2 GB before the 413
    # (a server process of its own: its peak memory is what is measured)
    server = ServerProcess(own_store(store_url, tmp_path), log_path=tmp_path / "server.log").start()
    try:
        with server.api() as api:
            run_id = new_run_id()
            api.post("/runs", json={"id": run_id, "project": "limits"}).raise_for_status()
            zeros = b"0," * 22_000_000
            body = (
                b'{"metrics": {"loss": {"steps": [' + zeros + b'0], "values": [' + zeros[: len(zeros) // 2] + b"0]}}}"
            )
            before = peak_memory(server)
            answer = api.post(
                f"/runs/{run_id}/points", content=body, headers={"content-type": "application/json"}, timeout=120
            )
            grew = peak_memory(server) - before
        assert answer.status_code == 413 and "values" in answer.json()["detail"]
        assert grew < 200 * 1024 * 1024, f"the server's peak memory grew by {grew / 2**20:.0f} MiB"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def roomy(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    # no live detection: reading 20,000 new series at once is its own (slow) story
    settings = {"max_metrics_per_run": 100_000, "detection_enabled": False}
    server = InProcessServer(own_store(store_url, tmp_path_factory.mktemp("roomy")), settings=settings).start()
    with server.api(timeout=120) as client:
        yield client
    server.stop()


@pytest.mark.slow
def test_a_batch_of_more_metrics_than_one_statement_takes_is_stored_whole(roomy: httpx.Client) -> None:
    # 9,000 new metrics: four parameters each in one statement pass SQLite's bound of 32,766
    # (Postgres' 65,535 would take 16,384, which costs a minute of rollups here)
    run_id = new_run_id()
    roomy.post("/runs", json={"id": run_id, "project": "limits"}).raise_for_status()
    batch = {"metrics": {f"layer.{i}/grad_norm": {"steps": [1], "values": [float(i)]} for i in range(9_000)}}
    answer = roomy.post(f"/runs/{run_id}/points", json=batch)
    assert answer.status_code == 200 and answer.json()["stored"] == 9_000
    assert roomy.post(f"/runs/{run_id}/points", json=batch).json()["duplicates"] == 9_000
    metrics = roomy.get(f"/runs/{run_id}").json()["metrics"]
    assert len(metrics) == 9_000 and {m["count"] for m in metrics} == {1}
