"""The ranks of one big distributed job, driven by `wrk`: what a rank costs the service.

    .venv/bin/python bench/load/ranks.py                                       # 256, 512, 1024 ranks, 60 s, 3 repeats
    .venv/bin/python bench/load/ranks.py --ranks 64 --seconds 10 --repeats 1   # a quick look
    .venv/bin/python bench/load/ranks.py --ranks 1024 --rank-interval 10       # HOLTER_RANK_INTERVAL=10 on the ranks
    .venv/bin/python bench/load/ranks.py --ranks 1024 --workers 2 --targets holter

A job of N ranks is one run (DESIGN.md, "A job of many ranks"). Before the load every rank
registers as the client does (`POST /api/v1/runs` with its `rank` block; 64 at a time, timed).
Then wrk (one thread, bench/load/paced.lua, every body prepared ahead) offers what the ranks of a
healthy job send, each rank at its own phase:

* a beat every 5 s (`HOLTER_RANK_INTERVAL`'s default, `--rank-interval`) from every rank:
  `POST /runs/{id}/ranks/{r}/beat` with its step and the timings of its last 200 steps;
* a points batch every 5 s from every rank but rank 0 (their flush interval is the same), every
  1 s from rank 0: the body the client sends (columns and step times), the rank's `loss` at every
  step and its step/wait/compute timings once a second (means), rank r > 0 under
  `holter/rank/<r>/...`, rank 0 under the plain names.

So N ranks offer (2N + 4) / 5 requests a second: 410.4 at 1,024 ranks, 0.4 per rank-second, about
5 points per rank a second at 2 steps/s. The slots of one period are shuffled once (seeded: each
rank's beat and batch at a phase of its own) and repeat every period, rank 0's batches spread over
it; request k is due at k / rate seconds whatever the service's latency.

Connections: a real rank keeps **two** kept-alive connections open, its sender's (points) and its
beat thread's (client/holter/run.py: each has its own `Transport`), so wrk opens
`--connections-per-rank` (2) x N and each sends about once a period. At
`HOLTER_MAX_CONNECTIONS` (1000 by default) open connections an API process closes the one idle
longest to make room, and answers 503 when none is idle (server/holter_server/connections.py): a
512-rank job already holds 1,024, so under the default every request of it would find its
connection closed under it. The bench sets the limit to the connections wrk opens plus 64
(printed) unless `--max-connections` says otherwise; wrk reconnects at once where the client
reconnects at its next request, so a level run below the job's connections shows that the limit
bites, not what it costs a real job. wrk opens every connection at the start, and an API process
closes one whose first request has not come within `HOLTER_HEADER_TIMEOUT` (10 s); the last
connection waits about a period for its first slot, so the bench sets the timeout to twice that
when it passes 10 s (`--rank-interval` over 5; the client opens its connection as it sends).

Each level runs on a **fresh** database and a fresh `holter serve` (its worker process running
live detection, the stall watch and the ranks watch), because a job's ranks stay "active" to the
ranks watch for 30 minutes after they stop: a level on the last level's database would pay for
the earlier job too. FastTrackML (the Go MLflow server, `pip install fasttrackml` into a venv of
the benchmark) gets the same schedule in turns, on a fresh database each level: each Holter
request mapped to an MLflow `log-batch` of the same numbers under the same names (a beat: its
step, quiet time and three timings as five metrics at its step), one MLflow run per rank
(`--fml-runs rank`: no two ranks' requests contend on a run, as each job has its own in wrk.py)
or one for the job (`--fml-runs job`, as Holter has it), so its CPU per 1,000 requests is read at
the same requests/s and about the same body sizes.

Per level: requests/s answered against offered, wrk's p50/p95/p99, failed requests (non-200,
timeouts, connect, read and write errors), CPU-seconds of the service's processes (API, worker)
and of the Postgres backends of its database (bench/load/wrk.py's `LevelMeter`, sampled every
0.2 s), the window running until the service answers at once again (a saturated service works on
the requests it took in after wrk stops) and, for Holter, until live detection has caught up; CPU
per 1,000 requests **sent** (those unanswered at the stop were worked on inside the window) and per
rank-second served (per request x the requests a rank sends a second); memory (RSS of the
service's processes); the ranks heard (every rank's row beat during the load); every acknowledged
point stored exactly once (Holter: the `received` counts of its answers against its rows;
FastTrackML, whose answers carry no counts: its rows against the points of the requests sent and
answered); the load average and the cores busy on the whole machine during the load; the
service's warnings and failed rounds from its log; and the ranks watch's pass time:
`services.ranks.watch_ranks` called in this process on the level's database right after the
level (every rank's last beat moved to now first), with a fresh state (a pass that reads every
rank's recent losses for the band, as the service's watch does at most every 5 s while the steps
move) and then with its state kept (the ranks' rows only, as in the passes between); medians of
three, wall-clock and this process's CPU.

Figures for the README need a quiet machine; on a shared one read the CPU per rank-second and per
1,000 requests at the levels the service keeps up with, not the latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import resource
import signal
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from holter.ranks import rank_interval

from bench.ingest.run import postgres_database
from bench.load.run import TICK, FastTrackML, Holter, Service, fml_binary
from bench.load.wrk import LevelMeter, Watch, postmaster_pid, run_wrk
from tests.load import rss_mb

RANK_INTERVAL_S = 5.0  # HOLTER_RANK_INTERVAL's default: every rank's beat, and the flush of ranks > 0


def interval_for(args: argparse.Namespace, ranks: int) -> float:
    """The ranks' interval at this level: `--rank-interval`, else the client's own for a job this big."""
    return float(args.rank_interval) or rank_interval(ranks)


RANK0_FLUSH_S = 1.0  # rank 0 flushes every second (the client's default)
START_STEP = 1_000  # the job is under way: a beat's timing covers its last 200 steps
TIMINGS = ("holter/dist/step_s", "holter/dist/wait_s", "holter/dist/compute_s")
REGISTER_AT_ONCE = 64
LOG_BATCH = "/api/2.0/mlflow/runs/log-batch"
HEADROOM = 64  # connections above the job's for the bench's own and a dashboard's
HEADER_TIMEOUT_S = 10.0  # HOLTER_HEADER_TIMEOUT's default


def series(name: str, rank: int) -> str:
    """A rank's series name, as the client sends it (rank 0's are the run's own)."""
    return name if rank == 0 else f"holter/rank/{rank}/{name}"


