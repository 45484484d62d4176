"""Deleting and archiving runs through the real service, on each store (SQLite, Postgres, and
Postgres partitioned by run under HOLTER_TEST_PARTITION_POINTS): every row that belongs to the
run goes, every row of the run beside it stays."""

from __future__ import annotations

import logging
import math
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.conftest import ADMIN_TOKEN, migrated_sqlite
from tests.receivers import Receiver
from tests.servers import InProcessServer, ServerProcess
from tests.waiting import wait_until

# every table that holds rows of a run, by the column that names it
RUN_TABLES = {
    "points": "run_id",
    "rollups": "run_id",
    "metrics": "run_id",
    "detector_states": "run_id",
    "events": "run_id",
    "mutes": "run_id",
    "annotations": "run_id",
    "deliveries": "run_id",
    "references": "run_id",
    "run_ranks": "run_id",
    "runs": "id",
}


def rows_of(store_url: str, run_id: str) -> dict[str, int]:
    engine = create_engine(store_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as connection:
            return {
                table: connection.execute(
                    text(f'SELECT count(*) FROM "{table}" WHERE {column} = :run'), {"run": run_id}
                ).scalar_one()
                for table, column in RUN_TABLES.items()
            }
    finally:
        engine.dispose()


def filled_run(admin: httpx.Client, project: str, channel_id: int) -> str:
    """A finished run with something in every table: points and rollups of three metrics, a
    detector state per metric, events (a NaN's divergence, a job's alert), a note on an event, a
    muted kind, the alert's delivery, and the run as its project's reference."""
    run_id = f"del{uuid.uuid4().hex[:10]}"
    for rank in (0, 1):  # two ranks of a job joined it
        joined = {"rank": rank, "world_size": 2, "host": "node-0"}
        admin.post("/runs", json={"id": run_id, "project": project, "name": run_id, "rank": joined}).raise_for_status()
    steps = list(range(3000))
    admin.post(
        f"/runs/{run_id}/points",
        json={
            "metrics": {
                "loss": {"steps": steps, "values": [2.0 + math.sin(s / 50) if s != 2900 else "NaN" for s in steps]},
                "grad_norm": {"steps": steps, "values": [1.0 + 0.01 * (s % 7) for s in steps]},
                "lr": {"steps": steps, "values": [3e-4] * len(steps)},
            }
        },
    ).raise_for_status()
    admin.post(
        f"/runs/{run_id}/alerts",
        json={"title": "eval below target", "text": "accuracy 0.2", "severity": "critical", "key": "eval-1"},
    ).raise_for_status()
    admin.post(f"/runs/{run_id}/finish", json={"status": "finished", "rank": 1}).raise_for_status()
    admin.post(f"/runs/{run_id}/finish", json={"status": "finished", "rank": 0}).raise_for_status()
    wait_until(lambda: len(admin.get(f"/runs/{run_id}/events").json()["data"]) >= 2, timeout=60)
    events = admin.get(f"/runs/{run_id}/events").json()["data"]
    admin.post(
        f"/runs/{run_id}/annotations", json={"author": "ana", "text": "the data loader", "event_id": events[0]["id"]}
    ).raise_for_status()
    on_metric = next(e for e in events if e["metric"])
    admin.post(
        f"/runs/{run_id}/events/{on_metric['id']}/dismiss", json={"by": "ana", "reason": "known", "mute": True}
    ).raise_for_status()
    admin.put(f"/projects/{project}/reference", json={"run_id": run_id}).raise_for_status()
    wait_until(lambda: admin.get("/deliveries", params={"run_id": run_id, "channel_id": channel_id}).json(), timeout=30)
    return run_id


@pytest.fixture(scope="module")
def admin(secured: ServerProcess) -> Iterator[httpx.Client]:
    with secured.api(key=ADMIN_TOKEN) as client:
        yield client


@pytest.fixture(scope="module")
def channel(admin: httpx.Client) -> int:
    # a webhook nobody answers on loopback: its deliveries are queued (and fail), which is all we need
    return admin.post(
        "/channels", json={"name": "ops", "kind": "webhook", "target": "http://127.0.0.1:9/hook", "project": "del"}
    ).json()["id"]


def test_deleting_a_run_removes_every_row_of_it_and_none_of_another(
    secured: ServerProcess, admin: httpx.Client, channel: int
) -> None:
    doomed, kept = filled_run(admin, "del", channel), filled_run(admin, "del", channel)
    before = rows_of(secured.database_url, doomed)
    assert all(before[table] for table in RUN_TABLES if table != "references"), before
    kept_before = rows_of(secured.database_url, kept)

    answer = admin.delete(f"/runs/{doomed}")
    assert answer.status_code == 200, answer.text
    assert answer.json()["deleted"]["points"] == 9000 and answer.json()["deleted"]["runs"] == 1
    assert rows_of(secured.database_url, doomed) == dict.fromkeys(RUN_TABLES, 0)
    kept_after = rows_of(secured.database_url, kept)
    # none of the other run's rows went (detection may still be adding events of its own to it)
    assert all(kept_after[table] >= kept_before[table] for table in RUN_TABLES), (kept_before, kept_after)
    assert kept_after["points"] == kept_before["points"] == 9000
    assert admin.get(f"/runs/{doomed}").status_code == 404
    assert admin.delete(f"/runs/{doomed}").status_code == 404


def test_only_an_admin_key_deletes_or_archives(secured: ServerProcess, admin: httpx.Client) -> None:
    run_id = f"keep{uuid.uuid4().hex[:8]}"
    admin.post("/runs", json={"id": run_id, "project": "del"}).raise_for_status()
    reader = admin.post("/keys", json={"name": "reader", "scope": "read", "project": "del"}).json()["key"]
    with secured.api(key=reader) as client:
        assert client.delete(f"/runs/{run_id}").status_code == 403
        assert client.post(f"/runs/{run_id}/archive").status_code == 403
    assert admin.get(f"/runs/{run_id}").status_code == 200


def test_an_archived_run_leaves_the_list_and_keeps_everything(admin: httpx.Client) -> None:
    run_id = f"arch{uuid.uuid4().hex[:8]}"
    admin.post("/runs", json={"id": run_id, "project": "arch"}).raise_for_status()
    admin.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [0, 1], "values": [2.0, 1.0]}}})
    archived = admin.post(f"/runs/{run_id}/archive").json()
    assert archived["archived_at"] is not None

    def listed(**query: str) -> list[str]:
        return [r["id"] for r in admin.get("/runs", params={"project": "arch", **query}).json()["data"]]

    assert run_id not in listed() and run_id in listed(archived="include") and listed(archived="only") == [run_id]
    assert admin.get(f"/runs/{run_id}/metrics/loss/points").json()["values"] == [2.0, 1.0]
    admin.post(f"/runs/{run_id}/unarchive").raise_for_status()
    assert run_id in listed()


