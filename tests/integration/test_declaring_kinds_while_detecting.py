"""Declaring a metric's kind while live detection holds the run (Postgres): live detection takes
its claim on a run, then the run's row; a declaration took the row, then waited for the claim to
reset detection, and the two deadlocked (a 500 the fuzzer found on PATCH /runs/{id}/metrics/{m}).
Here a connection plays live detection's part, in its order, against the real service."""

from __future__ import annotations

import threading
import time

import httpx
import psycopg
import pytest
from holter_server.store.claims import Task, run_key

from tests.conftest import new_run_id
from tests.servers import ServerProcess


@pytest.mark.parametrize("how", ["patch", "resume"])
def test_a_declaration_waits_for_detection_without_deadlocking_it(server: ServerProcess, how: str) -> None:
    if not server.database_url.startswith("postgresql"):
        pytest.skip("advisory claims are Postgres's")
    run_id = new_run_id()
    with server.api() as api:
        api.post("/runs", json={"id": run_id, "project": "kinds-locks"}).raise_for_status()
        api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [0, 1], "values": [2.0, 1.0]}}})
    answers: list[int] = []

    def declare() -> None:
        with server.api(timeout=60) as api:
            if how == "patch":
                answers.append(api.patch(f"/runs/{run_id}/metrics/loss", json={"kind": "grad_norm"}).status_code)
            else:
                body = {"id": run_id, "project": "kinds-locks", "kinds": {"loss": "grad_norm"}}
                answers.append(api.post("/runs", json=body).status_code)

    with psycopg.connect(server.database_url) as detection:
        detection.execute("SELECT pg_advisory_xact_lock(%s, %s)", (int(Task.DETECTION), run_key(run_id)))
        declaring = threading.Thread(target=declare)
        declaring.start()
        time.sleep(1.5)  # the declaration is waiting now, for the claim (and, before, holding the row)
        detection.execute("UPDATE runs SET detected_batches = detected_batches WHERE id = %s", (run_id,))
        detection.commit()
    declaring.join(60)
    assert answers == [200]
    with httpx.Client(base_url=f"{server.url}/api/v1") as api:
        (metric,) = api.get(f"/runs/{run_id}").json()["metrics"]
    assert metric["kind"] == "grad_norm"