@dataclass
class Request:
    """One prepared request: Holter's path and body, the points it carries, and FastTrackML's
    log-batch of the same numbers."""

    rank: int
    holter: str
    fml_metrics: list[dict[str, float | int | str]]
    points: int


@dataclass
class Schedule:
    """The job's requests in the order they are due (k / rate seconds from the start)."""

    ranks: int
    rate: float
    requests: list[Request]


class Job:
    """What the ranks of one healthy job send, step by step."""

    def __init__(self, ranks: int, steps_per_s: float, seed: int, interval: float = RANK_INTERVAL_S) -> None:
        self.ranks = ranks
        self.steps_per_s = steps_per_s
        self.interval = interval
        self.rng = random.Random(seed)
        self.sent_to: dict[int, int] = {}  # each rank's first step not yet sent
        # a rank's own pace within its peers' spread: no straggler, no rank out of band
        self.offset = {r: self.rng.gauss(0.0, 0.005) for r in range(ranks)}

    def step_at(self, t: float) -> int:
        return START_STEP + int(t * self.steps_per_s)

    def loss(self, rank: int, step: int) -> float:
        return 2.0 * math.exp(-step / 50_000) + self.offset[rank] + self.rng.gauss(0.0, 0.01)

    def beat(self, rank: int, t: float, run_id: str, wall: float) -> Request:
        step = self.step_at(t)
        step_s = 1.0 / self.steps_per_s
        wait_s = 0.2 * step_s * (1 + self.offset[rank])
        timing = {
            "steps": 200,
            "first_step": step - 200,
            "last_step": step - 1,
            "step_s": step_s,
            "wait_s": wait_s,
            "compute_s": step_s - wait_s,
        }
        body = {"step": step, "quiet_s": 0.2, "interval_s": self.interval, "timing": timing}
        stamp = int(wall * 1000)
        numbers = {"step": step, "quiet_s": 0.2, "step_s": step_s, "wait_s": wait_s, "compute_s": step_s - wait_s}
        fml = [
            {"key": series(f"holter/beat/{name}", rank), "value": value, "timestamp": stamp, "step": step}
            for name, value in numbers.items()
        ]
        path = f"/api/v1/runs/{run_id}/ranks/{rank}/beat"
        return Request(rank, f"{path}\t{json.dumps(body, separators=(',', ':'))}", fml, 0)

    def points(self, rank: int, t: float, run_id: str, wall: float) -> Request:
        """The rank's batch at `t`: its loss at every step since its last batch, its timings'
        means at the last step of every second (the client logs them at most once a second)."""
        now = self.step_at(t)
        first = self.sent_to.get(rank, START_STEP)
        steps = list(range(first, now))
        self.sent_to[rank] = now
        per_s = self.steps_per_s
        timed = [s for s in steps if int((s + 1 - START_STEP) / per_s) > int((s - START_STEP) / per_s)]
        step_s = 1.0 / per_s
        columns: dict[str, tuple[list[int], list[float]]] = {
            series("loss", rank): (steps, [self.loss(rank, s) for s in steps])
        }
        if timed:
            waits = [0.2 * step_s * (1 + self.offset[rank] + self.rng.gauss(0.0, 0.01)) for _ in timed]
            columns[series(TIMINGS[0], rank)] = (timed, [step_s] * len(timed))
            columns[series(TIMINGS[1], rank)] = (timed, waits)
            columns[series(TIMINGS[2], rank)] = (timed, [step_s - w for w in waits])
        times = [wall - (now - s) * step_s for s in steps]
        body = {
            "metrics": {name: {"steps": s, "values": v} for name, (s, v) in columns.items()},
            "step_times": {"steps": steps, "times": times},
        }
        stamp = int(wall * 1000)
        fml = [
            {"key": name, "value": value, "timestamp": stamp, "step": step}
            for name, (s, v) in columns.items()
            for step, value in zip(s, v)
        ]
        path = f"/api/v1/runs/{run_id}/points"
        return Request(rank, f"{path}\t{json.dumps(body, separators=(',', ':'))}", fml, len(fml))