def test_holter_runs_delete_asks_then_deletes(secured: ServerProcess, admin: httpx.Client) -> None:
    run_id = f"cli{uuid.uuid4().hex[:8]}"
    admin.post("/runs", json={"id": run_id, "project": "del", "name": "mistaken import"}).raise_for_status()
    env = {"HOLTER_API_KEY": ADMIN_TOKEN, "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-m", "holter.cli", "runs", "delete", run_id, "--url", secured.url]
    refused = subprocess.run(command, check=False, input="n\n", capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode == 1 and "mistaken import" in refused.stdout
    assert admin.get(f"/runs/{run_id}").status_code == 200
    done = subprocess.run([*command, "--yes"], check=False, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "deleted" in done.stdout and admin.get(f"/runs/{run_id}").status_code == 404
    unknown = subprocess.run([*command, "--yes"], check=False, capture_output=True, text=True, env=env, timeout=60)
    assert unknown.returncode == 2 and run_id in unknown.stderr


def test_a_run_deleted_while_ranks_write_it_answers_them_404_never_500(
    secured: ServerProcess, admin: httpx.Client
) -> None:
    # issue 47: on SQLite, batches whose metric ids were read before the delete failed a rollup's
    # foreign key after it: 137 of 5,424 requests answered 500
    answers: dict[int, int] = {}
    for _ in range(5):
        run_id = f"race{uuid.uuid4().hex[:10]}"
        admin.post("/runs", json={"id": run_id, "project": "del-race"}).raise_for_status()
        stop = threading.Event()

        def write(run_id: str = run_id, stop: threading.Event = stop) -> None:
            with secured.api(key=ADMIN_TOKEN) as writer:
                step = 0
                while not stop.is_set():
                    metrics = {"loss": {"steps": [step], "values": [1.0]}, "acc": {"steps": [step], "values": [0.5]}}
                    status = writer.post(f"/runs/{run_id}/points", json={"metrics": metrics}).status_code
                    answers[status] = answers.get(status, 0) + 1
                    step += 1

        writers = [threading.Thread(target=write) for _ in range(4)]
        stored_before = answers.get(200, 0)
        for thread in writers:
            thread.start()
        wait_until(lambda n=stored_before: answers.get(200, 0) >= n + 8, timeout=60)  # they are writing
        assert admin.delete(f"/runs/{run_id}").status_code == 200
        refused_before = answers.get(404, 0)
        wait_until(lambda n=refused_before: answers.get(404, 0) >= n + 8, timeout=60)  # and told it is gone
        stop.set()
        for thread in writers:
            thread.join()
    assert set(answers) <= {200, 404}, answers
    assert answers.get(404) and answers.get(200)


def test_a_run_deleted_while_its_alert_is_being_sent_leaves_the_dispatcher_well(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # issue 47: on SQLite the dispatcher's round failed (StaleDataError) when the run, and with it
    # the delivery being sent, was deleted before the attempt was recorded
    receiver = Receiver(delay=2.0).start()
    server = InProcessServer(migrated_sqlite(tmp_path / "dispatch.db")).start()
    try:
        with server.api() as api:
            api.post("/channels", json={"name": "slow", "kind": "webhook", "target": receiver.url}).raise_for_status()
            run_id = api.post("/runs", json={"project": "del-dispatch"}).json()["id"]
            api.post(
                f"/runs/{run_id}/alerts", json={"title": "now", "text": "x", "severity": "critical", "key": "k1"}
            ).raise_for_status()
            wait_until(lambda: receiver.received, timeout=30)  # the dispatcher is sending it now
            with caplog.at_level(logging.ERROR, logger="holter.loops"):
                assert api.delete(f"/runs/{run_id}").status_code == 200
                time.sleep(3.0)  # the send completes and its attempt is recorded
            assert not [r for r in caplog.records if "round failed" in r.getMessage()], caplog.text
            api.post(
                "/runs", json={"id": "after-the-delete", "project": "del-dispatch"}
            ).raise_for_status()  # the service carries on
    finally:
        server.stop()
        receiver.stop()


def test_a_run_deleted_while_its_job_runs_stays_deleted_and_the_job_is_told(
    secured: ServerProcess, admin: httpx.Client, tmp_path: Path
) -> None:
    # issue 47: the client, answered 404, registered the run again and it came back holding only
    # the points logged after the delete
    script = (
        "import sys, time, holter\n"
        "run = holter.init(project='del-alive', id=sys.argv[1], url=sys.argv[2], api_key=sys.argv[3], quiet=True)\n"
        "for step in range(60):\n"
        "    run.log({'loss': 1.0 / (step + 1)}, step=step)\n"
        "    run.flush()\n"
        "    time.sleep(0.1)\n"
        "run.finish()\n"
    )
    run_id = f"alive{uuid.uuid4().hex[:8]}"
    job = subprocess.Popen(
        [sys.executable, "-c", script, run_id, secured.url, ADMIN_TOKEN],
        env={**os.environ, "HOLTER_SPOOL_DIR": str(tmp_path / "spool")},
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: admin.get(f"/runs/{run_id}").status_code == 200, timeout=60)
    wait_until(lambda: (admin.get(f"/runs/{run_id}").json().get("last_step") or 0) >= 5, timeout=60)
    assert admin.delete(f"/runs/{run_id}").status_code == 200
    _, said = job.communicate(timeout=120)
    assert admin.get(f"/runs/{run_id}").status_code == 404  # it stayed deleted
    assert said.count("was deleted at") == 1 and "not sent" in said
    assert admin.post("/runs", json={"id": run_id, "project": "del-alive"}).status_code == 410
    assert admin.post("/runs", json={"id": run_id, "project": "another"}).status_code == 200  # ids are free elsewhere
