"""Run status: stalled when silent, running again when data returns, crashed as an event."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import new_run_id, own_store
from tests.servers import InProcessServer
from tests.waiting import wait_until


@pytest.fixture(scope="module")
def quick_stall_server(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    # a store of its own: on the shared one every other test's quiet runs would stall within seconds
    settings = {"stall_after": 1.5, "stall_check_interval": 0.2}
    server = InProcessServer(own_store(store_url, tmp_path_factory.mktemp("stall")), settings=settings).start()
    yield server
    server.stop()


# slow: seconds of waiting on the stall clock, out of the fast tier
@pytest.mark.slow
def test_a_silent_run_stalls_and_resumes_when_points_return(quick_stall_server: InProcessServer) -> None:
    api = quick_stall_server.api(timeout=5)
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "life"})
    api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [7], "values": [1.0]}}})
    wait_until(lambda: api.get(f"/runs/{run_id}").json()["status"] == "stalled", timeout=15)
    (stalled,) = api.get(f"/runs/{run_id}/events", params={"kind": "run_stalled"}).json()["data"]
    assert stalled["metric"] is None and "step 7" in stalled["summary"]
    api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [8], "values": [1.0]}}})
    assert api.get(f"/runs/{run_id}").json()["status"] == "running"
    (resumed,) = api.get(f"/runs/{run_id}/events", params={"kind": "run_resumed"}).json()["data"]
    assert "resumed after" in resumed["summary"]


# slow: seconds of waiting on the stall clock, out of the fast tier
@pytest.mark.slow
def test_heartbeats_keep_a_quiet_run_from_stalling(quick_stall_server: InProcessServer) -> None:
    api = quick_stall_server.api(timeout=5)
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "life"})
    for _ in range(8):
        time.sleep(0.5)
        api.post(f"/runs/{run_id}/heartbeat")
    assert api.get(f"/runs/{run_id}").json()["status"] == "running"


# slow: seconds of waiting on the stall clock, out of the fast tier
@pytest.mark.slow
def test_finished_runs_never_stall(quick_stall_server: InProcessServer) -> None:
    api = quick_stall_server.api(timeout=5)
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "life"})
    api.post(f"/runs/{run_id}/finish", json={"status": "finished"})
    time.sleep(2.5)
    assert api.get(f"/runs/{run_id}").json()["status"] == "finished"


def test_a_crash_is_recorded_as_a_critical_event(api: httpx.Client) -> None:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "life"})
    api.post(f"/runs/{run_id}/finish", json={"status": "crashed"})
    (crash,) = api.get(f"/runs/{run_id}/events", params={"kind": "run_crashed"}).json()["data"]
    assert crash["severity"] == "critical"