def schedule(ranks: int, steps_per_s: float, interval: float, seconds: float, run_id: str, seed: int) -> Schedule:
    """Every request of the level, in the order due: one beat's period of slots (every rank's
    beat, every rank's but 0's batch, rank 0's batch of each second) shuffled once and repeated."""
    shuffle = random.Random(seed)
    slots: list[tuple[str, int]] = [("beat", r) for r in range(ranks)] + [("points", r) for r in range(1, ranks)]
    shuffle.shuffle(slots)
    flushes = max(1, round(interval / RANK0_FLUSH_S))
    per_period = len(slots) + flushes
    for i in range(flushes):  # spread over the period: one a second
        slots.insert(round(i * per_period / flushes), ("points", 0))
    rate = per_period / interval
    job = Job(ranks, steps_per_s, seed, interval)
    wall = time.time()
    requests = []
    periods = math.ceil((seconds + 10) / interval)  # wrk may run a little longer than asked
    for k in range(periods * per_period):
        kind, rank = slots[k % per_period]
        t = k / rate
        make = job.beat if kind == "beat" else job.points
        requests.append(make(rank, t, run_id, wall + t))
    return Schedule(ranks, rate, requests)


def write_requests(plan: Schedule, path: Path, fml_runs: list[str] | None) -> None:
    """The file paced.lua reads: one "<path>\\t<body>" line per request, Holter's, or FastTrackML's
    (`fml_runs`: the MLflow run of each rank)."""
    with open(path, "w") as out:
        for request in plan.requests:
            if fml_runs is None:
                out.write(request.holter + "\n")
            else:
                batch = {"run_id": fml_runs[request.rank], "metrics": request.fml_metrics}
                out.write(f"{LOG_BATCH}\t{json.dumps(batch, separators=(',', ':'))}\n")


class RanksWatch(Watch):
    """bench/load/wrk.py's `Watch`, its detection backlog without the ranks' own series: live
    detection reads the run's series (rank 0's), and the ranks watch reads the other ranks'
    across the ranks (store/detection_queue.py), so no detector ever settles those."""

    def backlog(self, service: Service) -> int:
        from holter_server.vocabulary.ranks import RANK_PREFIX

        return self.db.execute(
            "SELECT count(*) FROM metrics m LEFT JOIN detector_states d"
            " ON d.run_id = m.run_id AND d.metric_id = m.metric_id"
            " WHERE m.last_step > coalesce(d.detected_step, -1) AND left(m.name, %s) <> %s",
            (len(RANK_PREFIX), RANK_PREFIX),
        ).fetchone()[0]


class RankedHolter(Holter):
    """`holter serve` with its connection limit set for the job (`HOLTER_MAX_CONNECTIONS`), and a
    header timeout that outlasts the wait of wrk's last connection for its first request (wrk
    opens them all at the start; a rank's client opens its connection as it sends)."""

    def __init__(
        self, database_url: str, log_path: Path, workers: int, max_connections: int, first_request_s: float
    ) -> None:
        super().__init__(database_url, log_path, workers)
        self.max_connections = max_connections
        self.header_timeout = max(HEADER_TIMEOUT_S, 2 * first_request_s)

    def command(self) -> tuple[list[str], dict[str, str]]:
        command, env = super().command()
        return command, {
            **env,
            "HOLTER_MAX_CONNECTIONS": str(self.max_connections),
            "HOLTER_HEADER_TIMEOUT": f"{self.header_timeout:g}",
        }


def register(service: Service, run_id: str, ranks: int) -> tuple[float, float]:
    """Every rank's registration, as the client sends it (rank 0 first, then the others
    `REGISTER_AT_ONCE` at a time); returns the wall-clock seconds and the p95 of one, in ms."""
    job = f"torchrun:{uuid.uuid4()}"
    config = {"lr": 3e-4, "batch_size": 32, "model": "llama-7b", "world_size": ranks, "seed": 0}

    async def one(client: httpx.AsyncClient, rank: int) -> float:
        body = {
            "id": run_id,
            "project": "ranks",
            "name": f"job-{ranks}",
            "config": config,
            "tags": [],
            "rank": {
                "rank": rank,
                "world_size": ranks,
                "local_rank": rank % 8,
                "node_rank": rank // 8,
                "host": f"node-{rank // 8}",
                "pid": 10_000 + rank,
                "launcher": "torchrun",
                "job": job,
                "restart": 0,
            },
        }
        sent = time.perf_counter()
        answer = await client.post(f"{service.url}/api/v1/runs", json=body)
        answer.raise_for_status()
        return time.perf_counter() - sent

    async def all_ranks() -> tuple[float, float]:
        limits = httpx.Limits(max_connections=REGISTER_AT_ONCE, max_keepalive_connections=REGISTER_AT_ONCE)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            started = time.perf_counter()
            took = [await one(client, 0)]
            gate = asyncio.Semaphore(REGISTER_AT_ONCE)

            async def gated(rank: int) -> float:
                async with gate:
                    return await one(client, rank)

            took += await asyncio.gather(*(gated(r) for r in range(1, ranks)))
            took.sort()
            return time.perf_counter() - started, took[min(len(took) - 1, int(0.95 * len(took)))] * 1000

    return asyncio.run(all_ranks())


