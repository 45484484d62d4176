"""Load benchmark: a lab's worth of training jobs at once, Holter beside FastTrackML, on Postgres.

    .venv/bin/python bench/load/run.py                          # 50, 100, 200 jobs, 20 s each, both services
    .venv/bin/python bench/load/run.py --jobs 200 --seconds 60  # one level, longer
    .venv/bin/python bench/load/run.py --targets holter --holter-workers 2 --repeats 3
    # a lab's database: 20,000 finished runs
    .venv/bin/python bench/load/run.py --targets holter --jobs 50 --history 20000

Each simulated job logs 20 metrics at 10 steps/s and posts what elapsed once a second (about a
200-point batch a second): to Holter's `/api/v1/runs/{id}/points` in the body the real client
sends (JSON columns and step times, `client/holter/sender.py`), and to FastTrackML's
MLflow-compatible `/api/2.0/mlflow/runs/log-batch`. Jobs start at random phases within the first
second, as real jobs do. Holter runs as `holter serve` does by default: live detection on, in
its worker process. Per level it prints offered and achieved points/s, request latency
p50/p95/p99, errors (retried), CPU-seconds per 1,000 requests of the service's processes and of
the Postgres backends serving its database (read from /proc before and after; for Holter the
window runs until detection has caught up, so work deferred to the worker is counted), the
service's memory, and whether every point sent is stored exactly once (rows counted in the
database). At the end, the largest job count each service held with p95 under 1 s.

FastTrackML (`pip install fasttrackml`, the Go `fml` binary) lives in a virtual environment of
its own: `--fml PATH`, else `bench/load/.venv-fml`, else /work/venvs/fasttrackml, else it is
installed into `bench/load/.venv-fml`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.ingest.run import ADMIN_URL, postgres_database
from bench.load.history import fill_history
from tests.load import percentile, rss_mb
from tests.servers import free_port

TICK = os.sysconf("SC_CLK_TCK")
FML_BATCH_LIMIT = 1000  # MLflow's log-batch takes at most 1,000 metrics a request


@dataclass
class JobResult:
    points_sent: int = 0
    requests: int = 0
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)


class Service:
    """One service under load: how to start it, make a run, post a batch, count what it stored."""

    name = "service"

    def __init__(self, database_url: str, log_path: Path) -> None:
        self.database_url = database_url
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def healthy(self) -> bool:
        raise NotImplementedError

    def start(self, deadline_s: float = 90.0) -> None:
        """Start the service and wait until it answers; one that does not within `deadline_s`
        is stopped (its whole process group) before the error is raised."""
        command, env = self.command()
        with open(self.log_path, "ab") as log:
            # its own process group, so that stop() ends whatever it started (Holter's worker)
            self.process = subprocess.Popen(
                command, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + deadline_s
        while not self.healthy():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not start within {deadline_s:g} s; see {self.log_path}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the service and every process of its group (TERM, then KILL after 20 s)."""
        if self.process is None:
            return
        group = self.process.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(20)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)  # what is left of the group (a worker that outlived it)
        self.process.wait()

    def pids(self) -> list[int]:
        """The service's processes: the one started and all its descendants."""
        assert self.process is not None
        return _process_tree(self.process.pid)

    async def create_run(self, client: httpx.AsyncClient, name: str) -> str:
        raise NotImplementedError

    async def post(
        self, client: httpx.AsyncClient, run_id: str, names: list[str], steps: list[int], wall: float
    ) -> list[float]:
        """Post one batch (retrying until accepted); returns the latency of each request that succeeded."""
        raise NotImplementedError

    def stored(self, run_ids: list[str]) -> int:
        raise NotImplementedError

    def backlog(self) -> int:
        """Work the service still owes for what it accepted (0: caught up)."""
        return 0


