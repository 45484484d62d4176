"""`holter serve --workers N`: several API processes on one port, each point stored once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import new_run_id, own_store
from tests.servers import ServerProcess

BATCHES = 40
STEPS_PER_BATCH = 25


@pytest.fixture(scope="module")
def two_process_server(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    folder = tmp_path_factory.mktemp("workers")
    server = ServerProcess(
        own_store(store_url, folder), log_path=folder / "server.log", args=("--workers", "2")
    ).start()
    yield server
    server.stop()


def _closing_client(server: ServerProcess) -> httpx.Client:
    """A client whose every request goes on a new connection (closed after its answer), so that
    requests sent together go to either of the server's processes, which take turns at the shared
    socket's queue. One client for all of them: a client each costs tens of ms of CPU to build."""
    return httpx.Client(base_url=f"{server.url}/api/v1", timeout=30, headers={"Connection": "close"})


def _post_points(client: httpx.Client, run_id: str, body: dict) -> dict:
    """POST a batch through a `_closing_client`; its answer."""
    answer = client.post(f"/runs/{run_id}/points", json=body)
    answer.raise_for_status()
    return answer.json()


def test_both_processes_answer_on_the_one_port(two_process_server: ServerProcess) -> None:
    # 8 requests at once until both processes have answered: the server is healthy once one of
    # them answers, and on a loaded machine the other may still be importing the service
    answered: set[int] = set()
    with _closing_client(two_process_server) as client, ThreadPoolExecutor(8) as pool:
        deadline = time.monotonic() + 60
        while len(answered) < 2 and time.monotonic() < deadline:
            answered |= set(pool.map(lambda _: client.get("/health").json()["process"], range(8)))
            time.sleep(0.1)
    assert len(answered) == 2


def test_batches_through_both_processes_are_stored_once(two_process_server: ServerProcess) -> None:
    run_id = new_run_id()
    with two_process_server.api() as api:
        api.post("/runs", json={"id": run_id, "project": "workers"}).raise_for_status()

    def send(index: int) -> dict:
        steps = list(range(index * STEPS_PER_BATCH, (index + 1) * STEPS_PER_BATCH))
        body = {
            "metrics": {
                "loss": {"steps": steps, "values": [1.0 / (s + 1) for s in steps]},
                "lr": {"steps": steps, "values": [0.001] * len(steps)},
            }
        }
        # every batch twice, on separate connections, so the copies race through both processes
        return _post_points(client, run_id, body)

    with _closing_client(two_process_server) as client, ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, [index for index in range(BATCHES) for _ in range(2)]))
    assert sum(a["stored"] for a in answers) == BATCHES * STEPS_PER_BATCH * 2
    assert sum(a["duplicates"] for a in answers) == BATCHES * STEPS_PER_BATCH * 2
    with two_process_server.api() as api:
        metrics = {m["name"]: m["count"] for m in api.get(f"/runs/{run_id}").json()["metrics"]}
    assert metrics == {"loss": BATCHES * STEPS_PER_BATCH, "lr": BATCHES * STEPS_PER_BATCH}


def test_a_second_server_on_a_port_in_use_fails_at_once(
    two_process_server: ServerProcess, store_url: str, tmp_path: Path
) -> None:
    if not store_url.startswith("sqlite"):
        # the second server fails at its port, on a store of its own: the first's store is no part of it
        pytest.skip("once is enough: the same port, the same second server, on either store")
    command = [
        sys.executable,
        "-m",
        "holter.cli",
        "serve",
        "--port",
        str(two_process_server.port),
        "--db",
        f"sqlite:///{tmp_path / 'other.db'}",
        "--workers",
        "2",
    ]
    finished = subprocess.run(
        command,
        env={**os.environ, "HOLTER_AUTH": "off", "HOLTER_BACKGROUND": "off"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode != 0
    assert "Address already in use" in finished.stderr


def test_a_run_deleted_and_recreated_under_its_id_keeps_every_point_under_its_own_metric(
    two_process_server: ServerProcess,
) -> None:
    # Both processes remember the run's metric ids (loss 1, lr 2) from its first batches; the run
    # is deleted and its id registered again in another project (in its own, a deleted run's id
    # is a 410), with its metrics declared the other way round (lr 1, loss 2): whichever process
    # gets the batches after, each point lands under its own metric.
    run_id = new_run_id()

    def send(steps: range, order: tuple[str, ...] = ("loss", "lr")) -> dict:
        values = {"loss": [float(s) for s in steps], "lr": [1000.0 + s for s in steps]}
        body = {"metrics": {name: {"steps": list(steps), "values": values[name]} for name in order}}
        return _post_points(client, run_id, body)

    with two_process_server.api() as api, _closing_client(two_process_server) as client:
        api.post("/runs", json={"id": run_id, "project": "workers"}).raise_for_status()
        send(range(0, 10))
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda lo: send(range(lo, lo + 10)), range(10, 200, 10)))
        api.delete(f"/runs/{run_id}").raise_for_status()
        api.post("/runs", json={"id": run_id, "project": "workers-again"}).raise_for_status()
        send(range(1000, 1010), order=("lr", "loss"))
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda lo: send(range(lo, lo + 10)), range(1010, 1200, 10)))
        assert sum(a["stored"] for a in answers) == 19 * 20
        for name, offset in (("loss", 0.0), ("lr", 1000.0)):
            read = api.get(f"/runs/{run_id}/metrics/{name}/points").json()
            assert read["steps"] == list(range(1000, 1200))
            assert read["values"] == [offset + s for s in range(1000, 1200)]
        metrics = {m["name"]: m["count"] for m in api.get(f"/runs/{run_id}").json()["metrics"]}
        assert metrics == {"loss": 200, "lr": 200}
