"""Holter on a Citus cluster: `holter db upgrade --distribute`, then the core of the integration
suite (ingest, reads, live detection, alerts, finish and crash, the stall watch, annotations,
references) through a real `holter serve` on the coordinator.

Runs when HOLTER_TEST_CITUS_URL names a database on a Citus coordinator that may create
databases (e.g. postgresql://postgres@127.0.0.1:9700/postgres) and whose worker nodes
(`citus_get_active_worker_nodes()`) take the same user; skipped otherwise. Each database made
here is made on the coordinator and on every worker with the citus extension, the worker nodes
added to it, and dropped on all of them afterwards. docs/scale-out.md says how to run such a pair.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import holter
import httpx
import pytest
from holter.demo.synthetic import SyntheticRun
from holter_server.store.backends.postgres import PostgresBackend
from holter_server.store.database import make_engine
from holter_server.store.distribution import BY_RUN, REFERENCE
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from tests.integration.test_reference_runs import stream
from tests.receivers import Receiver
from tests.servers import ServerProcess
from tests.waiting import wait_until

CITUS_URL = os.environ.get("HOLTER_TEST_CITUS_URL")

pytestmark = [
    pytest.mark.skipif(
        not CITUS_URL,
        reason="HOLTER_TEST_CITUS_URL is not set: no Citus coordinator to run on "
        "(docs/scale-out.md: how to run a coordinator and a worker)",
    ),
    pytest.mark.slow,
]

ROOT = Path(__file__).resolve().parents[2]
SHARDS = 4  # few shards: making 32 of each table on every database would take most of the test's time


def _connect(url: str):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)


def _database_url(base: str, name: str, *, host: str | None = None, port: int | None = None) -> str:
    url = make_url(base).set(database=name)
    if host is not None:
        url = url.set(host=host, port=port)
    return url.render_as_string(hide_password=False)


def _nodes() -> tuple[tuple[str, int], list[tuple[str, int]]]:
    """The coordinator's (host, port) as the workers reach it, and the active workers'."""
    assert CITUS_URL
    url = make_url(CITUS_URL)
    with _connect(CITUS_URL) as admin:
        workers = [
            (host, int(port))
            for host, port in admin.execute("SELECT node_name, node_port FROM citus_get_active_worker_nodes()")
        ]
    assert workers, f"the coordinator at {url.host}:{url.port} has no active worker node (citus_add_node)"
    return (url.host or "127.0.0.1", url.port or 5432), workers


def _urls(name: str) -> list[str]:
    """The database `name` on the coordinator (first), then on each worker."""
    assert CITUS_URL
    _coordinator, workers = _nodes()
    return [_database_url(CITUS_URL, name)] + [_database_url(CITUS_URL, name, host=h, port=p) for h, p in workers]


@pytest.fixture
def cluster_database() -> Iterator[str]:
    """A fresh database on the coordinator and every worker, with the citus extension and the
    workers added, not yet migrated; dropped on every node afterwards."""
    yield from _cluster_database()


def _cluster_database() -> Iterator[str]:
    assert CITUS_URL
    name = f"holter_citus_{uuid.uuid4().hex[:10]}"
    (coordinator_host, coordinator_port), workers = _nodes()
    urls = _urls(name)
    admin_urls = [CITUS_URL] + [
        _database_url(CITUS_URL, make_url(CITUS_URL).database or "postgres", host=h, port=p) for h, p in workers
    ]
    for admin_url, url in zip(admin_urls, urls):
        with _connect(admin_url) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        with _connect(url) as db:
            db.execute("CREATE EXTENSION citus")
    with _connect(urls[0]) as coordinator:
        coordinator.execute("SELECT citus_set_coordinator_host(%s, %s)", (coordinator_host, coordinator_port))
        for host, port in workers:
            coordinator.execute("SELECT citus_add_node(%s, %s)", (host, port))
    try:
        yield urls[0]
    finally:
        for admin_url in admin_urls:
            with _connect(admin_url) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def holter_cli(*args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(str(ROOT / part) for part in ("client", "server", "dashboard", "."))
    return subprocess.run(
        [sys.executable, "-m", "holter.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": path},
        check=False,
    )


def distribute(url: str) -> subprocess.CompletedProcess[str]:
    done = holter_cli("db", "upgrade", "--db", url, "--distribute", "--shard-count", str(SHARDS))
    assert done.returncode == 0, done.stderr
    return done


def layout(url: str) -> dict[str, tuple[str, str, int]]:
    with _connect(url) as db:
        rows = db.execute(
            "SELECT table_name::text, citus_table_type, distribution_column, colocation_id FROM citus_tables"
        ).fetchall()
    return {name.strip('"'): (kind, column, colocation) for name, kind, column, colocation in rows}


# ---- distribution ----------------------------------------------------------------------------------


def test_distribute_colocates_every_run_table_with_runs_and_copies_the_small_ones(cluster_database: str) -> None:
    first = distribute(cluster_database)
    tables = layout(cluster_database)
    runs_kind, runs_column, runs_colocation = tables["runs"]
    assert (runs_kind, runs_column) == ("distributed", "id")
    assert {name: tables[name][:2] for name in BY_RUN} == {name: ("distributed", "run_id") for name in BY_RUN}
    assert {tables[name][2] for name in BY_RUN} == {runs_colocation}
    assert {name: tables[name][0] for name in REFERENCE} == {name: "reference" for name in REFERENCE}
    assert "runs: distributed by id" in first.stdout
    again = distribute(cluster_database)
    assert "nothing to change" in again.stdout and "distributed by" not in again.stdout


def test_distribute_refuses_a_database_without_citus_and_migrates_nothing() -> None:
    assert CITUS_URL
    name = f"holter_plain_{uuid.uuid4().hex[:10]}"
    with _connect(CITUS_URL) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = _database_url(CITUS_URL, name)
        done = holter_cli("db", "upgrade", "--db", url, "--distribute")
        assert done.returncode == 2
        assert "no citus extension" in done.stderr and "Traceback" not in done.stderr
        with _connect(url) as db:
            assert db.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0] == 0
    finally:
        with _connect(CITUS_URL) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_points_stored_before_distributing_are_all_there_after(
    cluster_database: str, tmp_path: Path, spool_dir: Path
) -> None:
    holter_cli("db", "upgrade", "--db", cluster_database).check_returncode()  # a plain single-node Holter first
    server = ServerProcess(cluster_database, log_path=tmp_path / "before.log").start()
    try:
        run = holter.init(project="before", name="kept", url=server.url)
        for step in range(2000):
            run.log({"loss": 3.0 - step / 1000, "grad_norm": 1.0 + (step % 7) / 10}, step=step)
        run.finish()
        note = httpx.post(f"{server.url}/api/v1/runs/{run.id}/annotations", json={"author": "ana", "text": "kept"})
        assert note.status_code == 201, note.text
    finally:
        server.stop()
    assert layout(cluster_database) == {}  # nothing distributed yet
    distribute(cluster_database)
    server = ServerProcess(cluster_database, log_path=tmp_path / "after.log").start()
    try:
        with server.api() as api:
            points = api.get(f"/runs/{run.id}/metrics/loss/points", params={"limit": 5000}).json()
            assert points["steps"] == list(range(2000))
            assert api.get(f"/runs/{run.id}").json()["status"] == "finished"
            assert [n["text"] for n in api.get(f"/runs/{run.id}/annotations").json()["data"]] == ["kept"]
    finally:
        server.stop()
    with _connect(cluster_database) as db:
        assert db.execute("SELECT count(*) FROM points WHERE run_id = %s", (run.id,)).fetchone()[0] == 4000
        # the rows live in the shards now; the coordinator's own copy of the table is empty
        db.execute("SET citus.enable_manual_changes_to_shards = on")
        assert db.execute("SELECT count(*) FROM ONLY points").fetchone()[0] in (0, 4000)


# ---- the core of the suite on a distributed database -----------------------------------------------


@pytest.fixture(scope="module")
def citus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One distributed database for the module's tests (each keeps to its own project and runs),
    and a real service on it with a short stall watch and loopback webhooks allowed."""
    database = _cluster_database()
    url = next(database)
    try:
        distribute(url)
        folder = tmp_path_factory.mktemp("citus")
        env = {
            "HOLTER_STALL_AFTER": "3",
            "HOLTER_STALL_CHECK_INTERVAL": "0.5",
            "HOLTER_PUBLIC_URL": "http://holter.example:8765",
        }
        server = ServerProcess(url, env=env, log_path=folder / "server.log").start()
        try:
            yield server
        finally:
            server.stop()
    finally:
        database.close()