class Holter(Service):
    name = "Holter"

    def __init__(self, database_url: str, log_path: Path, workers: int) -> None:
        super().__init__(database_url, log_path)
        self.workers = workers

    def command(self) -> tuple[list[str], dict[str, str]]:
        command = [
            sys.executable,
            "-m",
            "holter.cli",
            "serve",
            "--port",
            str(self.port),
            "--db",
            self.database_url,
            "--log-level",
            "warning",
        ]
        if self.workers > 1:
            command += ["--workers", str(self.workers)]
        path = os.pathsep.join(str(ROOT / part) for part in ("client", "server", "dashboard", "."))
        return command, {"HOLTER_AUTH": "off", "PYTHONPATH": path + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/api/v1/health", timeout=1).json()["status"] == "ok"
        except (httpx.HTTPError, ValueError, KeyError):
            return False

    async def create_run(self, client: httpx.AsyncClient, name: str) -> str:
        answer = await client.post(f"{self.url}/api/v1/runs", json={"id": name, "project": "load"})
        answer.raise_for_status()
        return name

    async def post(
        self, client: httpx.AsyncClient, run_id: str, names: list[str], steps: list[int], wall: float
    ) -> list[float]:
        # the body the client's sender makes: columns per metric, and one wall time per step
        metrics = {name: {"steps": steps, "values": [s * 0.001 + i for s in steps]} for i, name in enumerate(names)}
        body = json.dumps(
            {"metrics": metrics, "step_times": {"steps": steps, "times": [wall] * len(steps)}},
            separators=(",", ":"),
            allow_nan=False,
        ).encode()
        sent = time.perf_counter()
        response = await client.post(
            f"{self.url}/api/v1/runs/{run_id}/points", content=body, headers={"Content-Type": "application/json"}
        )
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:100]}")
        return [time.perf_counter() - sent]

    def stored(self, run_ids: list[str]) -> int:
        with psycopg.connect(self.database_url) as db:
            return db.execute("SELECT count(*) FROM points WHERE run_id = ANY(%s)", (run_ids,)).fetchone()[0]

    def backlog(self) -> int:
        with psycopg.connect(self.database_url) as db:
            return db.execute(
                "SELECT count(*) FROM metrics m LEFT JOIN detector_states d ON d.run_id = m.run_id AND d.metric_id = "
                "m.metric_id"
                " WHERE m.last_step > coalesce(d.detected_step, -1)"
            ).fetchone()[0]


class FastTrackML(Service):
    name = "FastTrackML"

    def __init__(self, database_url: str, log_path: Path, binary: Path) -> None:
        super().__init__(database_url, log_path)
        self.binary = binary

    def command(self) -> tuple[list[str], dict[str, str]]:
        uri = self.database_url.replace("postgresql://", "postgres://") + "?sslmode=disable"
        return [
            str(self.binary),
            "server",
            "--database-uri",
            uri,
            "--listen-address",
            f"127.0.0.1:{self.port}",
            "--log-level",
            "warning",
        ], {}

    def healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    async def create_run(self, client: httpx.AsyncClient, name: str) -> str:
        answer = await client.post(
            f"{self.url}/api/2.0/mlflow/runs/create",
            json={"experiment_id": "0", "run_name": name, "start_time": int(time.time() * 1000)},
        )
        answer.raise_for_status()
        return answer.json()["run"]["info"]["run_id"]

    async def post(
        self, client: httpx.AsyncClient, run_id: str, names: list[str], steps: list[int], wall: float
    ) -> list[float]:
        stamp = int(wall * 1000)
        metrics = [
            {"key": name, "value": s * 0.001 + i, "timestamp": stamp, "step": s}
            for i, name in enumerate(names)
            for s in steps
        ]
        latencies = []
        for lo in range(0, len(metrics), FML_BATCH_LIMIT):
            sent = time.perf_counter()
            response = await client.post(
                f"{self.url}/api/2.0/mlflow/runs/log-batch",
                json={"run_id": run_id, "metrics": metrics[lo : lo + FML_BATCH_LIMIT]},
            )
            if response.status_code != 200:
                raise RuntimeError(f"HTTP {response.status_code}: {response.text[:100]}")
            latencies.append(time.perf_counter() - sent)
        return latencies

    def stored(self, run_ids: list[str]) -> int:
        with psycopg.connect(self.database_url) as db:
            return db.execute("SELECT count(*) FROM metrics WHERE run_uuid = ANY(%s)", (run_ids,)).fetchone()[0]


