"""Holter read benchmark: chart reads of a 10M-point series over HTTP, on Postgres and SQLite.

    .venv/bin/python bench/reads/run.py                      # the full run (10M points, 200 x 50k family)
    .venv/bin/python bench/reads/run.py --points 1000000 --family-steps 5000 --no-mlflow   # quick

See bench/reads/README.md for what it measures and how.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import psycopg

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from holter_server.settings import Settings
from holter_server.store import points as points_store
from holter_server.store import runs as runs_store
from holter_server.store.database import make_engine, make_session_factory, session_scope, upgrade

from tests.servers import ServerProcess, free_port

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
MLFLOW_PYTHON = REPO / "bench" / ".venv-mlflow" / "bin" / "python"
RESULTS = REPO / "bench" / "results"
MAX_POINTS = 2000


# ---------------------------------------------------------------- data


def make_series(points: int, seed: int) -> tuple[np.ndarray, np.ndarray, dict[str, list[int]]]:
    """A loss-like curve with single-point spikes, dips, NaNs and infinities planted in it."""
    rng = np.random.default_rng(seed)
    steps = np.arange(points, dtype=np.int64)
    values = 3.0 * np.exp(-steps / (points / 5)) + 0.5 + rng.normal(0, 0.02, points)
    where = rng.choice(points, 45, replace=False).tolist()
    planted = {"spike": where[:20], "dip": where[20:30], "nan": where[30:40], "posinf": where[40:]}
    values[planted["spike"]] = 20.0 + rng.random(20)
    values[planted["dip"]] = -20.0 - rng.random(10)
    values[planted["nan"]] = math.nan
    values[planted["posinf"]] = math.inf
    return steps, values, planted


def load(factory, run_id: str, columns_of: Callable[[int, int], dict], total_steps: int, chunk_steps: int) -> float:
    """Store a run through the product's own write path (store.add_points: COPY or executemany,
    then the rollups), a chunk of steps per transaction; returns seconds."""
    began = time.perf_counter()
    with session_scope(factory) as session:
        runs_store.create_or_resume_run(
            session=session, run_id=run_id, project="bench", name=run_id, config={}, tags=[]
        )
    for first in range(0, total_steps, chunk_steps):
        last = min(first + chunk_steps, total_steps)
        with session_scope(factory) as session:
            points_store.add_points(session=session, run_id=run_id, columns=columns_of(first, last))
    return time.perf_counter() - began


# ---------------------------------------------------------------- measuring


def timed(fn: Callable[[], object], repeats: int) -> tuple[list[float], list[object]]:
    times, results = [], []
    for _ in range(repeats):
        began = time.perf_counter()
        results.append(fn())
        times.append((time.perf_counter() - began) * 1000)
    return times, results


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def number(value):
    if isinstance(value, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[value]
    return value


def hidden_points(body: dict, values: np.ndarray, planted: dict[str, list[int]]) -> list[tuple[str, int]]:
    """Planted points in the read's range whose bucket does not show them."""
    missed = []
    if not body["downsampled"]:
        shown = dict(zip(body["steps"], map(number, body["values"])))
        for kind, where in planted.items():
            for step in where:
                if body["start"] <= step <= body["end"] and not (
                    step in shown and (shown[step] == values[step] or math.isnan(values[step]))
                ):
                    missed.append((kind, step))
        return missed
    width, buckets = body["bucket_width"], body["buckets"]
    for kind, where in planted.items():
        for step in where:
            if not body["start"] <= step <= body["end"]:
                continue
            i = step // width - body["start"] // width
            ok = {
                "spike": buckets["max"][i] is not None
                and buckets["max"][i] >= values[step]
                and buckets["max"][i] in body["values"],
                "dip": buckets["min"][i] is not None
                and buckets["min"][i] <= values[step]
                and buckets["min"][i] in body["values"],
                "nan": buckets["nan"][i] >= 1,
                "posinf": buckets["posinf"][i] >= 1,
            }[kind]
            if not ok:
                missed.append((kind, step))
    return missed


def exact_against_truth(body: dict, steps: np.ndarray, values: np.ndarray) -> bool:
    """Every bucket's count, min, max and non-finite counts equal those of the points in it."""
    width, b = body["bucket_width"], body["buckets"]
    lo_idx = np.searchsorted(steps, np.maximum(np.asarray(b["start"]), body["start"]))
    hi_idx = np.searchsorted(steps, np.minimum(np.asarray(b["start"]) + width - 1, body["end"]), side="right")
    for i, (lo, hi) in enumerate(zip(lo_idx.tolist(), hi_idx.tolist())):
        inside = values[lo:hi]
        finite = inside[np.isfinite(inside)]
        if (
            b["count"][i] != len(inside)
            or b["nan"][i] != np.isnan(inside).sum()
            or b["posinf"][i] != (inside == np.inf).sum()
        ):
            return False
        if len(finite) and (b["max"][i] != finite.max() or b["min"][i] != finite.min()):
            return False
    return True