@dataclass
class Pass:
    """One ranks watch pass: wall-clock ms, and ms of CPU in the calling thread (the rest of the
    wall-clock is mostly Postgres's)."""

    wall_ms: float
    cpu_ms: float

    @staticmethod
    def median(passes: list[Pass]) -> Pass:
        return Pass(statistics.median(p.wall_ms for p in passes), statistics.median(p.cpu_ms for p in passes))

    def __str__(self) -> str:
        return f"{self.wall_ms:.0f} ms ({self.cpu_ms:.0f} ms CPU here)"


def time_ranks_watch(database_url: str, run_id: str, passes: int = 3) -> tuple[Pass, Pass, str | None]:
    """The ranks watch's pass over the level's job, timed in this process (medians of `passes`):
    with a fresh state (it reads every rank's recent losses for the band), then with its state
    kept (the ranks' rows alone). Before each pass every rank's last beat is moved to now (one
    UPDATE, not timed), so that the pass reads a live job, as during the load, and not one whose
    ranks went silent when the load stopped. The run is claimed by waiting for the service's own
    watch to let go of it (`claims.wait_for_run` in place of the watch's try), the wait left out
    of the time. Returns the two, and the error of a pass that failed (None: none did)."""
    from holter_server.services.ranks import RankWatchState, watch_ranks
    from holter_server.store import claims
    from holter_server.store.database import make_engine, make_session_factory
    from sqlalchemy.exc import SQLAlchemyError

    engine = make_engine(database_url.replace("postgresql://", "postgresql+psycopg://"), pool_size=2)
    factory = make_session_factory(engine)
    claim = claims.claim_runs
    waited = [0.0]

    def waiting(*, session: Any, task: Any, run_ids: list[str]) -> list[str]:
        started = time.perf_counter()
        for run_id in run_ids:
            claims.wait_for_run(session=session, task=task, run_id=run_id)
        waited[0] += time.perf_counter() - started
        return list(run_ids)

    def timed(state: RankWatchState) -> Pass:
        with psycopg.connect(database_url, autocommit=True) as db:
            db.execute("UPDATE run_ranks SET beat_at = now() WHERE run_id = %s", (run_id,))
        waited[0] = 0.0
        started, cpu = time.perf_counter(), time.thread_time()
        watch_ranks(session_factory=factory, state=state)
        return Pass((time.perf_counter() - started - waited[0]) * 1000, (time.thread_time() - cpu) * 1000)

    claims.claim_runs = waiting  # type: ignore[assignment]
    try:
        timed(RankWatchState())  # a first pass warms this process's imports and caches
        full = [timed(RankWatchState()) for _ in range(passes)]
        kept = RankWatchState()
        timed(kept)
        rows = [timed(kept) for _ in range(passes)]
    except SQLAlchemyError as exc:  # the watch itself failed: say how, and go on with the bench
        failed = Pass(math.nan, math.nan)
        return failed, failed, f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    finally:
        claims.claim_runs = claim  # type: ignore[assignment]
        engine.dispose()
    return Pass.median(full), Pass.median(rows), None


def answers_quickly(service: Service, path: str, body: str) -> bool:
    """Whether a request is answered within 250 ms: the service has no queue of requests left."""
    sent = time.perf_counter()
    try:
        answer = httpx.post(
            f"{service.url}{path}", content=body, headers={"Content-Type": "application/json"}, timeout=60
        )
    except httpx.HTTPError:
        return False
    return answer.status_code == 200 and time.perf_counter() - sent < 0.25


class MachineMeter:
    """Cores busy on the whole machine (every process, ours and anyone's) from /proc/stat."""

    def __init__(self) -> None:
        self.started, self.before = time.monotonic(), self._ticks()

    @staticmethod
    def _ticks() -> tuple[int, int]:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields[:8]) - idle, idle

    def busy_cores(self) -> float:
        busy, _ = self._ticks()
        return (busy - self.before[0]) / TICK / (time.monotonic() - self.started)


def load_average() -> float:
    with open("/proc/loadavg") as loadavg:
        return float(loadavg.read().split()[0])


