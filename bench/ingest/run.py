"""Ingest benchmark: points per second from `run.log()` until durable, and what `log()` costs.

    .venv/bin/python bench/ingest/run.py                # everything (MLflow venv made if missing)
    .venv/bin/python bench/ingest/run.py --no-mlflow    # Holter and the store's own limit only

Measures, in one run on this machine:
* end-to-end ingest into Postgres and SQLite: 1,000,000 points over 10 metrics from one client,
  timed from the first `log()` until `finish()` returns (every batch acknowledged, which the
  service does only after its transaction committed); on Postgres also with live detection
  switched off (HOLTER_DETECTION_ENABLED=false), to show what detection costs ingest;
* microseconds per `run.log()` call with a 5-metric dict while the service runs;
* MLflow's tracking server on the same Postgres server (`log_batch` at its 1,000-value limit,
  and `log_metric` per call), from a virtual environment of its own (bench/.venv-mlflow);
* the store's exactly-once limit: COPY of the same rows into a staging table, then
  `INSERT ... ON CONFLICT DO NOTHING` into a table with the points table's key.
Medians over --repeats runs. Every service's stored points are counted in its own database
after its run (Holter's `points`, MLflow's `metrics`), and a run that stored fewer or more than
it was sent fails the benchmark. MLflow gets --mlflow-points (100,000 by default: at its rate a
million takes minutes); rates are compared, and `--mlflow-points 1000000` gives it the same load.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import holter

from tests.servers import ServerProcess, free_port

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
MLFLOW_VENV = ROOT / "bench" / ".venv-mlflow"


@contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh Postgres database, dropped afterwards."""
    name = f"holter_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def stored_points(database_url: str, table: str, run_column: str, run_id: str) -> int:
    """Rows stored for one run, counted in the service's own database (Postgres or an SQLite
    file): what every service is held to alike, not what it says it stored."""
    query = f"SELECT count(*) FROM {table} WHERE {run_column} = "
    if database_url.startswith("sqlite"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as db:
            return db.execute(query + "?", (run_id,)).fetchone()[0]
    with psycopg.connect(database_url) as db:
        return db.execute(query + "%s", (run_id,)).fetchone()[0]


def holter_ingest(url: str, database_url: str, points: int, metrics: int, spool: Path) -> float:
    """Points per second from the first log() until finish() returned; every point counted in
    the database afterwards."""
    names = [f"m{i}" for i in range(metrics)]
    run = holter.init(project="bench", name="ingest", url=url, spool_dir=spool)
    started = time.perf_counter()
    for step in range(points // metrics):
        run.log({name: step * 0.5 + i for i, name in enumerate(names)}, step=step)
    run.finish()
    elapsed = time.perf_counter() - started
    stored = stored_points(database_url, "points", "run_id", run.id)
    assert stored == points, f"Holter stored {stored} of {points} points"
    return points / elapsed


def log_cost_us(url: str, calls: int, spool: Path) -> float:
    """Microseconds per log() call with a 5-metric dict, the sender running beside it."""
    run = holter.init(project="bench", name="log-cost", url=url, spool_dir=spool)
    metrics = {"loss": 2.31, "grad_norm": 0.8, "lr": 3e-4, "tokens_per_s": 51234.0, "logprob_mismatch": 0.002}
    started = time.perf_counter()
    for step in range(calls):
        run.log(metrics, step=step)
    elapsed = time.perf_counter() - started
    run.finish()
    return elapsed / calls * 1e6


def store_limit(database_url: str, points: int, metrics: int) -> float:
    """Rows per second through COPY into staging + INSERT ... ON CONFLICT DO NOTHING."""
    now = time.time()
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS limit_points (run_id varchar(64), metric_id int, step bigint, "
            "value float8, wall_time float8, PRIMARY KEY (run_id, metric_id, step))"
        )
        conn.execute("TRUNCATE limit_points")
        conn.execute("CREATE TEMP TABLE staging (metric_id int, step bigint, value float8, wall_time float8)")
        conn.commit()
        started = time.perf_counter()
        with conn.cursor() as cursor:
            with cursor.copy("COPY staging FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["int4", "int8", "float8", "float8"])
                for step in range(points // metrics):
                    for metric_id in range(metrics):
                        copy.write_row((metric_id, step, step * 0.5 + metric_id, now))
            cursor.execute(
                "INSERT INTO limit_points SELECT 'bench-run-0000', metric_id, step, value, wall_time FROM staging ON "
                "CONFLICT DO NOTHING"
            )
        conn.commit()
        return points / (time.perf_counter() - started)


def ensure_mlflow() -> Path | None:
    python = MLFLOW_VENV / "bin" / "python"
    if not python.exists():
        print("creating bench/.venv-mlflow (pip install mlflow psycopg2-binary) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(MLFLOW_VENV)], check=True)
        result = subprocess.run([str(python), "-m", "pip", "install", "-q", "mlflow", "psycopg2-binary"], check=False)
        if result.returncode != 0:
            print("could not install MLflow; skipping it")
            return None
    return python


def mlflow_ingest(python: Path, database_url: str, points: int, metrics: int) -> dict[str, float]:
    port = free_port()
    with tempfile.TemporaryDirectory() as artifacts:
        server = subprocess.Popen(
            [
                str(MLFLOW_VENV / "bin" / "mlflow"),
                "server",
                "--backend-store-uri",
                database_url.replace("postgresql://", "postgresql+psycopg2://"),
                "--default-artifact-root",
                artifacts,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:
                try:
                    __import__("urllib.request").request.urlopen(f"{url}/health", timeout=1)
                    break
                except OSError as exc:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise RuntimeError("mlflow server did not start") from exc
                    time.sleep(0.5)
            out = subprocess.run(
                [str(python), str(Path(__file__).with_name("mlflow_client.py")), url, str(points), str(metrics)],
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(out.stdout.strip().splitlines()[-1])
            # counted in MLflow's own table, as Holter's are in its: the batches' points and the
            # 200 single log_metric calls
            stored = stored_points(database_url, "metrics", "run_uuid", result["run_id"])
            assert stored == points + 200, f"MLflow stored {stored} of {points + 200} points"
            return result
        finally:
            server.terminate()
            server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--metrics", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    # Fewer calls than the client's queue bound (200,000 calls): past it log() waits for the sender by design.
    parser.add_argument("--log-calls", type=int, default=50_000)
    parser.add_argument(
        "--mlflow-points", type=int, default=100_000, help="MLflow is slow: fewer points, rate compared"
    )
    parser.add_argument("--no-mlflow", action="store_true")
    args = parser.parse_args()

    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, postgres_database() as pg_url:
        spool = Path(tmp) / "spool"
        stores = {
            "postgres": (pg_url, {}),
            "postgres, detection off": (pg_url, {"HOLTER_DETECTION_ENABLED": "false"}),
            "sqlite": (f"sqlite:///{tmp}/holter.db", {}),
        }
        for store, (database_url, env) in stores.items():
            server = ServerProcess(database_url, env=env, log_path=Path(tmp) / "server.log").start()
            try:
                rates = [
                    holter_ingest(server.url, database_url, args.points, args.metrics, spool)
                    for _ in range(args.repeats)
                ]
                results[f"holter_{store}"] = statistics.median(rates)
                print(f"holter ingest, {store}: {', '.join(f'{r:,.0f}' for r in rates)} points/s", flush=True)
                if store == "postgres":
                    costs = [log_cost_us(server.url, args.log_calls, spool) for _ in range(5)]
                    results["log_us"] = statistics.median(costs)
                    print(f"log() cost: {', '.join(f'{c:.2f}' for c in costs)} µs", flush=True)
            finally:
                server.stop()
        limits = [store_limit(pg_url, args.points, args.metrics) for _ in range(args.repeats)]
        results["store_limit"] = statistics.median(limits)
        print(f"store limit (COPY + ON CONFLICT): {', '.join(f'{r:,.0f}' for r in limits)} rows/s", flush=True)
    python = None if args.no_mlflow else ensure_mlflow()
    if python is not None:
        with postgres_database() as mlflow_db:
            mlflow = mlflow_ingest(python, mlflow_db, args.mlflow_points, args.metrics)
        results["mlflow"] = mlflow["log_batch_points_per_s"]
        results["mlflow_log_metric_ms"] = mlflow["log_metric_ms"]

    print()
    print(f"{'measure':<48}{'median':>16}")
    print(f"{'Holter ingest, Postgres (points/s)':<48}{results['holter_postgres']:>16,.0f}")
    print(f"{'  same, live detection off (points/s)':<48}{results['holter_postgres, detection off']:>16,.0f}")
    print(f"{'Holter ingest, SQLite (points/s)':<48}{results['holter_sqlite']:>16,.0f}")
    print(f"{'store exactly-once limit, Postgres (rows/s)':<48}{results['store_limit']:>16,.0f}")
    print(f"{'run.log() with 5 metrics (µs/call)':<48}{results['log_us']:>16.2f}")
    if "mlflow" in results:
        print(f"{'MLflow log_batch, Postgres (points/s)':<48}{results['mlflow']:>16,.0f}")
        print(f"{'MLflow log_metric (ms/call)':<48}{results['mlflow_log_metric_ms']:>16.1f}")
        print(f"{'Holter / MLflow (goal >= 30x)':<48}{results['holter_postgres'] / results['mlflow']:>15.1f}x")
    print(f"{'Holter / store limit (goal >= 0.5)':<48}{results['holter_postgres'] / results['store_limit']:>16.2f}")


if __name__ == "__main__":
    main()
