"""Load benchmark with a generator that costs almost nothing: Debian's `wrk`, Holter beside FastTrackML.

    .venv/bin/python bench/load/wrk.py                                   # 25, 50, 100, 200 jobs, 30 s each
    .venv/bin/python bench/load/wrk.py --jobs 25,50 --seconds 15 --repeats 3
    .venv/bin/python bench/load/wrk.py --targets holter --jobs 50

The same lab as bench/load/run.py (each job a run of 20 metrics at 10 steps/s, one ~200-point
batch a second), but the requests are sent by `wrk` (one thread, one connection per job) with
bench/load/paced.lua: every request body is prepared before the load starts (one file line per
request, each job's steps in order), and `delay()` paces the connections so that the jobs
together offer one request per job a second, each job at its own phase. Holter gets the body its
client sends to `/api/v1/runs/{id}/points`; FastTrackML the same 200 points through MLflow's
`/api/2.0/mlflow/runs/log-batch`. The runs are created before the load.

Both services run for the whole benchmark, each on a fresh database of the shared Postgres, and
take turns: for every job count and repeat the order of the two alternates, so neither always
goes first on a cooler or busier machine.

Per level: achieved requests and points/s, wrk's latency p50/p95/p99, failed requests, CPU of
the service's processes and of Postgres per 1,000 requests, the generator's own CPU (wrk's user +
system time, from the kernel's accounting of the child when it is reaped), the Postgres sessions
the service opened (`pg_stat_database.sessions`), and whether every acknowledged point is stored
exactly once. For Holter the window runs until live detection has caught up (drain), so the
work it defers to its worker is counted.

Postgres CPU: the backends serving the service's database are sampled from /proc every 0.2 s;
a backend that ends between two samples loses at most its last 0.2 s, and one that lives less
than that between samples is missed. So that nothing is missed silently, the postmaster's
accounting of its reaped children (`cutime + cstime`, every backend that ended, of every
database on the server) is printed beside it as "ended pg CPU-s": on a quiet server it is the
upper bound of what the sampling could have missed.

Figures for the README need a quiet machine: on a shared one, read CPU per request, not latency.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.ingest.run import ADMIN_URL, postgres_database
from bench.load.run import TICK, CpuMeter, FastTrackML, Holter, Service, _role, fml_binary
from tests.load import rss_mb

SCRIPT = Path(__file__).with_name("paced.lua")
STEPS_PER_BATCH = 10


class HolterFrom(Holter):
    """Holter run from another copy of its source (`git archive <commit> | tar -x -C DIR`), in this
    venv: the figures before a change, taken with the same bench on the same machine, in turns."""

    name = "Holter base"

    def __init__(self, database_url: str, log_path: Path, workers: int, source: Path) -> None:
        super().__init__(database_url, log_path, workers)
        self.source = source

    def command(self) -> tuple[list[str], dict[str, str]]:
        command, env = super().command()
        path = os.pathsep.join(str(self.source / part) for part in ("client", "server", "dashboard", "."))
        return command, {**env, "PYTHONPATH": path}


def holter_line(run_id: str, names: list[str], steps: list[int], wall: float) -> str:
    """One request to Holter: the path, a tab, and the body its client sends."""
    metrics = {n: {"steps": steps, "values": [s * 0.001 + i for s in steps]} for i, n in enumerate(names)}
    body = {"metrics": metrics, "step_times": {"steps": steps, "times": [wall] * len(steps)}}
    return f"/api/v1/runs/{run_id}/points\t{json.dumps(body, separators=(',', ':'))}"


def fml_line(run_id: str, names: list[str], steps: list[int], wall: float) -> str:
    """One request to FastTrackML: MLflow's log-batch with the same points."""
    stamp = int(wall * 1000)
    metrics = [
        {"key": n, "value": s * 0.001 + i, "timestamp": stamp, "step": s} for i, n in enumerate(names) for s in steps
    ]
    return (
        f"/api/2.0/mlflow/runs/log-batch\t{json.dumps({'run_id': run_id, 'metrics': metrics}, separators=(',', ':'))}"
    )


def prepare(service: Service, run_ids: list[str], names: list[str], seconds: float, path: Path) -> None:
    """Every request of the level, in the order paced.lua sends them: second by second, job by job."""
    line = holter_line if isinstance(service, Holter) else fml_line
    wall = time.time()
    with open(path, "w") as out:
        for second in range(int(seconds) + 3):
            steps = list(range(second * STEPS_PER_BATCH, (second + 1) * STEPS_PER_BATCH))
            for run_id in run_ids:
                out.write(line(run_id, names, steps, wall + second) + "\n")


