"""Load benchmark: many training jobs at once against one service on Postgres.

    .venv/bin/python bench/load/run.py                      # 100 jobs x 20 metrics x 10 steps/s for 10 minutes
    .venv/bin/python bench/load/run.py --seconds 60         # a shorter run

Each simulated job posts one batch a second, like the client. Reports errors (answers other
than 200 are retried and counted), points lost or doubled (the store's count against what was
sent), the service's resident memory over time, and ingest request latency p50/p95.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.ingest.run import postgres_database  # noqa: E402
from tests.load import percentile, rss_mb, run_jobs  # noqa: E402
from tests.servers import ServerProcess  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--metrics", type=int, default=20)
    parser.add_argument("--rate", type=float, default=10.0, help="steps per second per job")
    parser.add_argument("--seconds", type=float, default=600.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, postgres_database() as database_url:
        server = ServerProcess(database_url, log_path=Path(tmp) / "server.log").start()
        memory: list[float] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(5):
                memory.append(rss_mb(server.process.pid))  # type: ignore[union-attr]

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        prefix = f"load-{uuid.uuid4().hex[:6]}"
        results = asyncio.run(run_jobs(server.url, jobs=args.jobs, metrics=args.metrics, rate=args.rate, seconds=args.seconds, prefix=prefix))
        elapsed = time.monotonic() - started
        stop.set()
        import httpx

        stored = sum(m["count"] for r in results for m in httpx.get(f"{server.url}/api/v1/runs/{r.run_id}").json()["metrics"])
        server.stop()
    sent = sum(r.points_sent for r in results)
    latencies = [x for r in results for x in r.latencies]
    errors = sum(len(r.errors) for r in results)
    print(f"{args.jobs} jobs x {args.metrics} metrics x {args.rate:g} steps/s for {elapsed:.0f} s against Postgres")
    print(f"{'points sent / stored':<36}{sent:>14,} / {stored:,}  ({'exact' if sent == stored else 'MISMATCH'})")
    print(f"{'ingest rate (points/s)':<36}{sent / elapsed:>14,.0f}")
    print(f"{'errors (retried)':<36}{errors:>14}")
    for sample in sorted({e for r in results for e in r.errors})[:5]:
        print(f"  e.g. {sample}")
    print(f"{'ingest latency p50 / p95 (ms)':<36}{statistics.median(latencies) * 1000:>14.1f} / {percentile(latencies, 0.95) * 1000:.1f}")
    if memory:
        print(f"{'service RSS first / max / last (MB)':<36}{memory[0]:>14.0f} / {max(memory):.0f} / {memory[-1]:.0f}")


if __name__ == "__main__":
    main()
