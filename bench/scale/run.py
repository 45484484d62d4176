"""Ingest with 1, 2 and 4 service processes: points/s and request latency, on one Postgres and
(with --citus-url) on a Citus coordinator and its workers.

    .venv/bin/python bench/scale/run.py                                  # Postgres, 1,2,4 processes, 3 x 10 s each
    .venv/bin/python bench/scale/run.py --citus-url postgresql://postgres@127.0.0.1:9700/postgres
    .venv/bin/python bench/scale/run.py --processes 1,2 --seconds 20 --repeats 5 --senders 32
    .venv/bin/python bench/scale/run.py --postgres-url postgresql://postgres@db:5433/postgres --start-deadline 300

For each store and each process count: a fresh database (on Citus: made on the coordinator and
every worker, then `holter db upgrade --distribute`), `holter serve --workers N` on it (live
detection on, in its worker process, as deployed), and `--senders` training jobs, each its own
run, each posting `--metrics` metrics x `--steps` steps (the body the client sends) as soon as the
previous batch is answered: a closed loop, so points/s is what the service absorbs, not what
was offered. Per repeat: points/s, request latency p50/p95, CPU-seconds of the service's
processes and of the database backends serving the database (every node's, on Citus), and
points stored against points acknowledged. Then per store and count: the median of the repeats
and their spread (min-max).

`--postgres-url` is the plain Postgres server's maintenance database (a role that may create
databases); `--start-deadline` how long a service may take to answer its health check (a
Citus cluster's first migration takes longer than a laptop's Postgres). The service is stopped,
its whole process group, and its databases dropped on any exit: an error, a deadline passed,
Ctrl-C, TERM or HUP.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.ingest.run import ADMIN_URL
from bench.load.run import TICK, CpuMeter, Holter
from tests.load import percentile


@dataclass
class Repeat:
    seconds: float
    points: int
    requests: int
    latencies: list[float]
    service_cpu: float
    database_cpu: float
    server_cpu: float | None
    stored: int

    @property
    def points_per_s(self) -> float:
        return self.points / self.seconds


def _url(base: str, database: str, host: str | None = None, port: int | None = None) -> str:
    url = make_url(base).set(database=database)
    if host is not None:
        url = url.set(host=host, port=port)
    return url.render_as_string(hide_password=False)


def citus_nodes(admin_url: str) -> list[tuple[str, int]]:
    """The coordinator's (host, port) from its URL, then every active worker's."""
    url = make_url(admin_url)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        workers = [
            (h, int(p)) for h, p in admin.execute("SELECT node_name, node_port FROM citus_get_active_worker_nodes()")
        ]
    return [(url.host or "127.0.0.1", url.port or 5432), *workers]


@contextmanager
def citus_database(admin_url: str, shard_count: int) -> Iterator[str]:
    """A fresh database on every node of the cluster, distributed by `holter db upgrade --distribute`."""
    import subprocess

    name = f"holter_scale_{uuid.uuid4().hex[:8]}"
    nodes = citus_nodes(admin_url)
    admin_db = make_url(admin_url).database or "postgres"
    for host, port in nodes:
        with psycopg.connect(_url(admin_url, admin_db, host, port), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        with psycopg.connect(_url(admin_url, name, host, port), autocommit=True) as db:
            db.execute("CREATE EXTENSION citus")
    coordinator = _url(admin_url, name)
    with psycopg.connect(coordinator, autocommit=True) as db:
        db.execute("SELECT citus_set_coordinator_host(%s, %s)", nodes[0])
        for host, port in nodes[1:]:
            db.execute("SELECT citus_add_node(%s, %s)", (host, port))
    try:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "holter.cli",
                "db",
                "upgrade",
                "--db",
                coordinator,
                "--distribute",
                "--shard-count",
                str(shard_count),
            ],
            check=True,
            capture_output=True,
            env=_env(),
        )
        yield coordinator
    finally:
        for host, port in nodes:
            with psycopg.connect(_url(admin_url, admin_db, host, port), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    """A fresh database on the Postgres server of `admin_url`, dropped afterwards."""
    name = f"holter_scale_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _url(admin_url, name)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _exit_on_signal(number: int, _frame: object) -> None:
    raise SystemExit(128 + number)  # unwinds like Ctrl-C: services stopped, databases dropped


def _env() -> dict[str, str]:
    import os

    path = os.pathsep.join(str(ROOT / part) for part in ("client", "server", "dashboard", "."))
    return {**os.environ, "PYTHONPATH": path}


def backends(admin_urls: list[str], database: str) -> Callable[[], list[int]]:
    """The backends (pids on this machine) serving `database` on each of these servers."""

    def pids() -> list[int]:
        out: list[int] = []
        for admin_url in admin_urls:
            with psycopg.connect(admin_url, autocommit=True) as admin:
                out += [
                    pid for (pid,) in admin.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (database,))
                ]
        return out

    return pids


def _postmaster(admin_url: str) -> int | None:
    """The pid of the postmaster behind `admin_url`, if that server runs on this machine."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        (backend,) = admin.execute("SELECT pg_backend_pid()").fetchone() or (0,)
    try:
        with open(f"/proc/{backend}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])  # the backend's parent
    except (OSError, IndexError, ValueError):
        return None  # another machine's server: its CPU cannot be read from here


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def servers(admin_urls: list[str]) -> Callable[[], float | None]:
    """CPU-seconds so far of every process of these database servers, ended ones included.

    A backend's CPU goes to its postmaster's children's time (cutime + cstime) when it ends, so
    the postmaster's own and children's time plus its live children's time counts every backend,
    the short-lived ones Citus opens between nodes too, and every background process. Exact for
    servers that serve nothing but this bench; None where a server is not on this machine."""
    postmasters = [_postmaster(url) for url in admin_urls]

    def total() -> float | None:
        if None in postmasters:
            return None
        ticks = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = _stat(int(entry.name))
            except (OSError, IndexError):
                continue
            if int(fields[1]) in postmasters:  # a backend or background process: utime + stime
                ticks += int(fields[11]) + int(fields[12])
        for pid in postmasters:
            fields = _stat(pid or 0)  # the postmaster itself and its ended children
            ticks += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        return ticks / TICK

    return total


class ServerMeter:
    """CPU-seconds of whole database servers (`servers`) between `start()` and `stop()`."""

    def __init__(self, total: Callable[[], float | None]) -> None:
        self.total = total
        self.before: float | None = None

    def start(self) -> None:
        self.before = self.total()

    def stop(self) -> float | None:
        after = self.total()
        return None if after is None or self.before is None else after - self.before


async def _sender(
    service: Holter,
    client: httpx.AsyncClient,
    run_id: str,
    names: list[str],
    steps: int,
    until: float,
    latencies: list[float],
) -> int:
    step, points = 0, 0
    while time.monotonic() < until:
        batch = list(range(step, step + steps))
        latencies.extend(await service.post(client, run_id, names, batch, time.time()))
        step += steps
        points += steps * len(names)
    return points


async def _closed_loop(
    service: Holter, senders: int, metrics: int, steps: int, seconds: float, meters: list[CpuMeter | ServerMeter]
) -> tuple[list[str], int, list[float], float]:
    names = [f"metric_{i:02d}" for i in range(metrics)]
    limits = httpx.Limits(max_connections=senders + 4, max_keepalive_connections=senders + 4)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        prefix = f"scale-{uuid.uuid4().hex[:6]}"
        run_ids = [await service.create_run(client, f"{prefix}-{i:03d}") for i in range(senders)]
        latencies: list[float] = []
        for meter in meters:
            meter.start()
        started = time.monotonic()
        sent = await asyncio.gather(
            *(_sender(service, client, run_id, names, steps, started + seconds, latencies) for run_id in run_ids)
        )
        return run_ids, sum(sent), latencies, time.monotonic() - started


def measure(
    service: Holter,
    database_pids: Callable[[], list[int]],
    server_cpu: Callable[[], float | None],
    args: argparse.Namespace,
) -> Repeat:
    service_meter, database_meter = CpuMeter(service.pids), CpuMeter(database_pids)
    server_meter = ServerMeter(server_cpu)
    meters: list[CpuMeter | ServerMeter] = [service_meter, database_meter, server_meter]
    run_ids, points, latencies, elapsed = asyncio.run(
        _closed_loop(service, args.senders, args.metrics, args.steps, args.seconds, meters)
    )
    return Repeat(
        seconds=elapsed,
        points=points,
        requests=len(latencies),
        latencies=latencies,
        service_cpu=service_meter.stop(),
        database_cpu=database_meter.stop(),
        server_cpu=server_meter.stop(),
        stored=service.stored(run_ids),
    )


def spread(values: list[float], fmt: str) -> str:
    ordered = sorted(values)
    return f"{format(statistics.median(ordered), fmt)} ({format(ordered[0], fmt)}-{format(ordered[-1], fmt)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", default="1,2,4", help="holter serve --workers values, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--senders", type=int, default=16, help="concurrent jobs, each its own run")
    parser.add_argument("--metrics", type=int, default=20, help="metrics per batch")
    parser.add_argument("--steps", type=int, default=10, help="steps per batch")
    parser.add_argument(
        "--citus-url", help="a database on a Citus coordinator that may create databases: also measure there"
    )
    parser.add_argument("--shard-count", type=int, default=8, help="with --citus-url: shards per distributed table")
    parser.add_argument("--no-postgres", action="store_true", help="measure on Citus only")
    parser.add_argument(
        "--postgres-url",
        default=ADMIN_URL,
        help="the plain Postgres server's maintenance database (default: %(default)s)",
    )
    parser.add_argument(
        "--start-deadline", type=float, default=90.0, help="seconds a service may take to answer (default: %(default)s)"
    )
    args = parser.parse_args()
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, _exit_on_signal)
    counts = [int(n) for n in args.processes.split(",")]
    stores = ([] if args.no_postgres else ["postgres"]) + (["citus"] if args.citus_url else [])
    print(
        f"closed loop: {args.senders} senders x {args.metrics} metrics x {args.steps} steps a batch "
        f"({args.metrics * args.steps} points), {args.repeats} x {args.seconds:g} s per setting; live detection on",
        flush=True,
    )
    print(
        f"{'store':<9}{'procs':>6}{'points/s':>10}{'p50 ms':>8}{'p95 ms':>8}{'svc CPU-s':>10}{'db CPU-s':>9}"
        f"{'srv CPU-s':>10}  stored",
        flush=True,
    )
    summary: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for store in stores:
            for count in counts:
                if store == "citus":
                    made = citus_database(args.citus_url, args.shard_count)
                    nodes = citus_nodes(args.citus_url)
                    admin_db = make_url(args.citus_url).database or "postgres"
                    admin_urls = [_url(args.citus_url, admin_db, host, port) for host, port in nodes]
                else:
                    made = postgres_database(args.postgres_url)
                    admin_urls = [args.postgres_url]
                with made as database_url:
                    service = Holter(database_url, Path(tmp) / f"{store}-{count}.log", count)
                    try:
                        service.start(args.start_deadline)
                        pids = backends(admin_urls, make_url(database_url).database or "")
                        server_cpu = servers(admin_urls)
                        repeats = []
                        for _ in range(args.repeats):
                            repeat = measure(service, pids, server_cpu, args)
                            repeats.append(repeat)
                            exact = (
                                "exact"
                                if repeat.stored == repeat.points
                                else f"MISMATCH {repeat.stored:,} of {repeat.points:,}"
                            )
                            print(
                                f"{store:<9}{count:>6}{repeat.points_per_s:>10,.0f}"
                                f"{percentile(repeat.latencies, 0.5) * 1000:>8.0f}"
                                f"{percentile(repeat.latencies, 0.95) * 1000:>8.0f}"
                                f"{repeat.service_cpu:>10.1f}{repeat.database_cpu:>9.1f}"
                                f"{'-' if repeat.server_cpu is None else format(repeat.server_cpu, '.1f'):>10}"
                                f"  {exact}",
                                flush=True,
                            )
                    finally:
                        service.stop()
                summary.append(
                    f"{store:<9}{count:>2} process(es): points/s {spread([r.points_per_s for r in repeats], ',.0f')}, "
                    f"p95 ms {spread([percentile(r.latencies, 0.95) * 1000 for r in repeats], '.0f')}, "
                    f"CPU-s per 100k points (service + database) "
                    f"{spread([(r.service_cpu + r.database_cpu) / r.points * 1e5 for r in repeats], '.1f')}"
                    + (
                        ""
                        if any(r.server_cpu is None for r in repeats)
                        else ", with the whole database servers' CPU instead "
                        f"{spread([(r.service_cpu + (r.server_cpu or 0.0)) / r.points * 1e5 for r in repeats], '.1f')}"
                    )
                )
    print("\nmedian (min-max) over the repeats:")
    for line in summary:
        print(line)


if __name__ == "__main__":
    main()