def _process_tree(root: int) -> list[int]:
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as children:
                    todo.extend(int(child) for child in children.read().split())
        except OSError:
            continue
    return out


def _cpu_ticks(pids: list[int]) -> dict[int, int]:
    ticks = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            ticks[pid] = int(fields[11]) + int(fields[12])  # utime + stime
        except (OSError, IndexError, ValueError):
            continue
    return ticks


def _backend_pids(database: str) -> list[int]:
    """The Postgres backends connected to one database (its autovacuum workers included)."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        return [pid for (pid,) in admin.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (database,))]


class CpuMeter:
    """CPU-seconds used by a changing set of processes between `start()` and `stop()` (processes
    that appear in between count from zero; ones that end in between are missed)."""

    def __init__(self, pids: Callable[[], list[int]]) -> None:
        self.pids = pids
        self.before: dict[int, int] = {}
        self.seen: dict[int, int] = {}

    def start(self) -> None:
        self.before = _cpu_ticks(self.pids())
        self.seen = dict(self.before)

    def sample(self) -> None:
        self.seen.update(_cpu_ticks(self.pids()))

    def stop(self) -> float:
        self.sample()
        return sum(self.by_process().values())

    def by_process(self) -> dict[int, float]:
        """CPU-seconds of each process seen, up to the last sample."""
        return {pid: (ticks - self.before.get(pid, 0)) / TICK for pid, ticks in self.seen.items()}


def _role(pid: int) -> str:
    """What one of the service's processes is, by its command line: Holter's worker, or its API."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            args = cmdline.read().split(b"\0")
    except OSError:
        return "ended"
    return "worker" if b"worker" in args else "api"


@dataclass
class Level:
    jobs: int
    seconds: float
    offered: float
    achieved: float
    requests: int
    latencies: list[float]
    errors: list[str]
    service_cpu: float
    postgres_cpu: float
    rss_mb: float
    sent: int
    stored: int
    drain_s: float
    generator_cpu: float
    by_role: dict[str, float] = field(default_factory=dict)  # the service's CPU-s by process role

    @property
    def cpu_per_1k(self) -> float:
        return (self.service_cpu + self.postgres_cpu) / max(1, self.requests) * 1000

    @property
    def cpu_per_1m_points(self) -> float:
        # A saturated service gets fewer, bigger requests (each job sends what elapsed while it
        # waited for its last answer): per point compares services that fell behind differently.
        return (self.service_cpu + self.postgres_cpu) / max(1, self.stored) * 1_000_000


async def _job(
    service: Service,
    client: httpx.AsyncClient,
    run_id: str,
    names: list[str],
    rate: float,
    started: float,
    seconds: float,
    phase: float,
) -> JobResult:
    result = JobResult()
    await asyncio.sleep(phase)
    step = 0
    tick = 0
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate)
        steps = list(range(step, due))
        step = due
        if steps:
            while True:
                try:
                    result.latencies.extend(await service.post(client, run_id, names, steps, time.time()))
                    result.requests += 1
                    result.points_sent += len(steps) * len(names)
                    break
                except (httpx.HTTPError, RuntimeError) as exc:
                    result.errors.append(str(exc) or repr(exc))
                    await asyncio.sleep(0.5)  # the service is away or failing: send the same batch again
        tick += 1
        await asyncio.sleep(max(0.0, started + phase + tick - time.monotonic()))
    return result