def create_runs(service: Service, jobs: int) -> list[str]:
    import asyncio

    async def make() -> list[str]:
        async with httpx.AsyncClient(timeout=60) as client:
            prefix = f"wrk-{uuid.uuid4().hex[:6]}"
            return [await service.create_run(client, f"{prefix}-{i:03d}") for i in range(jobs)]

    return asyncio.run(make())


def postmaster_pid() -> int:
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        data_dir = admin.execute("SHOW data_directory").fetchone()[0]
    try:
        with open(Path(data_dir) / "postmaster.pid") as pidfile:
            return int(pidfile.readline())
    except OSError:  # the data directory is not readable as this user: a backend's parent is the postmaster
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            backend = admin.execute("SELECT pg_backend_pid()").fetchone()[0]
            with open(f"/proc/{backend}/stat") as stat:
                return int(stat.read().rsplit(")", 1)[1].split()[1])


def reaped_children_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[13]) + int(fields[14])  # cutime + cstime


class Watch:
    """The bench's own two connections, opened once: one to the server (the backends of the
    service's database, its sessions) and one to the service's database (Holter's detection
    backlog). Opening one per look would put the bench's own backends among those counted, and
    would fork a backend five times a second on the machine under test."""

    def __init__(self, database_url: str) -> None:
        self.database = database_url.rsplit("/", 1)[1]
        self.admin = psycopg.connect(ADMIN_URL, autocommit=True)
        self.db = psycopg.connect(database_url, autocommit=True)
        self.own_pid = self.db.execute("SELECT pg_backend_pid()").fetchone()[0]
        self.lock = threading.Lock()

    def backends(self) -> list[int]:
        """The Postgres backends serving the service's database (autovacuum's included), not the bench's."""
        with self.lock:
            rows = self.admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.database,)
            ).fetchall()
        return [pid for (pid,) in rows if pid != self.own_pid]

    def sessions(self) -> int:
        with self.lock:
            query = "SELECT sessions FROM pg_stat_database WHERE datname = %s"
            return self.admin.execute(query, (self.database,)).fetchone()[0]

    def backlog(self, service: Service) -> int:
        if not isinstance(service, Holter):
            return 0
        return self.db.execute(
            "SELECT count(*) FROM metrics m LEFT JOIN detector_states d"
            " ON d.run_id = m.run_id AND d.metric_id = m.metric_id WHERE m.last_step > coalesce(d.detected_step, -1)"
        ).fetchone()[0]

    def close(self) -> None:
        self.admin.close()
        self.db.close()


@dataclass
class Level:
    service: str
    jobs: int
    seconds: float
    requests: int
    failed: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    service_cpu: float
    postgres_cpu: float
    ended_pg_cpu: float
    generator_cpu: float
    sessions: int
    drain_s: float
    rss_mb: float
    acknowledged: int
    stored: int
    in_flight: int
    by_role: dict[str, float]

    @property
    def cpu_per_1k(self) -> float:
        return (self.service_cpu + self.postgres_cpu) / max(1, self.requests) * 1000

    @property
    def stored_note(self) -> str:
        if self.stored == self.acknowledged:
            return "exact"
        extra = self.stored - self.acknowledged
        # a request wrk had sent when its time ran out is stored without being counted as answered
        if 0 < extra <= self.in_flight:
            return f"exact (+{extra:,} in flight at stop)"
        return f"MISMATCH {self.stored:,} stored of {self.acknowledged:,} acknowledged"


@dataclass
class Metered:
    """What a `LevelMeter` counted between its start and stop."""

    service_cpu: float
    postgres_cpu: float
    ended_pg_cpu: float
    sessions: int
    by_role: dict[str, float]


class LevelMeter:
    """CPU of a service's processes and of the Postgres backends of its database over one level,
    sampled every 0.2 s on a thread of its own; the Postgres sessions the service opened; and the
    postmaster's reaped-children CPU (every backend that ended, on the whole server)."""

    def __init__(self, service: Service, watch: Watch, postmaster: int) -> None:
        self.service_meter = CpuMeter(service.pids)
        self.postgres_meter = CpuMeter(watch.backends)
        self.watch = watch
        self.postmaster = postmaster
        self.stop_sampling = threading.Event()
        self.sampler = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.stop_sampling.wait(0.2):
            self.postgres_meter.sample()
            self.service_meter.sample()

    def start(self) -> None:
        self.service_meter.start()
        self.postgres_meter.start()
        self.sessions_before = self.watch.sessions()
        self.reaped_before = reaped_children_ticks(self.postmaster)
        self.sampler.start()

    def halt(self) -> None:
        """Stop sampling without reading the figures (a level that failed)."""
        self.stop_sampling.set()
        if self.sampler.is_alive():
            self.sampler.join()

    def stop(self) -> Metered:
        self.halt()
        service_cpu, postgres_cpu = self.service_meter.stop(), self.postgres_meter.stop()
        ended = (reaped_children_ticks(self.postmaster) - self.reaped_before) / TICK
        by_role: dict[str, float] = {}
        for pid, cpu in self.service_meter.by_process().items():
            by_role[_role(pid)] = by_role.get(_role(pid), 0.0) + cpu
        return Metered(service_cpu, postgres_cpu, ended, self.watch.sessions() - self.sessions_before, by_role)


