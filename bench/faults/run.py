"""Fault benchmark: a training job logging through a long service outage loses nothing.

    .venv/bin/python bench/faults/run.py                 # a 5-minute outage
    .venv/bin/python bench/faults/run.py --outage 30     # a short one

A client logs 10 metrics at 100 steps/s into a service on Postgres; the service is SIGKILLed
and stays down for --outage seconds while the client keeps logging (the batches go to the disk
spool, log() keeps returning at once); then the service comes back and the spool drains. Reports
the spool's size at its largest, how long draining took, the slowest log() call, and whether
every point is stored exactly once.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import holter

from bench.ingest.run import postgres_database
from tests.servers import ServerProcess

METRICS = 10
RATE = 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outage", type=float, default=300.0, help="seconds the service stays down")
    parser.add_argument("--before", type=float, default=15.0)
    parser.add_argument("--after", type=float, default=15.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, postgres_database() as database_url:
        server = ServerProcess(database_url, log_path=Path(tmp) / "server.log").start()
        spool = Path(tmp) / "spool"
        run = holter.init(project="faults", name="outage", url=server.url, spool_dir=spool)
        names = [f"m{i}" for i in range(METRICS)]
        step, slowest, peak_files, peak_bytes = 0, 0.0, 0, 0
        phases = [("before", args.before), ("outage", args.outage), ("after", args.after)]
        for phase, seconds in phases:
            if phase == "outage":
                server.kill()
            if phase == "after":
                server.start()
                back = time.monotonic()
            started = time.monotonic()
            while time.monotonic() - started < seconds:
                t = time.perf_counter()
                run.log({name: step * 0.5 + i for i, name in enumerate(names)}, step=step)
                slowest = max(slowest, time.perf_counter() - t)
                step += 1
                if step % RATE == 0:
                    files = list((spool / run.id).glob("*.json"))
                    peak_files = max(peak_files, len(files))
                    peak_bytes = max(peak_bytes, sum(f.stat().st_size for f in files if f.exists()))
                time.sleep(1 / RATE)
        run.finish(timeout=600)
        drained = time.monotonic() - back
        stored = {m["name"]: m["count"] for m in httpx.get(f"{server.url}/api/v1/runs/{run.id}").json()["metrics"]}
        series = httpx.get(f"{server.url}/api/v1/runs/{run.id}/metrics/m3/points").json()
        exact = series["steps"] == list(range(step)) and series["values"] == [s * 0.5 + 3 for s in range(step)]
        server.stop()
    print(f"outage of {args.outage:g} s while logging {METRICS} metrics at ~{RATE} steps/s")
    print(
        f"{'points logged / stored':<36}{step * METRICS:>12,} / {sum(stored.values()):,}  "
        f"({'exactly once' if exact and all(v == step for v in stored.values()) else 'MISMATCH'})"
    )
    print(f"{'spool at its largest':<36}{peak_files:>12} files, {peak_bytes / 1e6:.1f} MB")
    print(f"{'service back to all stored (s)':<36}{drained:>12.1f}")
    print(f"{'slowest log() call (ms)':<36}{slowest * 1000:>12.2f}")


if __name__ == "__main__":
    main()
