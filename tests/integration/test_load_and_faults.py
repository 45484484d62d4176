"""A CI-sized load run and the faults of a real deployment, with nothing lost or doubled:
many jobs at once; Postgres restarted mid-stream. (The service killed mid-stream is in
test_server_kill.py, the spool through an outage in test_client.py, a webhook receiver down in
test_alerts.py; bench/load runs the full-size load.)"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.load import percentile, rss_mb, run_jobs
from tests.servers import ServerProcess

# Alone, after the parallel run (dev.py): one test restarts the Postgres every other test uses,
# and the load test measures memory and latency that other tests' work would disturb.
pytestmark = pytest.mark.serial


def stored_points(url: str, run_id: str) -> int:
    return sum(m["count"] for m in httpx.get(f"{url}/api/v1/runs/{run_id}").json()["metrics"])


@pytest.fixture(scope="module")
def postgres_server(postgres_url: str, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    server = ServerProcess(postgres_url, log_path=tmp_path_factory.mktemp("load") / "server.log").start()
    yield server
    server.stop()


@pytest.mark.postgres
def test_twenty_jobs_at_once_lose_nothing(postgres_server: ServerProcess) -> None:
    """The team deployment's load, scaled to CI (bench/load runs 100 jobs for 10 minutes)."""
    server = postgres_server
    before = rss_mb(server.process.pid)  # type: ignore[union-attr]
    results = asyncio.run(
        run_jobs(server.url, jobs=20, metrics=20, rate=10, seconds=12, prefix=f"load-{uuid.uuid4().hex[:6]}")
    )
    assert [r.errors for r in results] == [[]] * 20
    for result in results:
        assert result.points_sent > 0 and stored_points(server.url, result.run_id) == result.points_sent
    latencies = [x for r in results for x in r.latencies]
    assert percentile(latencies, 0.95) < 2.0
    assert rss_mb(server.process.pid) - before < 300  # type: ignore[union-attr]


@pytest.mark.postgres
def test_a_postgres_restart_mid_stream_loses_nothing(postgres_url: str, tmp_path: Path) -> None:
    if shutil.which("pg_ctlcluster") is None:
        pytest.skip("pg_ctlcluster is not available to restart Postgres")
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[0]
    server = ServerProcess(postgres_url, log_path=tmp_path / "server.log").start()
    try:
        restarted_at: list[float] = []

        def restart() -> None:
            time.sleep(4)
            subprocess.run(
                ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"], check=True, timeout=60
            )
            restarted_at.append(time.monotonic())

        restarter = threading.Thread(target=restart)
        restarter.start()
        results = asyncio.run(
            run_jobs(server.url, jobs=5, metrics=10, rate=10, seconds=14, prefix=f"pgrestart-{uuid.uuid4().hex[:6]}")
        )
        streamed_until = time.monotonic()
        restarter.join()
        # the restart fell inside the stream (whether a request saw an error depends on timing:
        # the service retries, so a quick restart may be felt by none)
        assert restarted_at and restarted_at[0] < streamed_until, "Postgres came back only after the jobs had stopped"
        for result in results:
            assert stored_points(server.url, result.run_id) == result.points_sent
    finally:
        server.stop()