async def _load(
    service: Service, jobs: int, metrics: int, rate: float, seconds: float, meter: list[CpuMeter]
) -> tuple[list[str], list[JobResult], float]:
    names = [f"metric_{i:02d}" for i in range(metrics)]
    limits = httpx.Limits(max_connections=jobs + 8, max_keepalive_connections=jobs + 8)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        prefix = f"load-{uuid.uuid4().hex[:6]}"
        run_ids = [await service.create_run(client, f"{prefix}-{i:03d}") for i in range(jobs)]
        for m in meter:
            m.start()
        started = time.monotonic()
        sampler = asyncio.create_task(_sample(meter))
        results = await asyncio.gather(
            *(_job(service, client, run_id, names, rate, started, seconds, random.random()) for run_id in run_ids)
        )
        sampler.cancel()
        return run_ids, list(results), time.monotonic() - started


async def _sample(meters: list[CpuMeter]) -> None:
    while True:
        await asyncio.sleep(2)
        for m in meters:
            m.sample()


def run_level(service: Service, database: str, jobs: int, metrics: int, rate: float, seconds: float) -> Level:
    service_meter = CpuMeter(service.pids)
    postgres_meter = CpuMeter(lambda: _backend_pids(database))
    mine = os.times()
    run_ids, results, elapsed = asyncio.run(
        _load(service, jobs, metrics, rate, seconds, [service_meter, postgres_meter])
    )
    generator_cpu = sum(os.times()[:2]) - sum(mine[:2])
    drain_started = time.monotonic()
    while service.backlog() and time.monotonic() - drain_started < 120:
        service_meter.sample()
        postgres_meter.sample()
        time.sleep(0.5)
    drain = time.monotonic() - drain_started
    service_cpu, postgres_cpu = service_meter.stop(), postgres_meter.stop()
    by_role: dict[str, float] = {}
    for pid, cpu in service_meter.by_process().items():
        by_role[_role(pid)] = by_role.get(_role(pid), 0.0) + cpu
    rss = sum(rss_mb(pid) for pid in service.pids())
    sent = sum(r.points_sent for r in results)
    return Level(
        jobs=jobs,
        seconds=elapsed,
        offered=jobs * metrics * rate,
        achieved=sent / elapsed,
        requests=sum(len(r.latencies) for r in results),
        latencies=[x for r in results for x in r.latencies],
        errors=[e for r in results for e in r.errors],
        service_cpu=service_cpu,
        postgres_cpu=postgres_cpu,
        rss_mb=rss,
        sent=sent,
        stored=service.stored(run_ids),
        drain_s=drain,
        generator_cpu=generator_cpu,
        by_role=by_role,
    )


def fml_binary(given: str | None) -> Path:
    if given:
        return Path(given)
    for candidate in (ROOT / "bench" / "load" / ".venv-fml" / "bin" / "fml", Path("/work/venvs/fasttrackml/bin/fml")):
        if candidate.exists():
            return candidate
    venv = ROOT / "bench" / "load" / ".venv-fml"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "fasttrackml"], check=True)
    return venv / "bin" / "fml"


HEADER = (
    f"{'service':<13}{'jobs':>5}{'offered/s':>11}{'achieved/s':>11}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}{'errors':>7}"
    f"{'svc CPU-s':>10}{'pg CPU-s':>9}{'CPU-s/1k req':>13}{'CPU-s/1M pts':>13}{'RSS MB':>8}{'drain s':>8}"
    f"{'gen CPU-s':>10}  stored"
)