@pytest.fixture
def api(citus_server: ServerProcess) -> Iterator[httpx.Client]:
    with citus_server.api() as client:
        yield client


@pytest.fixture
def project() -> str:
    return f"citus-{uuid.uuid4().hex[:8]}"


def events_of(api: httpx.Client, run_id: str, **params: str) -> list[dict]:
    answer = api.get(f"/runs/{run_id}/events", params={"limit": 1000, **params})
    answer.raise_for_status()
    return answer.json()["data"]


def test_ingest_and_reads(citus_server: ServerProcess, api: httpx.Client, project: str, spool_dir: Path) -> None:
    run = holter.init(project=project, name="ingest", url=citus_server.url, config={"lr": 3e-4})
    for step in range(3000):
        run.log(
            {"loss": 3.0 - step / 2000 + (5.0 if step == 1500 else 0.0), "grad_norm": math.nan if step == 10 else 1.0},
            step=step,
        )
    run.flush()
    points = api.get(f"/runs/{run.id}/metrics/loss/points", params={"limit": 5000}).json()
    assert points["steps"] == list(range(3000))
    assert api.get(f"/runs/{run.id}/metrics/grad_norm/points", params={"limit": 20}).json()["values"][9:12] == [
        1.0,
        "NaN",
        1.0,
    ]
    chart = api.get(f"/runs/{run.id}/metrics/loss/points", params={"max_points": 200}).json()
    assert len(chart["steps"]) <= 200 and 1500 in chart["steps"]  # the downsampled chart keeps the spike
    other = holter.init(project=project, name="other", url=citus_server.url)
    other.log({"loss": 9.0}, step=0)
    other.flush()
    both = api.get("/series", params={"run": [run.id, other.id], "metric": "loss", "max_points": 100}).json()
    assert [len(s["steps"]) > 0 for s in both["data"]] == [True, True] and both["missing"] == []
    listed = api.get("/runs", params={"project": project}).json()
    assert {r["id"] for r in listed["data"]} == {run.id, other.id}
    detail = api.get(f"/runs/{run.id}").json()
    assert {m["name"] for m in detail["metrics"]} == {"loss", "grad_norm"} and detail["config"] == {"lr": 3e-4}
    run.finish()
    assert api.get(f"/runs/{run.id}").json()["status"] == "finished"


