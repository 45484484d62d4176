"""Events through the API: filters, acknowledge, dismiss, mute; on SQLite and Postgres."""

from __future__ import annotations

import math
import time
from pathlib import Path

import holter
import httpx
import pytest

from tests.integration.test_live_detection import events_of
from tests.servers import ServerProcess
from tests.waiting import wait_until


@pytest.fixture
def nan_run(server: ServerProcess, spool_dir: Path) -> holter.Run:
    """A run whose loss went NaN at step 200 and whose grad norm spiked at step 100."""
    run = holter.init(project=f"events-{time.time_ns()}", url=server.url)
    for step in range(260):
        run.log(
            {
                "loss": math.nan if step >= 200 else 3.0 - step / 200,
                "grad_norm": 40.0 if step == 100 else 1.0 + 0.01 * (step % 7),
            },
            step=step,
        )
    run.finish()
    wait_until(lambda: {"divergence", "spike"} <= {e["kind"] for e in events_of(server.url, run.id)})
    return run


def test_events_filter_by_metric_kind_severity_and_status(api: httpx.Client, nan_run: holter.Run) -> None:
    base = f"/runs/{nan_run.id}/events"
    assert {e["kind"] for e in api.get(base, params={"metric": "loss"}).json()["data"]} == {"divergence"}
    critical = api.get(base, params={"severity": "critical"}).json()["data"]
    assert critical and all(e["severity"] == "critical" for e in critical)
    assert api.get(base, params={"kind": "spike"}).json()["data"][0]["metric"] == "grad_norm"
    assert api.get(base, params={"status": "dismissed"}).json()["count"] == 0


def test_project_wide_events_list_every_run_of_the_project(api: httpx.Client, nan_run: holter.Run) -> None:
    listed = api.get("/events", params={"project": nan_run.project}).json()
    assert listed["count"] >= 2 and {e["run_id"] for e in listed["data"]} == {nan_run.id}
    assert api.get("/events", params={"project": "no-such-project"}).json()["count"] == 0


def test_acknowledging_records_who_and_why(api: httpx.Client, nan_run: holter.Run) -> None:
    (event,) = api.get(f"/runs/{nan_run.id}/events", params={"kind": "divergence"}).json()["data"]
    acked = api.post(
        f"/runs/{nan_run.id}/events/{event['id']}/acknowledge", json={"by": "ana", "reason": "lowering lr"}
    ).json()
    # auth off: signed "local" (the machine's one person), whatever name the body gives
    assert (acked["status"], acked["status_by"], acked["status_reason"]) == ("acknowledged", "local", "lowering lr")
    health = api.get(f"/runs/{nan_run.id}").json()
    assert health["health"] != "critical"  # acknowledged events no longer count against the run


def test_dismissing_with_mute_silences_later_events_of_that_kind(
    server: ServerProcess, api: httpx.Client, spool_dir: Path
) -> None:
    run = holter.init(project="events-mute", url=server.url)
    for step in range(300):
        run.log({"grad_norm": 30.0 if step == 150 else 1.0 + 0.01 * (step % 5)}, step=step)
    run.flush()
    wait_until(lambda: any(e["kind"] == "spike" for e in events_of(server.url, run.id)))
    (spike,) = events_of(server.url, run.id, kind="spike")
    dismissed = api.post(
        f"/runs/{run.id}/events/{spike['id']}/dismiss", json={"by": "bo", "reason": "known bad batch", "mute": True}
    )
    assert dismissed.json()["status"] == "dismissed"
    for step in range(300, 600):
        run.log({"grad_norm": 30.0 if step == 450 else 1.0 + 0.01 * (step % 5)}, step=step)
    run.finish()
    wait_until(lambda: len(events_of(server.url, run.id, kind="spike", status="muted")) == 1)
    assert [e["status"] for e in events_of(server.url, run.id, kind="spike", status="open")] == []


def test_deciding_on_an_unknown_event_is_404(api: httpx.Client, nan_run: holter.Run) -> None:
    answer = api.post(f"/runs/{nan_run.id}/events/999999/acknowledge", json={"by": "x"})
    assert answer.status_code == 404 and "999999" in answer.json()["detail"]


def test_a_decision_is_signed_by_the_service_not_the_body(api: httpx.Client, nan_run: holter.Run) -> None:
    (event,) = api.get(f"/runs/{nan_run.id}/events", params={"kind": "divergence"}).json()["data"]
    dismissed = api.post(f"/runs/{nan_run.id}/events/{event['id']}/dismiss", json={"reason": "no name"})
    assert (dismissed.status_code, dismissed.json()["status_by"]) == (200, "local")


def test_run_list_shows_each_runs_health(api: httpx.Client, nan_run: holter.Run) -> None:
    (listed,) = api.get("/runs", params={"project": nan_run.project}).json()["data"]
    assert (listed["health"], listed["open_events"] >= 2) == ("critical", True)
