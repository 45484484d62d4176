"""The real client against the real server, on SQLite and Postgres."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import holter
import httpx
import pytest

from tests.conftest import new_run_id
from tests.servers import InProcessServer, free_port


def metric_counts(url: str, run_id: str) -> dict[str, int]:
    answer = httpx.get(f"{url}/api/v1/runs/{run_id}")
    if answer.status_code == 404:
        return {}
    return {m["name"]: m["count"] for m in answer.json()["metrics"]}


def run_script(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_logged_points_are_stored_and_readable(server: InProcessServer, spool_dir: Path) -> None:
    run = holter.init(project="client", name="e2e", config={"lr": 0.1}, url=server.url)
    for step in range(500):
        run.log({"loss": 1.0 / (step + 1), "grad_norm": float(step)}, step=step)
    run.log({"loss": math.nan}, step=500)
    run.log({"loss": math.inf, "grad_norm": -math.inf}, step=501)
    run.finish()
    stored = httpx.get(f"{server.url}/api/v1/runs/{run.id}").json()
    assert stored["status"] == "finished" and stored["config"] == {"lr": 0.1}
    loss = httpx.get(f"{server.url}/api/v1/runs/{run.id}/metrics/loss/points").json()
    assert loss["steps"] == list(range(502))
    assert loss["values"][:3] == [1.0, 0.5, 1 / 3]
    assert loss["values"][500:] == ["NaN", "Infinity"]
    assert metric_counts(server.url, run.id) == {"loss": 502, "grad_norm": 501}


def test_steps_default_to_one_past_the_last(server: InProcessServer, spool_dir: Path) -> None:
    run = holter.init(project="client", url=server.url)
    run.log({"a": 1.0})
    run.log({"a": 2.0})
    run.log({"a": 3.0}, step=10)
    run.log({"a": 4.0})
    run.finish()
    assert httpx.get(f"{server.url}/api/v1/runs/{run.id}/metrics/a/points").json()["steps"] == [0, 1, 10, 11]


def test_context_manager_marks_the_run_crashed_on_an_exception(server: InProcessServer, spool_dir: Path) -> None:
    with pytest.raises(RuntimeError), holter.init(project="client", url=server.url) as run:
        run.log({"loss": 1.0}, step=0)
        raise RuntimeError("boom")
    assert httpx.get(f"{server.url}/api/v1/runs/{run.id}").json()["status"] == "crashed"


def test_uncaught_exception_marks_the_run_crashed(server: InProcessServer, spool_dir: Path) -> None:
    run_id = new_run_id()
    result = run_script(
        f"""
        import holter
        run = holter.init(project="client", id="{run_id}")
        run.log({{"loss": 1.0}}, step=0)
        raise ValueError("training blew up")
        """,
        {"HOLTER_URL": server.url},
    )
    assert "training blew up" in result.stderr
    run = httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()
    assert run["status"] == "crashed" and run["last_step"] == 0


def test_interpreter_exit_flushes_and_finishes(server: InProcessServer, spool_dir: Path) -> None:
    run_id = new_run_id()
    result = run_script(
        f"""
        import holter
        run = holter.init(project="client", id="{run_id}", flush_interval=60)
        for step in range(1000):
            run.log({{"loss": float(step)}}, step=step)
        """,
        {"HOLTER_URL": server.url},
    )
    assert result.returncode == 0, result.stderr
    assert metric_counts(server.url, run_id) == {"loss": 1000}
    assert httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()["status"] == "finished"


def test_init_with_the_same_id_resumes_and_continues_the_steps(server: InProcessServer, spool_dir: Path) -> None:
    run_id = new_run_id()
    first = holter.init(project="client", id=run_id, url=server.url)
    first.log({"loss": 1.0})
    first.log({"loss": 2.0})
    first.finish("crashed")
    second = holter.init(project="client", id=run_id, url=server.url)
    assert second.resumed
    second.log({"loss": 3.0})
    second.finish()
    loss = httpx.get(f"{server.url}/api/v1/runs/{run_id}/metrics/loss/points").json()
    assert (loss["steps"], loss["values"]) == ([0, 1, 2], [1.0, 2.0, 3.0])
    assert httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()["status"] == "finished"


# its bound on 20,000 calls is a wall-clock one: alone, not beside other workers
@pytest.mark.serial
def test_log_does_not_wait_while_the_service_is_away_and_spools_to_disk(spool_dir: Path) -> None:
    dead_url = f"http://127.0.0.1:{free_port()}"
    run = holter.init(project="client", url=dead_url, connect_timeout=0.5)
    started = time.perf_counter()
    for step in range(20_000):
        run.log({"loss": 1.0, "acc": 0.5}, step=step)
    assert time.perf_counter() - started < 2.0  # 20,000 calls; each is a queue append
    assert run.flush(timeout=30)
    assert len(list((spool_dir / run.id).glob("*.json"))) >= 1
    run.finish(timeout=0.5)


def test_spooled_batches_reach_the_service_when_it_returns(store_url: str, spool_dir: Path) -> None:
    server = InProcessServer(store_url)  # not started yet: nothing answers at its address
    run = holter.init(project="client", url=server.url, connect_timeout=0.5)
    for step in range(3000):
        run.log({"loss": float(step), "lr": 0.1}, step=step)
    assert run.flush(timeout=30)
    server.start()
    try:
        for step in range(3000, 4000):
            run.log({"loss": float(step), "lr": 0.1}, step=step)
        run.finish(timeout=60)
        assert metric_counts(server.url, run.id) == {"loss": 4000, "lr": 4000}
        loss = httpx.get(f"{server.url}/api/v1/runs/{run.id}/metrics/loss/points").json()
        assert loss["values"] == [float(step) for step in range(4000)]
        assert not list((spool_dir / run.id).glob("*.json"))
    finally:
        server.stop()


def test_a_later_process_replays_what_an_earlier_one_spooled(store_url: str, spool_dir: Path) -> None:
    server = InProcessServer(store_url)  # not started yet: nothing answers at its address
    run_id = new_run_id()
    result = run_script(
        f"""
        import holter
        run = holter.init(project="client", id="{run_id}", connect_timeout=0.5)
        for step in range(2000):
            run.log({{"loss": float(step)}}, step=step)
        run.finish("crashed", timeout=1)
        """,
        {"HOLTER_URL": server.url, "HOLTER_SPOOL_DIR": str(spool_dir)},
    )
    assert result.returncode == 0, result.stderr
    assert list((spool_dir / run_id).glob("*.json"))
    server.start()
    try:
        run = holter.init(project="client", id=run_id, url=server.url)
        run.log({"loss": 2000.0}, step=2000)
        run.finish()
        loss = httpx.get(f"{server.url}/api/v1/runs/{run_id}/metrics/loss/points").json()
        assert loss["values"] == [float(step) for step in range(2001)]
        assert httpx.get(f"{server.url}/api/v1/runs/{run_id}").json()["status"] == "finished"
    finally:
        server.stop()


def test_a_run_the_service_forgot_is_registered_again(server: InProcessServer, spool_dir: Path, store_url: str) -> None:
    run = holter.init(project="client", url=server.url)
    run.log({"loss": 1.0}, step=0)
    assert run.flush()
    _delete_run(store_url, run.id)  # the service loses the run (say a database restored from backup)
    run.log({"loss": 2.0}, step=1)
    run.finish()
    assert metric_counts(server.url, run.id) == {"loss": 1}


def _delete_run(store_url: str, run_id: str) -> None:
    from holter_server.settings import Settings
    from holter_server.store import runs as runs_store
    from holter_server.store.database import make_engine, make_session_factory, session_scope
    from holter_server.store.models import DeletedRunRow
    from sqlalchemy import delete

    engine = make_engine(Settings(database_url=store_url).resolved_database_url())
    with session_scope(make_session_factory(engine)) as session:
        runs_store.delete_run(session=session, run_id=run_id)
        # A database restored from an older backup remembers no deletion either (a deleted run's
        # id is a 410 on purpose, tested in test_runs_api).
        session.execute(delete(DeletedRunRow).where(DeletedRunRow.run_id == run_id))
    engine.dispose()