def test_two_runs_ingest_without_waiting_on_each_other(
    citus_server: ServerProcess, project: str, spool_dir: Path
) -> None:
    """A batch's metric-summary UPDATE names its run, so Citus sends it to that run's shard alone:
    one run's ingest transaction, still open, never holds up another run's. (Sent to every shard,
    as it was while its subquery named the run through `metrics.run_id`, it locked every shard,
    and every run's ingest waited on every other's.)"""
    runs = []
    for name in ("first", "second"):
        run = holter.init(project=project, name=name, url=citus_server.url)
        run.log({"loss": 1.0}, step=0)
        run.flush()
        runs.append(run.id)
    with _connect(citus_server.database_url) as db:
        metric = {
            run_id: db.execute("SELECT metric_id FROM metrics WHERE run_id = %s", (run_id,)).fetchone()[0]
            for run_id in runs
        }
    engine = make_engine(citus_server.database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    backend = PostgresBackend()
    try:
        with Session(engine) as held, Session(engine) as other:
            backend.update_metric_summaries(held, runs[0], [(metric[runs[0]], 0, 0, 0)])  # its transaction stays open
            other.execute(text("SET LOCAL lock_timeout = '10s'"))  # the old statement waited here until it ended
            backend.update_metric_summaries(other, runs[1], [(metric[runs[1]], 0, 0, 0)])
            other.rollback()
            held.rollback()
    finally:
        engine.dispose()


def test_live_detection_names_planted_problems_once_each(
    citus_server: ServerProcess, api: httpx.Client, project: str, spool_dir: Path
) -> None:
    steps = 3000
    synthetic = SyntheticRun(steps, seed=1)
    run = holter.init(project=project, name="planted", url=citus_server.url)
    for step in range(steps):
        run.log(synthetic.metrics(step), step=step)
    run.flush()
    logged = time.monotonic()
    wanted = {
        ("spike", "loss"),
        ("spike", "grad_norm"),
        ("sawtooth", "logprob_mismatch"),
        ("level_shift", "tokens_per_s"),
    }
    wait_until(lambda: wanted <= {(e["kind"], e["metric"]) for e in events_of(api, run.id)}, timeout=60)
    took = time.monotonic() - logged
    run.finish()
    time.sleep(3)  # more passes: nothing is named twice
    events = events_of(api, run.id)
    starts = [(e["kind"], e["metric"], e["start_step"]) for e in events]
    assert len(starts) == len(set(starts))
    assert took < 30


def test_a_divergence_alert_reaches_a_webhook_once(
    citus_server: ServerProcess, api: httpx.Client, project: str, spool_dir: Path
) -> None:
    receiver = Receiver().start()
    try:
        channel = api.post(
            "/channels", json={"name": project, "kind": "webhook", "target": receiver.url, "project": project}
        )
        assert channel.status_code == 201, channel.text
        run = holter.init(project=project, name="diverging", url=citus_server.url)
        for step in range(260):
            run.log({"loss": math.nan if step >= 200 else 3.0 - step / 300}, step=step)
        run.finish()
        wait_until(receiver.messages, timeout=60)
        time.sleep(3)
        (message,) = receiver.messages()
        (alert,) = message.json()["alerts"]
        assert (alert["run_id"], alert["metric"], alert["kind"], alert["start_step"]) == (
            run.id,
            "loss",
            "divergence",
            200,
        )
        deliveries = api.get("/deliveries", params={"channel_id": channel.json()["id"]}).json()
        assert [d["status"] for d in deliveries] == ["delivered"]
        test_message = api.post(f"/channels/{channel.json()['id']}/test")
        assert test_message.json() == {"status": "delivered"}, test_message.text
    finally:
        receiver.stop()


def test_a_crash_is_recorded_and_the_client_spool_empties(
    citus_server: ServerProcess, api: httpx.Client, project: str, spool_dir: Path
) -> None:
    run = holter.init(project=project, name="crashing", url=citus_server.url)
    for step in range(100):
        run.log({"loss": 1.0}, step=step)
    run.finish("crashed")
    assert api.get(f"/runs/{run.id}").json()["status"] == "crashed"
    (crash,) = events_of(api, run.id, kind="run_crashed")
    assert crash["severity"] == "critical" and "99" in crash["summary"]
    assert not [p for p in spool_dir.rglob("*") if p.is_file() and run.id in p.name]


def test_a_silent_run_is_marked_stalled(api: httpx.Client, project: str) -> None:
    run_id = f"stall-{uuid.uuid4().hex[:8]}"
    api.post("/runs", json={"id": run_id, "project": project}).raise_for_status()
    api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [1], "values": [2.0]}}}).raise_for_status()
    wait_until(lambda: api.get(f"/runs/{run_id}").json()["status"] == "stalled", timeout=30)
    (_stalled,) = events_of(api, run_id, kind="run_stalled")
    api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [2], "values": [2.0]}}}).raise_for_status()
    assert api.get(f"/runs/{run_id}").json()["status"] == "running"
    assert events_of(api, run_id, kind="run_resumed")