@dataclass
class Level:
    service: str
    ranks: int
    connections: int
    seconds: float
    offered: float
    requests: int
    sent: int
    failed: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    service_cpu: float
    postgres_cpu: float
    ended_pg_cpu: float
    generator_cpu: float
    drain_s: float
    rss_mb: float
    acknowledged: int
    stored: int
    in_flight: int
    load: tuple[float, float]
    busy_cores: float
    by_role: dict[str, float] = field(default_factory=dict)
    heard: int | None = None
    register_s: float | None = None
    register_p95_ms: float | None = None
    watch_full: Pass | None = None
    watch_rows: Pass | None = None
    watch_error: str | None = None
    failures: dict[str, int] = field(default_factory=dict)  # wrk's, by kind
    least: int | None = None  # FastTrackML: the fewest points the requests it answered can hold
    log_notes: list[str] = field(default_factory=list)

    @property
    def cpu(self) -> float:
        return self.service_cpu + self.postgres_cpu

    @property
    def achieved(self) -> float:
        return self.requests / self.seconds

    @property
    def cpu_ms_per_rank_s(self) -> float:
        """Per rank-second served: the requests sent, over those a rank sends a second (a saturated
        service is sent fewer than offered: wrk's connections wait for their answers)."""
        return self.cpu_per_1k * self.offered / self.ranks

    @property
    def cpu_per_1k(self) -> float:
        """Per 1,000 requests sent: those still unanswered when wrk stopped are worked on after it
        (the window runs until the service answers at once), so they count."""
        return self.cpu / max(1, self.sent) * 1000

    @property
    def stored_note(self) -> str:
        if self.stored == self.acknowledged:
            return "exact"
        extra = self.stored - self.acknowledged
        if 0 < extra <= self.in_flight:  # sent when wrk's time ran out: stored, never answered
            return f"exact (+{extra:,} in flight at stop)"
        if self.least is not None and self.least <= self.stored <= self.acknowledged + self.in_flight:
            # answers without counts, in any order: only the range of what was answered is known
            return f"within {self.least:,}-{self.acknowledged + self.in_flight:,} (answered in any order)"
        return f"MISMATCH {self.stored:,} stored of {self.acknowledged:,} acknowledged (+{self.in_flight:,} sent)"


def holter_level(args: argparse.Namespace, ranks: int, postmaster: int, tmp: Path, turn: int) -> Level:
    connections = args.connections_per_rank * ranks
    limit = args.max_connections or connections + HEADROOM
    with postgres_database() as url:
        log = (args.logs or tmp) / f"holter-{ranks}-{turn}.log"
        # the last of wrk's connections waits for its first slot about this long
        interval = interval_for(args, ranks)
        first_request_s = connections / ((2 * ranks - 1 + interval) / interval)
        service = RankedHolter(url, log, args.workers, limit, first_request_s)
        service.start()
        watch = RanksWatch(url)
        meter = LevelMeter(service, watch, postmaster)
        try:
            run_id = f"job-{uuid.uuid4().hex[:8]}"
            register_s, register_p95 = register(service, run_id, ranks)
            plan = schedule(ranks, args.steps_per_s, interval, args.seconds, run_id, args.seed + turn)
            path = tmp / f"holter-{ranks}.txt"
            write_requests(plan, path, None)
            while watch.backlog(service):
                time.sleep(0.5)
            load_before = load_average()
            loaded_at = time.time()
            meter.start()
            machine = MachineMeter()
            summary, elapsed, generator_cpu = run_wrk(service.url, path, connections, plan.rate, args.seconds)
            busy = machine.busy_cores()
            # the work the load left: requests the service had taken in and not answered when wrk
            # stopped (a saturated service works on for a while), then live detection's backlog
            drain_started = time.monotonic()
            job = Job(ranks, args.steps_per_s, args.seed, interval)
            beat = job.beat(0, elapsed, run_id, time.time()).holter
            while not answers_quickly(service, *beat.split("\t", 1)) and time.monotonic() - drain_started < 300:
                time.sleep(0.5)
            while watch.backlog(service) and time.monotonic() - drain_started < 300:
                time.sleep(0.5)
            drain = time.monotonic() - drain_started
            metered = meter.stop()
            load_after = load_average()
            rss = sum(rss_mb(pid) for pid in service.pids())
            with psycopg.connect(url) as db:
                stored = db.execute("SELECT count(*) FROM points WHERE run_id = %s", (run_id,)).fetchone()[0]
                heard = db.execute(
                    "SELECT count(*) FROM run_ranks WHERE run_id = %s AND beat_at >= to_timestamp(%s)",
                    (run_id, loaded_at),
                ).fetchone()[0]
            watch_full, watch_rows, watch_error = time_ranks_watch(url, run_id)
            # the requests sent and unanswered at the stop: at most the largest of those sent
            sizes = sorted((r.points for r in plan.requests[: summary["sent"]]), reverse=True)
            in_flight = sum(sizes[: max(0, summary["sent"] - summary["ok"])])
            return Level(
                service="Holter",
                ranks=ranks,
                connections=connections,
                seconds=elapsed,
                offered=plan.rate,
                requests=summary["ok"],
                sent=summary["sent"],
                failed=_failed(summary),
                failures=_failures(summary),
                p50_ms=summary["p50_us"] / 1000,
                p95_ms=summary["p95_us"] / 1000,
                p99_ms=summary["p99_us"] / 1000,
                service_cpu=metered.service_cpu,
                postgres_cpu=metered.postgres_cpu,
                ended_pg_cpu=metered.ended_pg_cpu,
                generator_cpu=generator_cpu,
                drain_s=drain,
                rss_mb=rss,
                acknowledged=summary["received"],
                stored=stored,
                in_flight=in_flight,
                load=(load_before, load_after),
                busy_cores=busy,
                by_role=metered.by_role,
                heard=heard,
                register_s=register_s,
                register_p95_ms=register_p95,
                watch_full=watch_full,
                watch_rows=watch_rows,
                watch_error=watch_error,
                log_notes=_log_notes(log),
            )
        finally:
            meter.halt()
            watch.close()
            service.stop()


