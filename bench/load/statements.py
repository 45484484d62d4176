"""Statements per small batch and per detection pass, counted in-process on a fresh Postgres database.

    # 50 runs x 20 metrics, 11 rounds of one ~200-point batch per run
    .venv/bin/python bench/load/statements.py

Every statement psycopg sends (execute, executemany, COPY) is counted and timed by its first
words, for the ingest of a lab's worth of small batches (the service's own `ingest_batch`, in
the same session and transaction a request uses) and for the live-detection passes that follow
each round. The figures go into bench/load/README.md.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
for part in ("server", "client", "."):
    sys.path.insert(0, str(ROOT / part))

from holter_server.schemas.points import read_batch
from holter_server.services import detection
from holter_server.services.detection import LiveDetectors, detect_pending
from holter_server.services.ingest import ingest_batch
from holter_server.store import runs as runs_store
from holter_server.store.database import make_engine, make_session_factory, upgrade

from bench.ingest.run import postgres_database

COUNTS: Counter[str] = Counter()
TIMES: defaultdict[str, float] = defaultdict(float)


def _shape(sql: object) -> str:
    text = sql.as_string(None) if hasattr(sql, "as_string") else str(sql)
    text = re.sub(r"\s+", " ", text).strip()
    words = text.split(" ")
    head = " ".join(words[:2]).upper()
    for keyword in (" FROM ", " INTO ", "UPDATE ", " TABLE "):
        at = text.upper().find(keyword)
        if at >= 0:
            target = text[at + len(keyword) :].split(" ")[0].strip("(")
            return f"{head} … {keyword.strip()} {target}"[:80]
    return text[:80]


def _patch() -> None:
    for cls in (psycopg.Cursor,):
        for method in ("execute", "executemany", "copy"):
            original = getattr(cls, method)

            def wrapper(self, query, *args, __original=original, __method=method, **kwargs):  # type: ignore[no-untyped-def]
                key = ("COPY " if __method == "copy" else "") + _shape(query)
                COUNTS[key] += 1
                started = time.perf_counter()
                try:
                    return __original(self, query, *args, **kwargs)
                finally:
                    TIMES[key] += time.perf_counter() - started

            setattr(cls, method, wrapper)


def _report(title: str, units: int, unit: str, elapsed: float, cpu: float) -> None:
    total = sum(COUNTS.values())
    print(
        f"\n{title}: {total / units:.1f} statements per {unit}, {elapsed / units * 1000:.1f} ms per {unit} in all, "
        f"{cpu / units * 1000:.1f} ms of this process's CPU (the machine is shared: the CPU figure is the steadier)"
    )
    for key, count in COUNTS.most_common():
        print(f"  {count / units:>6.2f}  {TIMES[key] / units * 1000:>7.2f} ms  {key}")
    COUNTS.clear()
    TIMES.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--metrics", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument(
        "--read-every", type=int, default=5, help="rounds (seconds) between reads of a quiet metric: WAIT_S"
    )
    args = parser.parse_args()
    names = [f"metric_{i:02d}" for i in range(args.metrics)]
    with postgres_database() as url:
        upgrade(url)
        engine = make_engine(url)
        factory = make_session_factory(engine)
        run_ids = [f"stmt-{i:03d}" for i in range(args.runs)]
        with factory() as session:
            for run_id in run_ids:
                runs_store.create_or_resume_run(
                    session=session, run_id=run_id, project="load", name=None, config={}, tags=[]
                )
            session.commit()
        _patch()
        ingest_s = detect_s = ingest_cpu = detect_cpu = 0.0
        passes = 0
        live = LiveDetectors()  # the worker's detectors, kept between passes
        for round_ in range(args.rounds):
            steps = list(range(round_ * 10, round_ * 10 + 10))
            started, started_cpu = time.perf_counter(), time.process_time()
            for run_id in run_ids:
                body = {
                    "metrics": {
                        n: {"steps": steps, "values": [s * 0.001 + i for s in steps]} for i, n in enumerate(names)
                    },
                    "step_times": {"steps": steps, "times": [time.time()] * len(steps)},
                }
                with factory() as session:
                    ingest_batch(session=session, run_id=run_id, batch=read_batch(body), max_metrics=10_000)
                    session.commit()
            ingest_s += time.perf_counter() - started
            ingest_cpu += time.process_time() - started_cpu
            if round_ == 0:  # the first round creates the metrics: report the steady state
                COUNTS.clear()
                TIMES.clear()
                ingest_s = ingest_cpu = 0.0
                ingest_counts = None
            ingest_counts = (Counter(COUNTS), defaultdict(float, TIMES))
            COUNTS.clear()
            TIMES.clear()
            started, started_cpu = time.perf_counter(), time.process_time()
            # one pass, as the worker makes once a second (each metric claimed once in it): its
            # detectors read the points when they last read them WAIT_S (5 s) ago, else the
            # points wait (unless remarkable: a NaN, an outlier, a jump); rounds here come much
            # faster than once a second, so the wait is played by the round number
            detection.WAIT_S = 0.0 if round_ % args.read_every == 0 else float("inf")
            detect_pending(session_factory=factory, live=live)
            passes += 1
            detect_s += time.perf_counter() - started
            detect_cpu += time.process_time() - started_cpu
            if round_ == 0:
                COUNTS.clear()
                TIMES.clear()
                detect_s = detect_cpu = 0.0
                passes = 0
                continue
            detect_counts = (Counter(COUNTS), defaultdict(float, TIMES))
            COUNTS.clear()
            TIMES.clear()
            _accumulate("ingest", ingest_counts)
            _accumulate("detect", detect_counts)
        batches = args.runs * (args.rounds - 1)
        _restore("ingest")
        _report(
            f"ingest ({batches} batches of {args.metrics} metrics x 10 steps)", batches, "batch", ingest_s, ingest_cpu
        )
        _restore("detect")
        metric_rounds = batches * args.metrics
        print(f"\n(detection: {passes} passes of detect_pending over {args.rounds - 1} rounds)")
        _report(
            f"detection ({metric_rounds} metric-rounds of 10 new points)",
            batches,
            "batch ingested",
            detect_s,
            detect_cpu,
        )
        engine.dispose()


SAVED: dict[str, tuple[Counter[str], defaultdict[str, float]]] = {}


def _accumulate(name: str, counts: tuple[Counter[str], defaultdict[str, float]]) -> None:
    total_counts, total_times = SAVED.setdefault(name, (Counter(), defaultdict(float)))
    total_counts.update(counts[0])
    for key, value in counts[1].items():
        total_times[key] += value


def _restore(name: str) -> None:
    COUNTS.clear()
    TIMES.clear()
    COUNTS.update(SAVED[name][0])
    TIMES.update(SAVED[name][1])


if __name__ == "__main__":
    main()