def test_annotations_are_saved_edited_and_deleted(api: httpx.Client, project: str) -> None:
    run_id = f"notes-{uuid.uuid4().hex[:8]}"
    api.post("/runs", json={"id": run_id, "project": project}).raise_for_status()
    api.post(f"/runs/{run_id}/finish", json={"status": "crashed"}).raise_for_status()
    (event,) = events_of(api, run_id, kind="run_crashed")
    ranged = api.post(
        f"/runs/{run_id}/annotations",
        json={"author": "ana", "text": "warm-up ends", "metric": "loss", "start_step": 100, "end_step": 200},
    )
    assert ranged.status_code == 201, ranged.text
    comment = api.post(
        f"/runs/{run_id}/annotations", json={"author": "bo", "text": "OOM at 2am", "event_id": event["id"]}
    )
    assert comment.status_code == 201, comment.text
    assert (
        api.post(f"/runs/{run_id}/annotations", json={"author": "bo", "text": "x", "event_id": 987654}).status_code
        == 404
    )
    edited = api.patch(
        f"/runs/{run_id}/annotations/{ranged.json()['id']}", json={"author": "ana", "text": "warm-up ends at 200"}
    )
    assert edited.status_code == 200, edited.text
    assert api.delete(f"/runs/{run_id}/annotations/{comment.json()['id']}", params={"author": "bo"}).status_code == 204
    notes = api.get(f"/runs/{run_id}/annotations").json()["data"]
    # auth off: notes are signed by the machine's one person, whatever name the body gives
    assert [(n["author"], n["text"]) for n in notes] == [("local", "warm-up ends at 200")]


def test_a_reference_is_set_and_a_drifting_run_is_flagged(
    citus_server: ServerProcess, api: httpx.Client, project: str, spool_dir: Path
) -> None:
    reference = stream(citus_server, project, eval_gap=0.0, seed=1)
    answer = api.put(f"/projects/{project}/reference", json={"run_id": reference.id, "by": "ana"})
    assert answer.status_code == 200, answer.text
    assert [r["run_id"] for r in api.get(f"/projects/{project}/references").json()] == [reference.id]
    drifting = stream(citus_server, project, eval_gap=0.12, seed=2)
    # the comparison runs after finish, in the drift loop
    (drift,) = wait_until(lambda: events_of(api, drifting.id, kind="reference_drift"), timeout=60)
    assert drift["metric"] == "eval_loss"
    comparison = api.get(f"/runs/{drifting.id}/compare", params={"metric": "eval_loss"}).json()
    assert comparison["reference_id"] == reference.id