def run_wrk(
    url: str, requests_path: Path, connections: int, rate: float, seconds: float, method: str = "POST"
) -> tuple[dict, float, float]:
    """Send the prepared requests of `requests_path` with wrk and paced.lua: one thread,
    `connections` connections, `rate` requests a second in all, for `seconds`. Returns paced.lua's
    summary, the wall-clock seconds wrk ran and wrk's own CPU-seconds (user + system, from the
    kernel's accounting of the reaped child)."""
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{seconds:g}s",
        "--timeout",
        "30s",
        "-s",
        str(SCRIPT),
        url,
        "--",
        str(requests_path),
        method,
        f"{rate:g}",
    ]
    started = time.monotonic()
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    elapsed = time.monotonic() - started
    children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    generator_cpu = (children_after.ru_utime - children_before.ru_utime) + (
        children_after.ru_stime - children_before.ru_stime
    )
    return json.loads(out.strip().splitlines()[-1]), elapsed, generator_cpu


def run_level(
    service: Service, watch: Watch, postmaster: int, jobs: int, metrics: int, seconds: float, tmp: Path
) -> Level:
    names = [f"metric_{i:02d}" for i in range(metrics)]
    run_ids = create_runs(service, jobs)
    requests_path = tmp / f"{service.name}-{jobs}.txt"
    prepare(service, run_ids, names, seconds, requests_path)
    while watch.backlog(service):  # the runs' creation and the last level's work are not this level's
        time.sleep(0.5)
    meter = LevelMeter(service, watch, postmaster)
    meter.start()
    # one connection per job, and one request per job a second
    summary, elapsed, generator_cpu = run_wrk(service.url, requests_path, jobs, jobs, seconds)
    drain_started = time.monotonic()
    while watch.backlog(service) and time.monotonic() - drain_started < 120:
        time.sleep(0.5)
    drain = time.monotonic() - drain_started
    metered = meter.stop()
    per_request = STEPS_PER_BATCH * metrics
    return Level(
        service=service.name,
        jobs=jobs,
        seconds=elapsed,
        requests=summary["ok"],
        failed=summary["failed"] + summary["timeouts"] + summary["connect_errors"] + summary["read_errors"],
        p50_ms=summary["p50_us"] / 1000,
        p95_ms=summary["p95_us"] / 1000,
        p99_ms=summary["p99_us"] / 1000,
        service_cpu=metered.service_cpu,
        postgres_cpu=metered.postgres_cpu,
        ended_pg_cpu=metered.ended_pg_cpu,
        generator_cpu=generator_cpu,
        sessions=metered.sessions,
        drain_s=drain,
        rss_mb=sum(rss_mb(pid) for pid in service.pids()),
        acknowledged=summary["ok"] * per_request,
        stored=service.stored(run_ids),
        in_flight=jobs * per_request,
        by_role=metered.by_role,
    )


HEADER = (
    f"{'service':<12}{'jobs':>5}{'req/s':>7}{'pts/s':>8}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}{'failed':>7}"
    f"{'svc CPU-s':>10}{'pg CPU-s':>9}{'CPU-s/1k req':>13}{'gen CPU-s':>10}{'pg sess':>8}{'ended pg':>9}"
    f"{'drain s':>8}{'RSS MB':>7}  stored"
)