def fml_level(args: argparse.Namespace, ranks: int, postmaster: int, tmp: Path, turn: int) -> Level:
    connections = args.connections_per_rank * ranks
    with postgres_database() as url:
        service = FastTrackML(url, (args.logs or tmp) / f"fml-{ranks}-{turn}.log", fml_binary(args.fml))
        service.start()
        watch = Watch(url)
        meter = LevelMeter(service, watch, postmaster)
        try:
            runs = create_fml_runs(service, ranks, per_rank=args.fml_runs == "rank")
            plan = schedule(ranks, args.steps_per_s, interval_for(args, ranks), args.seconds, "", args.seed + turn)
            path = tmp / f"fml-{ranks}.txt"
            write_requests(plan, path, runs)
            load_before = load_average()
            meter.start()
            machine = MachineMeter()
            summary, elapsed, generator_cpu = run_wrk(service.url, path, connections, plan.rate, args.seconds)
            busy = machine.busy_cores()
            drain_started = time.monotonic()
            probes = 0  # a point each, in rank 0's run, under a name of its own: left out of the count below
            while time.monotonic() - drain_started < 300:
                probe = {"key": "bench/probe", "value": 0.0, "timestamp": int(time.time() * 1000), "step": probes}
                probes += 1
                if answers_quickly(service, LOG_BATCH, json.dumps({"run_id": runs[0], "metrics": [probe]})):
                    break
                time.sleep(0.5)
            drain = time.monotonic() - drain_started
            metered = meter.stop()
            load_after = load_average()
            ok = summary["ok"]
            # its answers carry no counts: the requests answered are taken as the first `ok` sent (they
            # are `ok` of the first `sent`, in any order: at least the `ok` smallest of those)
            sizes = [len(r.fml_metrics) for r in plan.requests[: summary["sent"]]]
            acknowledged = sum(sizes[:ok])
            in_flight = sum(sizes[ok:])
            least = sum(sorted(sizes)[:ok])
            return Level(
                service="FastTrackML",
                ranks=ranks,
                connections=connections,
                seconds=elapsed,
                offered=plan.rate,
                requests=ok,
                sent=summary["sent"],
                failed=_failed(summary),
                failures=_failures(summary),
                p50_ms=summary["p50_us"] / 1000,
                p95_ms=summary["p95_us"] / 1000,
                p99_ms=summary["p99_us"] / 1000,
                service_cpu=metered.service_cpu,
                postgres_cpu=metered.postgres_cpu,
                ended_pg_cpu=metered.ended_pg_cpu,
                generator_cpu=generator_cpu,
                drain_s=drain,
                rss_mb=sum(rss_mb(pid) for pid in service.pids()),
                acknowledged=acknowledged,
                stored=service.stored(sorted(set(runs))) - probes,
                least=least,
                in_flight=in_flight,
                load=(load_before, load_after),
                busy_cores=busy,
            )
        finally:
            meter.halt()
            watch.close()
            service.stop()


def create_fml_runs(service: Service, ranks: int, per_rank: bool) -> list[str]:
    """The MLflow run of each rank: one for the job (as Holter has it), or one per rank."""

    async def create() -> list[str]:
        limits = httpx.Limits(max_connections=REGISTER_AT_ONCE, max_keepalive_connections=REGISTER_AT_ONCE)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            if not per_rank:
                return [await service.create_run(client, f"job-{ranks}")] * ranks
            gate = asyncio.Semaphore(REGISTER_AT_ONCE)

            async def one(rank: int) -> str:
                async with gate:
                    return await service.create_run(client, f"job-{ranks}-rank-{rank}")

            return list(await asyncio.gather(*(one(r) for r in range(ranks))))

    return asyncio.run(create())


FAILURES = {
    "failed": "non-200",
    "timeouts": "timeouts",
    "connect_errors": "connect",
    "read_errors": "read",
    "write_errors": "write",
}


def _failed(summary: dict) -> int:
    return sum(summary[k] for k in FAILURES)


def _failures(summary: dict) -> dict[str, int]:
    return {name: summary[k] for k, name in FAILURES.items() if summary[k]}


def _log_notes(log: Path) -> list[str]:
    """The service's warnings, failed rounds and exceptions (a traceback's last line), counted
    (uvicorn's "Exceeded concurrency limit." among them: its 503s)."""
    counts: dict[str, int] = {}
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        words = ("WARNING", "ERROR", "failed", "Exceeded")
        if any(word in line for word in words) or re.match(r"[\w.]+(Error|Exception)\b", line):
            key = line.strip()[:160]
            counts[key] = counts.get(key, 0) + 1
    return [f"{count} x {line}" for line, count in sorted(counts.items(), key=lambda item: -item[1])[:5]]


