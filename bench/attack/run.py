"""Replay the resource attacks of issues 18 and 33 against a real `holter serve` on loopback,
bounded in size and time, and print the API process's memory and /health's latency during each.

    python bench/attack/run.py                    # this tree
    python bench/attack/run.py --tree /tmp/old    # the same attacks on another source tree (the code before the fix)
    python bench/attack/run.py --db postgresql://postgres@127.0.0.1:5432/mydb   # a fresh, empty database there
    python bench/attack/run.py --only ids,levers  # the attacks whose names hold these words

Auth is on (an admin token), as in a team deployment. Every request goes to 127.0.0.1 only.
Attacks (issue 18): four 256 MiB bodies with no key; a 64 MiB /points body of small numbers; 40
stalled uploads with a valid key (more than the connection pool); 300 slowloris sockets;
report.html of a run with many events; compare of a 1M-point run; family of 2,000 tiny metrics
at 10,000 buckets; levers over runs with 3,000-key configs. (Issue 33): 45 heartbeats naming
5,000 ids each with a project's ingest key while another key reads a run; levers over 3 runs
whose 12,000 config keys move together; 30 resumes of one run adding 100 KB of config and 64
tags each; CSV export, Parquet export and analyze of a run of 10,000 metrics × 100 points.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "attack-admin-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


class Watch:
    """Samples the API process's RSS every 0.1 s and /health's latency every 0.25 s while an attack runs."""

    def __init__(self, pid: int, url: str) -> None:
        self.pid, self.url = pid, url
        self.rss: list[float] = []
        self.health: list[float] = []
        self.failures = 0
        self._stop = threading.Event()

    def _memory(self) -> None:
        while not self._stop.wait(0.1):
            self.rss.append(rss_mib(self.pid))

    def _latency(self) -> None:
        with httpx.Client(timeout=10) as client:
            while not self._stop.wait(0.25):
                started = time.perf_counter()
                try:
                    ok = client.get(f"{self.url}/api/v1/health").status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.health.append(time.perf_counter() - started)
                self.failures += not ok

    @contextmanager
    def during(self) -> Iterator[Watch]:
        threads = [
            threading.Thread(target=self._memory, daemon=True),
            threading.Thread(target=self._latency, daemon=True),
        ]
        for thread in threads:
            thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            for thread in threads:
                thread.join(15)


def start_server(tree: Path, db: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": f"{tree}/client:{tree}/server:{tree}/dashboard:{tree}",
        "HOLTER_AUTH": "on",
        "HOLTER_ADMIN_TOKEN": TOKEN,
        "HOLTER_DETECTION_ENABLED": "false",
    }
    command = [sys.executable, "-m", "holter.cli", "serve", "--port", str(port), "--db", db, "--log-level", "warning"]
    process = subprocess.Popen(command, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, cwd=tree)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            raise SystemExit(f"holter serve exited; see {log}")
        time.sleep(0.2)
    raise SystemExit("holter serve did not start")


# --- the attacks -------------------------------------------------------------------------------


def big_bodies_without_a_key(url: str, port: int, api: httpx.Client) -> str:
    """Four 256 MiB bodies with no key, at once, each sent as fast as the server takes it (20 s at most)."""
    size = 256 * 2**20
    answers: list[str] = []

    def one() -> None:
        chunk = b"[" + b"0," * (2**20 // 2 - 1) + b"0"
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            sock.sendall(
                (
                    "POST /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {size}\r\n\r\n"
                ).encode()
            )
            sent, deadline = 0, time.monotonic() + 20
            try:
                while sent < size and time.monotonic() < deadline:
                    sock.sendall(chunk[: min(len(chunk), size - sent)])
                    sent += len(chunk)
            except OSError:
                pass
            try:
                answers.append(sock.recv(200).split(b"\r\n", 1)[0].decode() + f" after {sent / 2**20:.0f} MiB sent")
            except OSError as exc:
                answers.append(f"{type(exc).__name__} after {sent / 2**20:.0f} MiB sent")

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return "; ".join(sorted(set(answers)))


def huge_points_body(url: str, port: int, api: httpx.Client, key: str, run_id: str) -> str:
    """A 64 MiB /points body of small numbers (16.7M values) with a valid key."""
    values = b"0," * (32 * 2**20 - 40)
    body = b'{"metrics": {"loss": {"steps": [0], "values": [' + values + b"0]}}}"
    answer = httpx.post(
        f"{url}/api/v1/runs/{run_id}/points",
        content=body,
        timeout=120,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    return f"HTTP {answer.status_code}"


def stalled_uploads(url: str, port: int, api: httpx.Client, key: str, run_id: str) -> str:
    """40 uploads with a valid key that send their headers and one byte, then stall for 12 s."""
    head = (
        f"POST /api/v1/runs/{run_id}/points HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
    ).encode()
    sockets = []
    for _ in range(40):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(head)
        sockets.append(sock)
    time.sleep(1)
    started = time.perf_counter()
    try:
        status = api.get("/runs", timeout=40).status_code
    except httpx.HTTPError as exc:
        status = type(exc).__name__
    runs_latency = time.perf_counter() - started
    time.sleep(max(0.0, 12 - runs_latency))
    for sock in sockets:
        sock.close()
    return f"GET /runs while stalled: {status} in {runs_latency:.2f} s"


def slowloris(url: str, port: int, api: httpx.Client) -> str:
    """300 sockets sending one header byte every 2 s for 16 s, never finishing their headers."""
    sockets = []
    for _ in range(300):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            sockets.append(sock)
        except OSError:
            break
    open_sockets = len(sockets)
    for _ in range(8):
        time.sleep(2)
        alive = []
        for sock in sockets:
            try:
                sock.sendall(b"X")
                alive.append(sock)
            except OSError:
                sock.close()
        sockets = alive
    for sock in sockets:
        sock.close()
    return f"{open_sockets} opened, {len(sockets)} still open after 16 s"


def many_ids_while_reading(url: str, ingest_key: str, read_key: str, run_id: str) -> str:
    """45 heartbeats at once, each naming 5,000 ids (`?runs=`), while a reader asks for a run in a loop."""
    ids = ",".join(f"r{i}" for i in range(5_000))
    statuses: list[str] = []

    def heartbeat() -> None:
        with httpx.Client(base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {ingest_key}"}) as client:
            try:
                statuses.append(str(client.post(f"/runs/{run_id}/heartbeat?runs={ids}", timeout=180).status_code))
            except httpx.HTTPError as exc:
                statuses.append(type(exc).__name__)

    threads = [threading.Thread(target=heartbeat) for _ in range(45)]
    for thread in threads:
        thread.start()
    reads: list[float] = []
    read_statuses: set[str] = set()
    with httpx.Client(base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {read_key}"}) as reader:
        while any(thread.is_alive() for thread in threads) or not reads:
            started = time.perf_counter()
            try:
                read_statuses.add(str(reader.get(f"/runs/{run_id}", timeout=180).status_code))
            except httpx.HTTPError as exc:
                read_statuses.add(type(exc).__name__)
            reads.append(time.perf_counter() - started)
    for thread in threads:
        thread.join()
    answers = ",".join(f"{n}×{s}" for s, n in sorted({s: statuses.count(s) for s in statuses}.items()))
    return (
        f"heartbeats {answers}; reader {'/'.join(sorted(read_statuses))} "
        f"p50 {statistics.median(reads):.2f} s max {max(reads):.1f} s"
    )


def resumed_thirty_times(api: httpx.Client) -> str:
    """30 resumes of one run, each adding 100 KB of new config keys and 64 new tags."""
    run_id = new_run(api, "attack-resume")
    statuses = []
    for n in range(30):
        config = {f"k{n}_{i}": "x" * 1000 for i in range(100)}
        tags = [f"t{n}_{i}" for i in range(64)]
        statuses.append(
            api.post(
                "/runs", json={"id": run_id, "project": "attack-resume", "config": config, "tags": tags}
            ).status_code
        )
    started = time.perf_counter()
    listed = api.get("/runs", params={"project": "attack-resume"}, timeout=120)
    run = api.get(f"/runs/{run_id}").json()
    return (
        f"{statuses.count(200)} taken, {len(statuses) - statuses.count(200)} refused; "
        f"config {len(json.dumps(run['config'])) / 1e6:.2f} MB, {len(run['tags'])} tags; "
        f"GET /runs {len(listed.content) / 1e6:.1f} MB in {time.perf_counter() - started:.1f} s"
    )


def timed_get(api: httpx.Client, path: str, params: dict | None = None, method: str = "GET") -> str:
    started = time.perf_counter()
    try:
        answer = api.request(method, path, params=params, timeout=600)
        status = f"HTTP {answer.status_code}, {len(answer.content) / 2**20:.1f} MiB"
    except httpx.HTTPError as exc:
        status = type(exc).__name__
    return f"{status} in {time.perf_counter() - started:.1f} s"


# --- set-up ------------------------------------------------------------------------------------


def post_points(api: httpx.Client, run_id: str, metrics: dict[str, tuple[list[int], list[float]]]) -> None:
    batch = {"metrics": {name: {"steps": steps, "values": values} for name, (steps, values) in metrics.items()}}
    api.post(
        f"/runs/{run_id}/points", content=json.dumps(batch), headers={"Content-Type": "application/json"}, timeout=900
    ).raise_for_status()


def plant_events(db: str, run_id: str, events: list[tuple[str, int, int]]) -> None:
    """Store events on `loss` straight through the store (as live detection would), so the set-up
    takes seconds; the attacks then go through the HTTP API only."""
    sys.path[:0] = [str(ROOT / "server"), str(ROOT / "client")]
    from holter_server.detect.events import Event
    from holter_server.services.detection import record_event
    from holter_server.store.database import make_engine, make_session_factory

    engine = make_engine(
        db if not db.startswith("postgresql://") else "postgresql+psycopg://" + db.removeprefix("postgresql://")
    )
    with make_session_factory(engine)() as session:
        for kind, start, end in events:
            event = Event(
                kind=kind,
                metric="loss",
                start_step=start,
                end_step=end,
                severity="warning",
                score=5.0,
                summary=f"{kind} at step {start}",
                peak_step=start,
            )
            record_event(session=session, run_id=run_id, key=f"attack:{kind}@{start}", event=event, muted=False)
        session.commit()
    engine.dispose()


def new_run(api: httpx.Client, project: str, config: dict | None = None) -> str:
    run_id = uuid.uuid4().hex[:16]
    api.post("/runs", json={"id": run_id, "project": project, "config": config or {}}).raise_for_status()
    return run_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--tree", type=Path, default=ROOT, help="source tree to run `holter serve` from (default: this one)"
    )
    parser.add_argument("--db", default=None, help="database URL (default: a fresh SQLite file)")
    parser.add_argument("--only", default="", help="comma-separated words: run only the attacks whose names hold one")
    args = parser.parse_args()
    only = [word.strip().lower() for word in args.only.split(",") if word.strip()]
    work = Path(tempfile.mkdtemp(prefix="holter-attack-"))
    db = args.db or f"sqlite:///{work / 'holter.db'}"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(args.tree.resolve(), db, port, work / "server.log")
    print(
        f"holter serve from {args.tree} on {url} ({'SQLite' if db.startswith('sqlite') else 'Postgres'}), auth on; "
        f"log {work / 'server.log'}"
    )
    try:
        with httpx.Client(base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120) as api:
            key = api.post("/keys", json={"name": "attack", "scope": "ingest"}).json()["key"]
            print(
                "setting up: a 1M-point run and its reference, 2,000 tiny metrics, a spiky run, runs with 3,000-key "
                "and 12,000-key configs, a run of 10,000 metrics ...",
                flush=True,
            )
            big, reference = new_run(api, "attack"), new_run(api, "attack")
            for run_id in (big, reference):
                for start in range(0, 1_000_000, 250_000):
                    steps = list(range(start, start + 250_000))
                    post_points(api, run_id, {"loss": (steps, [2.0 + (s % 97) / 1000 for s in steps])})
            tiny = new_run(api, "attack")
            post_points(api, tiny, {f"act/layer.{i}": ([0, 9_999], [1.0, 2.0]) for i in range(2_000)})
            spiky = new_run(api, "attack")
            values = [2.0 - s / 40_000 for s in range(32_000)]
            for s in range(50, 32_000, 100):
                values[s] = 40.0
            post_points(api, spiky, {"loss": (list(range(32_000)), values)})
            plant_events(db, spiky, [("loss_spike", s, s) for s in range(50, 32_000, 100)])  # 320 events
            for i in range(12):  # more than 8 runs: sampled permutation tests, 5,000 per pair
                lever_run = new_run(api, "levers", {f"k{j}": (i * j + j) % 11 for j in range(3_000)})
                post_points(api, lever_run, {"loss": (list(range(300)), [3.0 - s / 300 for s in range(300)])})
                plant_events(db, lever_run, [("divergence", 50 * (i + 1), 299)])
            # issue 33: keys of one project, a run of 10,000 metrics, runs whose 12,000 keys move together
            ids_ingest = api.post("/keys", json={"name": "ids", "scope": "ingest", "project": "attack"}).json()["key"]
            ids_read = api.post("/keys", json={"name": "ids-read", "scope": "read", "project": "attack"}).json()["key"]
            wide = new_run(api, "attack")
            post_points(
                api, wide, {f"m/{i}": (list(range(100)), [float(s % 7) for s in range(100)]) for i in range(10_000)}
            )
            for i in range(1, 4):
                new_run(api, "levers-keys", {f"k{j}": i * (j + 1) for j in range(12_000)})
            events = api.get(f"/runs/{spiky}/events", params={"limit": 1}).json()["count"]
            attacks: list[tuple[str, Callable[[], str]]] = [
                ("4 × 256 MiB bodies, no key", lambda: big_bodies_without_a_key(url, port, api)),
                ("64 MiB /points of small numbers", lambda: huge_points_body(url, port, api, key, tiny)),
                ("40 stalled uploads (valid key)", lambda: stalled_uploads(url, port, api, key, tiny)),
                ("300 slowloris sockets", lambda: slowloris(url, port, api)),
                (f"report.html, {events} events", lambda: timed_get(api, f"/runs/{spiky}/report.html")),
                (
                    "compare, 1M-point run",
                    lambda: timed_get(api, f"/runs/{big}/compare", {"metric": "loss", "reference": reference}),
                ),
                (
                    "family, 2,000 metrics × 10,000 buckets",
                    lambda: timed_get(api, f"/runs/{tiny}/family", {"prefix": "act/", "max_buckets": 10_000}),
                ),
                ("levers, 12 runs × 3,000 config keys", lambda: timed_get(api, "/levers", {"project": "levers"})),
                (
                    "45 × 5,000 ids in a query, one reading (ids)",
                    lambda: many_ids_while_reading(url, ids_ingest, ids_read, big),
                ),
                (
                    "levers, 3 runs × 12,000 keys together",
                    lambda: timed_get(api, "/levers", {"project": "levers-keys"}),
                ),
                ("30 resumes × 100 KB config, 64 tags", lambda: resumed_thirty_times(api)),
                ("10,000 metrics: CSV export", lambda: timed_get(api, f"/runs/{wide}/export")),
                (
                    "10,000 metrics: Parquet export",
                    lambda: timed_get(api, f"/runs/{wide}/export", {"format": "parquet"}),
                ),
                ("10,000 metrics: analyze", lambda: timed_get(api, f"/runs/{wide}/analyze", method="POST")),
            ]
            attacks = [(n, a) for n, a in attacks if not only or any(word in n.lower() for word in only)]
            assert server.pid is not None
            print(f"\nAPI process at rest: RSS {rss_mib(server.pid):.0f} MiB\n")
            print(
                f"{'attack':42} {'RSS peak':>9} {'+RSS':>7} {'CPU s':>6} {'wall s':>6} {'/health p50':>11} {'max':>7} "
                f"{'fail':>4}  answer"
            )
            for name, attack in attacks:
                before, cpu, started = rss_mib(server.pid), cpu_seconds(server.pid), time.perf_counter()
                watch = Watch(server.pid, url)
                with watch.during():
                    answer = attack()
                    wall = time.perf_counter() - started
                    time.sleep(0.5)
                peak = max(watch.rss or [before])
                health = watch.health or [float("nan")]
                print(
                    f"{name:42} {peak:8.0f}M {peak - before:+6.0f}M {cpu_seconds(server.pid) - cpu:6.1f} {wall:6.1f} "
                    f"{statistics.median(health) * 1000:9.0f}ms {max(health) * 1000:5.0f}ms {watch.failures:4d}  "
                    f"{answer}",
                    flush=True,
                )
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
