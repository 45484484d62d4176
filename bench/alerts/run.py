"""Alert benchmark: how fast an anomaly reaches chat, and how fast the dispatcher sends.

    .venv/bin/python bench/alerts/run.py [--trials 20] [--store postgres|sqlite]

* latency: a run logs a healthy loss, then a NaN; the time from that `log()` call until the
  webhook request arrives at a local receiver (client flush, ingest, live detection, outbox,
  dispatcher, HTTP), p50 and p95 over the trials (goal: p95 <= 3 s);
* dispatcher throughput: 500 alerts for 500 runs queued at once, delivered to a local
  receiver; messages per second.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import holter

from bench.ingest.run import postgres_database
from tests.receivers import Receiver
from tests.servers import ServerProcess


class TimedReceiver(Receiver):
    """Notes when each message arrived."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.arrivals: list[float] = []
        self.arrived = threading.Event()

    def messages(self):  # type: ignore[no-untyped-def]
        found = super().messages()
        while len(self.arrivals) < len(found):
            self.arrivals.append(time.perf_counter())
        return found


def latency(server: ServerProcess, receiver: TimedReceiver, trials: int, spool: Path) -> list[float]:
    api = server.api(timeout=5)
    results = []
    for trial in range(trials):
        project = f"bench-{uuid.uuid4().hex[:6]}"
        api.post(
            "/channels", json={"name": project, "kind": "webhook", "target": receiver.url, "project": project}
        ).raise_for_status()
        run = holter.init(project=project, url=server.url, spool_dir=spool)
        for step in range(300):
            run.log({"loss": 3.0 - step / 300}, step=step)
        run.flush()
        time.sleep(1.0)  # let detection catch up with the healthy part
        before = len(receiver.messages())
        logged = time.perf_counter()
        run.log({"loss": math.nan}, step=300)
        while len(receiver.messages()) == before:
            time.sleep(0.005)
            if time.perf_counter() - logged > 30:
                raise RuntimeError("no alert within 30 s")
        results.append(time.perf_counter() - logged)
        run.finish()
        print(f"  trial {trial + 1}: {results[-1]:.2f} s", flush=True)
    return results


def throughput(database_url: str, server: ServerProcess, receiver: Receiver, alerts: int) -> float:
    from holter_server.alerts.message import Alert
    from holter_server.detect.events import Event
    from holter_server.settings import Settings
    from holter_server.store import alerts as alerts_store
    from holter_server.store.database import make_engine, make_session_factory, session_scope
    from holter_server.store.runs import now

    api = server.api(timeout=5)
    channel = api.post(
        "/channels", json={"name": "throughput", "kind": "slack", "target": receiver.url, "default_rules": False}
    ).json()
    engine = make_engine(Settings(database_url=database_url).resolved_database_url())
    before = len(receiver.messages())
    with session_scope(make_session_factory(engine)) as session:
        for i in range(alerts):
            event = Event(
                kind="divergence",
                metric="loss",
                start_step=1,
                end_step=1,
                severity="critical",
                score=0.0,
                summary="loss became NaN",
                peak_step=1,
            )
            alert = Alert(
                event=event, project="bench", run_id=f"run-{i}", run_name=None, time=now().isoformat(), sparkline="▁▂▃"
            ).to_json()
            alerts_store.queue_delivery(
                session=session,
                channel_id=channel["id"],
                rule_id=None,
                run_id=f"run-{i}",
                event_id=None,
                purpose="alert",
                idempotency_key=f"bench:{uuid.uuid4()}",
                alert=alert,
                not_before=now(),
            )
    started = time.perf_counter()
    while len(receiver.messages()) - before < alerts:
        time.sleep(0.01)
        if time.perf_counter() - started > 300:
            raise RuntimeError("dispatcher did not finish within 300 s")
    engine.dispose()
    return alerts / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--alerts", type=int, default=500)
    parser.add_argument("--store", choices=["postgres", "sqlite"], default="postgres")
    args = parser.parse_args()
    receiver = TimedReceiver().start()
    with tempfile.TemporaryDirectory() as tmp, postgres_database() as pg_url:
        database_url = pg_url if args.store == "postgres" else f"sqlite:///{tmp}/holter.db"
        server = ServerProcess(database_url, log_path=Path(tmp) / "server.log").start()
        try:
            print(f"latency from log() to webhook ({args.store}):", flush=True)
            times = sorted(latency(server, receiver, args.trials, Path(tmp) / "spool"))
            rate = throughput(database_url, server, receiver, args.alerts)
        finally:
            server.stop()
            receiver.stop()
    p95 = times[min(len(times) - 1, math.ceil(0.95 * len(times)) - 1)]
    print()
    print(f"{'log() to webhook, p50 (s)':<40}{statistics.median(times):>10.2f}")
    print(f"{'log() to webhook, p95 (s, goal <= 3)':<40}{p95:>10.2f}")
    print(f"{'dispatcher throughput (messages/s)':<40}{rate:>10.0f}")


if __name__ == "__main__":
    main()