HEADER = (
    f"{'service':<12}{'ranks':>6}{'conns':>6}{'offered/s':>10}{'req/s':>7}{'p50 ms':>8}{'p95 ms':>8}{'p99 ms':>8}"
    f"{'failed':>7}{'svc CPU-s':>10}{'pg CPU-s':>9}{'CPU-ms/rank-s':>14}{'CPU-s/1k req':>13}{'drain s':>8}"
    f"{'RSS MB':>7}{'load':>11}{'busy':>6}  stored"
)


def row(level: Level) -> str:
    return (
        f"{level.service:<12}{level.ranks:>6}{level.connections:>6}{level.offered:>10.1f}{level.achieved:>7.1f}"
        f"{level.p50_ms:>8.0f}{level.p95_ms:>8.0f}{level.p99_ms:>8.0f}{level.failed:>7}{level.service_cpu:>10.1f}"
        f"{level.postgres_cpu:>9.1f}{level.cpu_ms_per_rank_s:>14.2f}{level.cpu_per_1k:>13.1f}{level.drain_s:>8.1f}"
        f"{level.rss_mb:>7.0f}{level.load[0]:>5.1f}-{level.load[1]:<5.1f}{level.busy_cores:>6.2f}  {level.stored_note}"
    )


def details(level: Level) -> list[str]:
    out = []
    if level.by_role:
        per_request = {role: cpu / max(1, level.sent) * 1000 for role, cpu in level.by_role.items()}
        per_request["postgres"] = level.postgres_cpu / max(1, level.sent) * 1000
        split = ", ".join(f"{role} {ms * level.offered / level.ranks:.2f}" for role, ms in per_request.items())
        each = ", ".join(f"{role} {ms:.1f}" for role, ms in per_request.items())
        out.append(f"    CPU-ms per rank-second: {split} (per request: {each})")
    if level.register_s is not None:
        out.append(
            f"    registration of {level.ranks} ranks: {level.register_s:.1f} s ({REGISTER_AT_ONCE} at a time, p95 "
            f"{level.register_p95_ms:.0f} ms); ranks heard during the load: {level.heard} of {level.ranks}; ranks "
            f"watch pass: {level.watch_full} reading the losses' band, {level.watch_rows} rows only"
        )
    if level.failures:
        out.append("    failed requests: " + ", ".join(f"{n:,} {kind}" for kind, n in level.failures.items()))
    if level.watch_error:
        out.append(f"    the ranks watch's pass FAILED: {level.watch_error}")
    out.append(
        f"    requests sent {level.sent:,}, answered {level.requests:,}; ended pg CPU-s {level.ended_pg_cpu:.1f}, "
        f"generator (wrk) CPU-s {level.generator_cpu:.2f}, points acknowledged {level.acknowledged:,}"
    )
    out.extend(f"    service log: {note}" for note in level.log_notes)
    return out


def _spread(values: list[float], spec: str) -> str:
    """The median, and the range in brackets when there are several."""
    values = sorted(values)
    if len(values) == 1:
        return format(values[0], spec)
    return f"{format(statistics.median(values), spec)} ({format(values[0], spec)}-{format(values[-1], spec)})"


def summarise(levels: list[Level], rank_counts: list[int], p95_bound: float) -> None:
    print("\nMedians over repeats (range in brackets):")
    held: dict[str, int | None] = {}
    for ranks in rank_counts:
        per_1k: dict[str, float] = {}
        for name in ("Holter", "FastTrackML"):
            mine = [lv for lv in levels if lv.ranks == ranks and lv.service == name]
            if not mine:
                continue
            failed = sum(lv.failed for lv in mine)
            stored = "exact" if all(lv.stored_note.startswith(("exact", "within")) for lv in mine) else "MISMATCH"
            per_1k[name] = statistics.median(lv.cpu_per_1k for lv in mine)
            line = (
                f"{name:<12}{ranks:>5} ranks: {_spread([lv.achieved for lv in mine], '.1f')} of "
                f"{mine[0].offered:.1f} req/s; p95 {_spread([lv.p95_ms for lv in mine], '.0f')} ms; "
                f"{_spread([lv.cpu_ms_per_rank_s for lv in mine], '.2f')} CPU-ms per rank-second; "
                f"{_spread([lv.cpu_per_1k for lv in mine], '.1f')} CPU-s per 1k requests; "
                f"RSS {statistics.median(lv.rss_mb for lv in mine):.0f} MB; failed {failed}; stored {stored}"
            )
            passes = [lv for lv in mine if lv.watch_full and lv.watch_rows]
            if passes:
                line += (
                    f"; ranks watch pass {_spread([lv.watch_full.wall_ms for lv in passes], '.0f')} ms reading "
                    f"the losses, {_spread([lv.watch_rows.wall_ms for lv in passes], '.0f')} ms rows only"
                )
            print(line)
            held.setdefault(name, None)
            if statistics.median(lv.p95_ms for lv in mine) < p95_bound and failed == 0:
                held[name] = max(held[name] or 0, ranks)
        if len(per_1k) == 2:
            ratio = per_1k["Holter"] / per_1k["FastTrackML"]
            print(f"{'':<12}{ranks:>5} ranks: Holter's CPU per request {ratio:.2f}x FastTrackML's")
    for name, ranks in held.items():
        print(f"{name}: largest rank count with p95 < {p95_bound:g} ms and no failed request: {ranks or 'none'}")
    loads = [x for lv in levels for x in lv.load]
    if loads:
        busy = [lv.busy_cores for lv in levels]
        print(
            f"load average (1 min) during the levels: {min(loads):.1f}-{max(loads):.1f}; cores busy on the machine "
            f"during the loads: {min(busy):.2f}-{max(busy):.2f} of {os.cpu_count()}"
        )
    gen = [lv.generator_cpu / lv.seconds for lv in levels]
    if gen:
        print(f"generator (wrk) CPU: at most {max(gen):.3f} cores during a level")