def row(name: str, level: Level) -> str:
    ms = [percentile(level.latencies, q) * 1000 for q in (0.5, 0.95, 0.99)]
    exact = "exact" if level.stored == level.sent else f"MISMATCH {level.stored:,} of {level.sent:,}"
    return (
        f"{name:<13}{level.jobs:>5}{level.offered:>11,.0f}{level.achieved:>11,.0f}{ms[0]:>8.0f}{ms[1]:>8.0f}{ms[2]:>8.0f}"
        f"{len(level.errors):>7}{level.service_cpu:>10.1f}{level.postgres_cpu:>9.1f}{level.cpu_per_1k:>13.1f}{level.cpu_per_1m_points:>13.1f}"
        f"{level.rss_mb:>8.0f}{level.drain_s:>8.1f}{level.generator_cpu:>10.1f}  {exact}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", default="50,100,200", help="job counts, comma-separated")
    parser.add_argument("--metrics", type=int, default=20)
    parser.add_argument("--rate", type=float, default=10.0, help="steps per second per job")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each level")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each level (figures: each run, then medians)")
    parser.add_argument("--targets", default="holter,fasttrackml")
    parser.add_argument("--holter-workers", type=int, default=1, help="holter serve --workers")
    parser.add_argument("--fml", help="path of FastTrackML's fml binary")
    parser.add_argument(
        "--history",
        type=int,
        default=0,
        help="finished runs of 40 metrics in Holter's database before the first level, as a lab's database "
        "holds (bench/load/history.py); FastTrackML's requests read no other run's rows",
    )
    args = parser.parse_args()
    job_counts = [int(j) for j in args.jobs.split(",")]
    targets = [t.strip().lower() for t in args.targets.split(",")]
    print(
        f"{args.metrics} metrics x {args.rate:g} steps/s per job, {args.seconds:g} s per level, {args.repeats} "
        "repeat(s), "
        f"Postgres; Holter with live detection ({args.holter_workers} API process(es))"
        + (f", {args.history:,} finished runs in its database" if args.history else ""),
        flush=True,
    )
    print(HEADER, flush=True)
    held: dict[str, list[tuple[int, float]]] = {}
    medians: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for target in targets:
            with postgres_database() as database_url:
                database = database_url.rsplit("/", 1)[1]
                log = Path(tmp) / f"{target}.log"
                service: Service = (
                    Holter(database_url, log, args.holter_workers)
                    if target == "holter"
                    else FastTrackML(database_url, log, fml_binary(args.fml))
                )
                service.start()
                if target == "holter" and args.history:
                    fill_history(database_url, args.history, 40)
                try:
                    for jobs in job_counts:
                        levels = []
                        for _ in range(args.repeats):
                            level = run_level(service, database, jobs, args.metrics, args.rate, args.seconds)
                            levels.append(level)
                            print(row(service.name, level), flush=True)
                            if len(level.by_role) > 1:
                                split = ", ".join(
                                    f"{role} {cpu / max(1, level.requests) * 1000:.1f}"
                                    for role, cpu in sorted(level.by_role.items())
                                )
                                print(
                                    f"    CPU-ms per request by process: {split}, postgres "
                                    f"{level.postgres_cpu / max(1, level.requests) * 1000:.1f}",
                                    flush=True,
                                )
                            for sample in sorted(set(level.errors))[:3]:
                                print(f"    e.g. {sample}", flush=True)
                        p95s = sorted(percentile(lv.latencies, 0.95) * 1000 for lv in levels)
                        cpus = sorted(lv.cpu_per_1k for lv in levels)
                        per_point = sorted(lv.cpu_per_1m_points for lv in levels)
                        held.setdefault(service.name, []).append((jobs, statistics.median(p95s)))
                        if args.repeats > 1:
                            medians.append(
                                f"{service.name:<13}{jobs:>5}  p95 median {statistics.median(p95s):.0f} ms "
                                f"({p95s[0]:.0f}-{p95s[-1]:.0f}), CPU-s/1k req median {statistics.median(cpus):.1f} "
                                f"({cpus[0]:.1f}-{cpus[-1]:.1f}), CPU-s/1M pts median "
                                f"{statistics.median(per_point):.1f} "
                                f"({per_point[0]:.1f}-{per_point[-1]:.1f})"
                            )
                finally:
                    service.stop()
    for line in medians:
        print(line)
    for name, figures in held.items():
        under = [jobs for jobs, p95 in figures if p95 < 1000]
        print(f"{name}: largest job count tried with p95 < 1 s: {max(under) if under else 'none'}")


if __name__ == "__main__":
    main()