def naive_downsample(fetch: Callable[[], list[tuple[int, float]]], buckets: int) -> int:
    """The baseline: every point of the series in step order, then min/max per bucket in Python."""
    rows = fetch()
    steps = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    values = np.fromiter((math.nan if r[1] is None else r[1] for r in rows), dtype=np.float64, count=len(rows))
    edges = np.linspace(steps[0], steps[-1] + 1, buckets + 1)
    starts = np.searchsorted(steps, edges[:-1])
    starts = starts[starts < len(steps)]
    finite = np.where(np.isfinite(values), values, np.nan)
    with np.errstate(all="ignore"):
        mins = np.fmin.reduceat(finite, starts)
        maxs = np.fmax.reduceat(finite, starts)
    return len(mins) + len(maxs)


# ---------------------------------------------------------------- one store


def bench_store(kind: str, url: str, args: argparse.Namespace, report: dict) -> None:
    print(f"\n== {kind} ==", flush=True)
    sa_url = Settings(database_url=url).resolved_database_url()
    upgrade(sa_url)
    engine = make_engine(sa_url)
    factory = make_session_factory(engine)
    steps, values, planted = make_series(args.points, seed=7)
    short_steps, short_values, _ = make_series(args.mlflow_points, seed=8)

    seconds = load(
        factory,
        "big",
        lambda a, b: {"loss": (steps[a:b].tolist(), values[a:b].tolist(), [None] * (b - a))},
        args.points,
        250_000,
    )
    print(
        f"loaded {args.points:,} points of one series in {seconds:.1f}s ({args.points / seconds:,.0f} points/s, with "
        "rollups)",
        flush=True,
    )
    load(
        factory,
        "big",
        lambda a, b: {"loss_200k": (short_steps[a:b].tolist(), short_values[a:b].tolist(), [None] * (b - a))},
        args.mlflow_points,
        250_000,
    )
    rng = np.random.default_rng(1)
    layers = [f"act_norm/layer.{i}" for i in range(args.family_metrics)]
    base = rng.random(args.family_metrics)

    def family_columns(a: int, b: int) -> dict:
        s = list(range(a, b))
        return {
            name: (s, (base[i] + 0.01 * np.sin(np.arange(a, b) / 500.0)).tolist(), [None] * (b - a))
            for i, name in enumerate(layers)
        }

    family_points = args.family_metrics * args.family_steps
    seconds = load(factory, "family", family_columns, args.family_steps, max(1, 500_000 // args.family_metrics))
    print(
        f"loaded {args.family_metrics} metrics x {args.family_steps:,} steps in {seconds:.1f}s "
        f"({family_points / seconds:,.0f} points/s)",
        flush=True,
    )
    if kind == "postgres":
        with psycopg.connect(url, autocommit=True) as conn:  # what autovacuum does to a table that stopped growing
            conn.execute("VACUUM ANALYZE points")
            conn.execute("VACUUM ANALYZE rollups")

    # Live detection would spend this small machine's cores catching up on the 20M points just
    # bulk-loaded (and hold SQLite's write lock meanwhile); it has its own benchmark.
    env = {} if args.with_detection else {"HOLTER_DETECTION_ENABLED": "false"}
    server = ServerProcess(
        url, env=env, log_path=Path(tempfile.gettempdir()) / f"holter-bench-reads-{kind}.log"
    ).start()
    cases: dict[str, dict] = {}
    faithful = {"reads checked": 0, "hidden": 0, "exact buckets": True}
    try:
        with server.api(timeout=120) as client:

            def series_read(metric: str = "loss", **params) -> dict:
                answer = client.get(f"/runs/big/metrics/{metric}/points", params={"max_points": MAX_POINTS, **params})
                answer.raise_for_status()
                return answer.json()

            def zoom_params() -> dict:
                width = max(1, args.points // 100)
                first = int(rng.integers(0, args.points - width))
                return {"start": first, "end": first + width - 1}

            def check(bodies: list[dict], exact: bool = True) -> None:
                for body in bodies:
                    faithful["reads checked"] += 1
                    faithful["hidden"] += len(hidden_points(body, values, planted))
                    if exact and body["downsampled"] and not exact_against_truth(body, steps, values):
                        faithful["exact buckets"] = False

            series_read()  # warm the connection pool and caches as a dashboard would
            times, bodies = timed(series_read, args.repeats)
            cases["full range, 2000 points"] = summary(times)
            check(bodies)
            times, bodies = timed(lambda: series_read(**zoom_params()), args.repeats)
            cases["zoom 1% of range, 2000 points"] = summary(times)
            check(bodies)
            for step in (planted["spike"] + planted["nan"])[:10]:  # zoom onto planted points, several widths
                for width in (args.points // 10, args.points // 1000, 5000):
                    check([series_read(start=max(0, step - width // 2), end=step + width // 2)])

            # The writer is another process, as a training job is: its encoding does not share our GIL.
            stop = multiprocessing.Event()
            ingested = multiprocessing.Value("q", 0)
            writer = multiprocessing.Process(
                target=ingest_loop, args=(server.url, args.points, stop, ingested), daemon=True
            )
            began = time.perf_counter()
            writer.start()
            time.sleep(1.0)
            times, bodies = timed(lambda: series_read(**(zoom_params() if rng.random() < 0.5 else {})), args.repeats)
            stop.set()
            writer.join(60)
            rate = ingested.value / (time.perf_counter() - began)
            cases["full or zoom read during ingest"] = {**summary(times), "concurrent ingest points/s": round(rate)}
            check(bodies, exact=False)  # the series grew past the points we hold in memory

            def family_read() -> None:
                client.get(
                    "/runs/family/family", params={"prefix": "act_norm/layer.", "max_buckets": 200}
                ).raise_for_status()

            times, _ = timed(family_read, max(3, args.repeats // 3))
            cases[f"family matrix {args.family_metrics} x 200"] = summary(times)

            def compare_read() -> None:
                client.get(
                    "/series", params={"run": "family", "metric": layers[:10], "max_points": MAX_POINTS}
                ).raise_for_status()

            times, _ = timed(compare_read, max(3, args.repeats // 3))
            cases["10 series of the family, 2000 points each"] = summary(times)

            times, _ = timed(lambda: series_read("loss_200k"), args.repeats)
            cases[f"{args.mlflow_points // 1000}k series, 2000 points"] = summary(times)
            times, _ = timed(lambda: client.get("/runs/big/metrics/loss_200k/points").raise_for_status(), 3)
            cases[f"{args.mlflow_points // 1000}k series, every point (plain read)"] = summary(times)

        times, _ = timed(lambda: naive_downsample(naive_fetch(kind, url, sa_url), MAX_POINTS // 2), args.naive_repeats)
        cases["naive: full scan ORDER BY step + Python min/max"] = summary(times)
    finally:
        server.stop()
        engine.dispose()
    report[kind] = {"cases": cases, "faithfulness": faithful}
    print_cases(kind, cases, faithful)


def ingest_loop(url: str, first_step: int, stop, ingested) -> None:  # type: ignore[no-untyped-def]
    """Keep appending 5,000 steps of 11 metrics (the big series among them) until told to stop."""
    with httpx.Client(base_url=f"{url}/api/v1", timeout=120) as writer:
        step = first_step
        while not stop.is_set():
            steps = list(range(step, step + 5000))
            batch = {f"live_{i}": {"steps": steps, "values": [1.0] * 5000} for i in range(10)}
            batch["loss"] = {"steps": steps, "values": [0.6] * 5000}
            writer.post("/runs/big/points", json={"metrics": batch}).raise_for_status()
            with ingested.get_lock():
                ingested.value += 55_000
            step += 5000


def naive_fetch(kind: str, url: str, sa_url: str) -> Callable[[], list]:
    sql = (
        "SELECT step, value FROM points WHERE run_id = {p} AND metric_id = (SELECT metric_id FROM metrics WHERE "
        "run_id = {p} AND name = {p}) AND step < {p} ORDER BY step"
    )

    def fetch() -> list:
        if kind == "postgres":
            with psycopg.connect(url) as conn:
                return conn.execute(sql.format(p="%s"), ("big", "big", "loss", 2**62)).fetchall()
        import sqlite3

        with sqlite3.connect(sa_url.removeprefix("sqlite:///")) as conn:
            return conn.execute(sql.format(p="?"), ("big", "big", "loss", 2**62)).fetchall()

    return fetch


def summary(times: list[float]) -> dict:
    return {"p50_ms": round(statistics.median(times), 1), "p95_ms": round(pct(times, 0.95), 1), "n": len(times)}


def print_cases(kind: str, cases: dict, faithful: dict) -> None:
    print(f"{'case':<52} {'p50 ms':>9} {'p95 ms':>9} {'n':>4}")
    for name, case in cases.items():
        extra = (
            f"  (ingest alongside: {case['concurrent ingest points/s']:,} points/s)"
            if "concurrent ingest points/s" in case
            else ""
        )
        print(f"{name:<52} {case['p50_ms']:>9.1f} {case['p95_ms']:>9.1f} {case['n']:>4}{extra}")
    print(
        f"faithfulness: {faithful['reads checked']} reads checked, {faithful['hidden']} planted points hidden, "
        f"buckets exact against the true points: {faithful['exact buckets']}",
        flush=True,
    )


# ---------------------------------------------------------------- MLflow

MLFLOW_SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient
    url, points = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(8)
    steps = np.arange(points)
    values = 3.0 * np.exp(-steps / (points / 5)) + 0.5 + rng.normal(0, 0.02, points)
    client = MlflowClient(tracking_uri=url)
    run = client.create_run(client.create_experiment("bench"))
    began = time.perf_counter()
    for first in range(0, points, 1000):
        batch = [Metric("loss", float(values[i]), 0, int(i)) for i in range(first, min(points, first + 1000))]
        client.log_batch(run.info.run_id, metrics=batch)
    load = time.perf_counter() - began
    times = []
    for _ in range(3):
        began = time.perf_counter()
        history = client.get_metric_history(run.info.run_id, "loss")
        times.append(time.perf_counter() - began)
    print(json.dumps({"load_s": load, "history_s": times, "points": len(history)}))
""")


def bench_mlflow(args: argparse.Namespace, report: dict) -> None:
    if not MLFLOW_PYTHON.exists():
        print(f"\nMLflow skipped: {MLFLOW_PYTHON} not found")
        return
    name = f"mlflow_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    port = free_port()
    log = open(Path(tempfile.gettempdir()) / "mlflow-bench-server.log", "wb")  # noqa: SIM115 — the server's, for its life
    server = subprocess.Popen(
        [
            str(MLFLOW_PYTHON),
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                print("\nMLflow server did not start; see", log.name)
                return
            time.sleep(1)
        print(
            f"\n== MLflow 3 (server on Postgres, one worker) ==\nlogging {args.mlflow_points:,} points by log_batch "
            "...",
            flush=True,
        )
        out = subprocess.run(
            [str(MLFLOW_PYTHON), "-c", MLFLOW_SCRIPT, f"http://127.0.0.1:{port}", str(args.mlflow_points)],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
        report["mlflow"] = result
        print(
            f"log_batch load {result['load_s']:.1f}s; get_metric_history of {result['points']:,} points: "
            + ", ".join(f"{t:.2f}s" for t in result["history_s"])
        )
    finally:
        server.terminate()
        server.wait(30)
        log.close()
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def print_ratios(args: argparse.Namespace, report: dict) -> None:
    print("\n== ratios (p50; larger = Holter faster) ==")
    short = f"{args.mlflow_points // 1000}k series"
    for kind in ("postgres", "sqlite"):
        if kind not in report:
            continue
        cases = report[kind]["cases"]
        full = cases["full range, 2000 points"]["p50_ms"]
        naive = cases["naive: full scan ORDER BY step + Python min/max"]["p50_ms"]
        print(
            f"{kind}: naive full scan / Holter full-range read = {naive / full:,.0f}x ({naive:,.0f} ms vs {full:.1f} "
            "ms)"
        )
        if "mlflow" in report:
            history = statistics.median(report["mlflow"]["history_s"]) * 1000
            down = cases[f"{short}, 2000 points"]["p50_ms"]
            plain = cases[f"{short}, every point (plain read)"]["p50_ms"]
            print(
                f"{kind}: MLflow get_metric_history ({args.mlflow_points:,} points, {history:,.0f} ms) / Holter "
                "2000-point read "
                f"= {history / down:,.0f}x; / Holter read of every point = {history / plain:,.1f}x"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=10_000_000, help="points in the big series")
    parser.add_argument("--family-metrics", type=int, default=200)
    parser.add_argument("--family-steps", type=int, default=50_000)
    parser.add_argument("--mlflow-points", type=int, default=200_000, help="points of the series compared with MLflow")
    parser.add_argument("--repeats", type=int, default=40, help="reads per case")
    parser.add_argument("--naive-repeats", type=int, default=2)
    parser.add_argument("--stores", default="postgres,sqlite")
    parser.add_argument("--no-mlflow", action="store_true")
    parser.add_argument("--with-detection", action="store_true", help="keep live detection on in the server")
    args = parser.parse_args()
    report: dict = {"args": vars(args)}
    for kind in args.stores.split(","):
        if kind == "postgres":
            name = f"holter_bench_reads_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{name}"')
            try:
                bench_store(kind, f"postgresql://postgres@127.0.0.1:5432/{name}", args, report)
            finally:
                with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        else:
            with tempfile.TemporaryDirectory() as folder:
                bench_store(kind, f"sqlite:///{folder}/bench.db", args, report)
    if not args.no_mlflow:
        bench_mlflow(args, report)
    print_ratios(args, report)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "reads.json").write_text(json.dumps(report, indent=2))
    print(f"\nwritten to {RESULTS / 'reads.json'}")


if __name__ == "__main__":
    main()