def _exit_on_signal(number: int, _frame: object) -> None:
    raise SystemExit(128 + number)  # unwinds like Ctrl-C: the services stopped, their databases dropped


def raise_open_files(needed: int) -> None:
    """wrk and the service each hold a socket per connection: lift this process's soft limit on
    open files (its children inherit it) to what the level needs, up to the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed + 1024
    if soft != resource.RLIM_INFINITY and soft < want:
        top = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))
        if top < want:
            sys.exit(f"open files: the hard limit {hard} is below the {want} this level needs (ulimit -Hn)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="256,512,1024", help="rank counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each level's load")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps-per-s", type=float, default=2.0, help="the job's training steps a second")
    parser.add_argument(
        "--rank-interval",
        type=float,
        default=0.0,
        help="HOLTER_RANK_INTERVAL on the ranks: seconds between a rank's beats, and between the batches of "
        "ranks > 0 (rank 0 sends one a second); 0 (default): the client's own for the job's size "
        "(holter.ranks.rank_interval: 5 s up to 256 ranks, 20 s at 1,024)",
    )
    parser.add_argument("--targets", default="holter,fasttrackml")
    parser.add_argument(
        "--connections-per-rank", type=int, default=2, help="kept-alive connections per rank (the client: 2)"
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=0,
        help="HOLTER_MAX_CONNECTIONS for the service (0: the connections wrk opens + 64; the service's own "
        "default is 1000)",
    )
    parser.add_argument("--workers", type=int, default=1, help="holter serve --workers")
    parser.add_argument("--p95-ms", type=float, default=250.0, help="the p95 bound of the closing line")
    parser.add_argument("--fml", help="path of FastTrackML's fml binary")
    parser.add_argument(
        "--fml-runs",
        choices=("rank", "job"),
        default="rank",
        help="FastTrackML's runs: one per rank (default: its requests contend on no run, as in wrk.py), or one for "
        "the job (as Holter has it)",
    )
    parser.add_argument("--logs", type=Path, help="keep each level's service log in this folder")
    parser.add_argument("--seed", type=int, default=0, help="the shuffle of the ranks' phases, and who goes first")
    args = parser.parse_args()
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    if args.rank_interval and (args.seconds < args.rank_interval or args.rank_interval < 1):
        parser.error("--rank-interval must be at least 1, and --seconds at least one --rank-interval")
    if args.steps_per_s < 1:
        parser.error("--steps-per-s must be at least 1 (rank 0's batch each second needs a step)")
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, _exit_on_signal)
    rank_counts = [int(r) for r in args.ranks.split(",")]
    targets = [t.strip().lower() for t in args.targets.split(",")]
    raise_open_files(max(rank_counts) * args.connections_per_rank)
    postmaster = postmaster_pid()
    limit = f"{args.max_connections}" if args.max_connections else "the job's connections + 64"
    print(
        f"one job of N ranks, each a beat and a points batch every "
        f"{f'{args.rank_interval:g} s' if args.rank_interval else 'interval the client chooses for its size'} "
        f"(rank 0: every 1 s), {args.steps_per_s:g} steps/s; wrk, one thread, {args.connections_per_rank} kept-alive "
        f"connection(s) per rank; {args.seconds:g} s per level, {args.repeats} repeat(s); Holter: fresh database and "
        f"`holter serve` per level ({args.workers} API process(es), live detection and the ranks watch on), "
        f"HOLTER_MAX_CONNECTIONS = {limit}; CPU = service + Postgres; busy = cores busy on the whole machine during "
        f"the load (of {os.cpu_count()}); load average now {load_average():.1f}",
        flush=True,
    )
    levels: list[Level] = []
    makers = {"holter": holter_level, "fasttrackml": fml_level}
    turn = args.seed
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        print(HEADER, flush=True)
        for ranks in rank_counts:
            for _ in range(args.repeats):
                order = targets[turn % len(targets) :] + targets[: turn % len(targets)]
                turn += 1
                for target in order:
                    level = makers[target](args, ranks, postmaster, tmp, turn)
                    levels.append(level)
                    print(row(level), flush=True)
                    for line in details(level):
                        print(line, flush=True)
    summarise(levels, rank_counts, args.p95_ms)


if __name__ == "__main__":
    main()