def row(level: Level) -> str:
    rate = level.requests / level.seconds
    return (
        f"{level.service:<12}{level.jobs:>5}{rate:>7.1f}{rate * STEPS_PER_BATCH * 20:>8,.0f}{level.p50_ms:>8.0f}"
        f"{level.p95_ms:>8.0f}{level.p99_ms:>8.0f}{level.failed:>7}{level.service_cpu:>10.1f}{level.postgres_cpu:>9.1f}"
        f"{level.cpu_per_1k:>13.1f}{level.generator_cpu:>10.2f}{level.sessions:>8}{level.ended_pg_cpu:>9.1f}"
        f"{level.drain_s:>8.1f}{level.rss_mb:>7.0f}  {level.stored_note}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", default="25,50,100,200", help="job counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each level")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--targets", default="holter,fasttrackml", help="holter, fasttrackml, base (Holter from --holter-source)"
    )
    parser.add_argument("--holter-workers", type=int, default=1, help="holter serve --workers")
    parser.add_argument("--fml", help="path of FastTrackML's fml binary")
    parser.add_argument(
        "--holter-source",
        help="for the target 'base': Holter from this copy of the repository (its client/, server/, dashboard/)",
    )
    parser.add_argument("--seed", type=int, default=0, help="which service goes first at the first level")
    args = parser.parse_args()
    if args.seconds < 1:
        parser.error("--seconds must be at least 1")
    # a TERM or HUP (a timeout, a closed terminal) unwinds like Ctrl-C: the services are stopped
    # and their databases dropped on any exit
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, _exit_on_signal)
    metrics = 20
    job_counts = [int(j) for j in args.jobs.split(",")]
    targets = [t.strip().lower() for t in args.targets.split(",")]
    if "base" in targets and not args.holter_source:
        parser.error("the target 'base' needs --holter-source")
    postmaster = postmaster_pid()
    print(
        f"wrk, one connection per job, {metrics} metrics x {STEPS_PER_BATCH} steps per request, one request per job "
        f"a second, {args.seconds:g} s per level, {args.repeats} repeat(s); Holter with live detection "
        f"({args.holter_workers} API process(es)); CPU-s/1k req = (service + Postgres) per 1,000 requests",
        flush=True,
    )
    levels: list[Level] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        services: dict[str, tuple[Service, Watch]] = {}
        databases = []
        try:
            for target in targets:
                context = postgres_database()
                url = context.__enter__()
                databases.append(context)
                log = tmp / f"{target}.log"
                service: Service
                if target == "holter":
                    service = Holter(url, log, args.holter_workers)
                elif target == "base":
                    service = HolterFrom(url, log, args.holter_workers, Path(args.holter_source).resolve())
                else:
                    service = FastTrackML(url, log, fml_binary(args.fml))
                service.start()
                services[target] = (service, Watch(url))
            print(HEADER, flush=True)
            turn = args.seed
            for jobs in job_counts:
                for _ in range(args.repeats):
                    order = targets[turn % len(targets) :] + targets[: turn % len(targets)]
                    turn += 1
                    for target in order:
                        service, watch = services[target]
                        level = run_level(service, watch, postmaster, jobs, metrics, args.seconds, tmp)
                        levels.append(level)
                        print(row(level), flush=True)
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
        finally:
            for service, watch in services.values():
                watch.close()
                service.stop()
            for context in reversed(databases):
                context.__exit__(None, None, None)
    summarise(levels, job_counts, [services[t][0].name for t in targets] if services else [])


def _exit_on_signal(number: int, _frame: object) -> None:
    raise SystemExit(128 + number)


def summarise(levels: list[Level], job_counts: list[int], names: list[str]) -> None:
    print("\nSide by side (medians over repeats, range in brackets):")
    print(f"{'jobs':>5}" + "".join(f"  {name:>40}" for name in names))
    held: dict[str, int | None] = {name: None for name in names}
    for jobs in job_counts:
        cells = []
        for name in names:
            mine = [lv for lv in levels if lv.jobs == jobs and lv.service == name]
            if not mine:
                cells.append(f"{'—':>40}")
                continue
            cpu = sorted(lv.cpu_per_1k for lv in mine)
            p95 = sorted(lv.p95_ms for lv in mine)
            spread = f"({cpu[0]:.1f}-{cpu[-1]:.1f})"
            cells.append(f"{statistics.median(cpu):>6.1f} {spread} CPU-s/1k, p95 {statistics.median(p95):>5.0f} ms")
            if statistics.median(p95) < 250 and all(lv.failed == 0 for lv in mine):
                held[name] = max(held[name] or 0, jobs)
        print(f"{jobs:>5}" + "".join(f"  {c:>40}" for c in cells))
    for name, jobs in held.items():
        print(f"{name}: largest job count with p95 < 250 ms and no failed request: {jobs or 'none'}")
    gen = [lv.generator_cpu / lv.seconds for lv in levels]
    if gen:
        print(f"generator (wrk) CPU: at most {max(gen):.3f} cores during a level")


if __name__ == "__main__":
    main()
