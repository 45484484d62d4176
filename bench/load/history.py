"""What a lab's history costs live detection: one claim of work, with thousands of finished runs in the database.

    .venv/bin/python bench/load/history.py                        # 0, 5,000 and 20,000 finished runs of 40 metrics
    .venv/bin/python bench/load/history.py --history 0,50000 --repeats 51

A lab's database keeps every run it ever logged; at any moment a few dozen are live. Each
history size gets a fresh Postgres database holding that many finished runs of `--metrics`
metrics, every one read by detection to its last step, and 50 live runs of 20 metrics with
points detection has not read. Then, `--repeats` times: a pass's queue work, as the detection
loop does it once a second (`settle_detected_runs`, then `claim_detection_work` for 250
metrics), in a transaction rolled back after. Printed per size: wall-clock milliseconds (median
and range) and the CPU-milliseconds of the Postgres backend that served it (from /proc, the mean:
the kernel counts it in 10 ms ticks),
which is what the work costs the database machine whatever else runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for part in ("server", "client", "."):
    sys.path.insert(0, str(ROOT / part))

from holter_server.store import detection_queue
from holter_server.store import events as events_store
from holter_server.store.database import make_engine, make_session_factory, upgrade
from sqlalchemy import text

from bench.ingest.run import postgres_database

LIVE_RUNS, LIVE_METRICS = 50, 20


def backend_cpu_ms(pid: int) -> float:
    """CPU time (user + system) of one Postgres backend, in ms."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / 100  # utime, stime in clock ticks (100 Hz)


def fill_history(url: str, runs: int, metrics: int) -> None:
    """`runs` finished runs of `metrics` metrics, each read by detection to its last step, written
    by SQL (fast). On a schema without the runs' batch counts (main before they came), without them."""
    _fill(url, "h", runs, metrics, status="finished", last=999, read=999)


def _fill(url: str, prefix: str, count: int, width: int, *, status: str, last: int, read: int) -> None:
    if not count:
        return
    engine = make_engine(url)
    try:
        with engine.begin() as c:
            counted = c.execute(
                text(
                    "SELECT count(*) FROM information_schema.columns WHERE table_name = 'runs' "
                    "AND column_name = 'stored_batches'"
                )
            ).scalar_one()
            counts = (
                (", stored_batches, detected_batches", f", 10, {10 if read == last else 9}") if counted else ("", "")
            )
            c.execute(
                text(f"""INSERT INTO runs (id, project, status, created_at, updated_at, heartbeat_at, config, tags,
                last_step{counts[0]})
                SELECT :prefix || g, 'history', :status, now(), now(), now(), '{{}}', '[]', :last{counts[1]}
                FROM generate_series(1, :n) g"""),
                {"prefix": prefix, "status": status, "last": last, "n": count},
            )
            c.execute(
                text("""INSERT INTO metrics (run_id, metric_id, name, count, first_step, last_step)
                SELECT :prefix || r, m, 'm' || m, :last + 1, 0, :last
                FROM generate_series(1, :n) r, generate_series(1, :k) m"""),
                {"prefix": prefix, "last": last, "n": count, "k": width},
            )
            c.execute(
                text("""INSERT INTO detector_states (run_id, metric_id, detected_step, detector_version, updated_at)
                SELECT run_id, metric_id, :read, 'x', now() FROM metrics WHERE run_id LIKE :prefix || '%'"""),
                {"read": read, "prefix": prefix},
            )
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(text("VACUUM ANALYZE"))
    finally:
        engine.dispose()


def measure(url: str, repeats: int) -> tuple[list[float], float, int]:
    """Wall-clock ms of each repeat, the backend's mean CPU-ms per repeat, metrics claimed."""
    engine = make_engine(url)
    factory = make_session_factory(engine)
    walls, claimed = [], 0
    try:
        with factory() as session:
            pid = session.execute(text("SELECT pg_backend_pid()")).scalar_one()
            cpu = backend_cpu_ms(pid)
            for _ in range(repeats):
                wall = time.perf_counter()
                if hasattr(events_store, "settle_detected_runs"):
                    due = detection_queue.settle_detected_runs(session=session)
                    claimed = len(detection_queue.claim_detection_work(session=session, limit=250, among_runs=due))
                else:  # main before runs counted their batches: the claim alone (copy this file there to compare)
                    claimed = len(detection_queue.claim_detection_work(session=session, limit=250))
                walls.append((time.perf_counter() - wall) * 1000)
                session.rollback()
            cpu = backend_cpu_ms(pid) - cpu
    finally:
        engine.dispose()
    return walls, cpu / repeats, claimed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", default="0,5000,20000", help="finished runs in the database, comma-separated")
    parser.add_argument("--metrics", type=int, default=40, help="metrics per finished run")
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    print(
        f"a pass's queue work (settle + claim 250 metrics) beside {LIVE_RUNS} live runs x {LIVE_METRICS} metrics, "
        f"{args.repeats} repeats, Postgres"
    )
    print(
        f"{'finished runs':>14}{'metrics':>10}{'wall ms median':>16}{'(range)':>16}{'pg CPU-ms mean':>16}{'claimed':>9}"
    )
    for history in (int(h) for h in args.history.split(",")):
        with postgres_database() as url:
            upgrade(url)
            fill_history(url, history, args.metrics)
            _fill(
                url, "l", LIVE_RUNS, LIVE_METRICS, status="running", last=1009, read=999
            )  # the live runs, with unread points
            walls, cpu, claimed = measure(url, args.repeats)
        spread = f"({min(walls):.1f}-{max(walls):.1f})"
        print(
            f"{history:>14,}{history * args.metrics:>10,}{statistics.median(walls):>16.1f}{spread:>16}"
            f"{cpu:>16.1f}{claimed:>9}",
            flush=True,
        )


if __name__ == "__main__":
    main()
