"""Nothing lost, nothing doubled: the server is SIGKILLed while a client streams 100,000 points."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import holter
import httpx
from holter_server.settings import Settings
from holter_server.store import points as points_store
from holter_server.store.database import make_engine, make_session_factory

from tests.servers import ServerProcess

METRICS = 10
STEPS = 10_000


def test_sigkill_mid_stream_loses_and_duplicates_nothing(store_url: str, spool_dir: Path, tmp_path: Path) -> None:
    server = ServerProcess(store_url, log_path=tmp_path / "server.log").start()
    run = holter.init(project="faults", name="sigkill", url=server.url, flush_interval=0.2)
    stream_done = threading.Event()

    def stream() -> None:
        for step in range(STEPS):
            run.log({f"m{i}": step * 10.0 + i for i in range(METRICS)}, step=step)
            if step % 100 == 99:
                time.sleep(0.03)  # ~3 s of streaming, so the kill lands mid-stream
        stream_done.set()

    streamer = threading.Thread(target=stream)
    streamer.start()
    try:
        time.sleep(1.0)
        assert not stream_done.is_set(), "the stream ended before the kill"
        server.kill()
        time.sleep(1.5)
        server.start()
        streamer.join()
        run.finish(timeout=120)

        run_info = httpx.get(f"{server.url}/api/v1/runs/{run.id}").json()
        assert run_info["status"] == "finished"
        assert {m["name"]: m["count"] for m in run_info["metrics"]} == {f"m{i}": STEPS for i in range(METRICS)}
        engine = make_engine(Settings(database_url=store_url).resolved_database_url())
        with make_session_factory(engine)() as session:
            assert points_store.count_points(session=session, run_id=run.id) == METRICS * STEPS
        engine.dispose()
        for i in (0, METRICS - 1):
            series = httpx.get(f"{server.url}/api/v1/runs/{run.id}/metrics/m{i}/points").json()
            assert series["steps"] == list(range(STEPS))
            assert series["values"] == [step * 10.0 + i for step in range(STEPS)]
    finally:
        server.stop()
