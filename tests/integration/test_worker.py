"""The worker process `holter serve` starts beside the API ends with it, even after a SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ADMIN_TOKEN
from tests.servers import ServerProcess


def workers_of(server: ServerProcess) -> list[str]:
    """The worker processes `server` started (they name their parent; the database URL is not on their command line)."""
    assert server.process is not None
    listing = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True, check=False).stdout
    return [
        line
        for line in listing.splitlines()
        if "holter.cli worker" in line and f"--parent-pid {server.process.pid}" in line
    ]


def test_the_worker_dies_with_a_killed_server(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'holter.db'}"
    server = ServerProcess(url, log_path=tmp_path / "server.log").start()
    try:
        deadline = time.monotonic() + 30
        while not workers_of(server):
            assert time.monotonic() < deadline, "no worker started"
            time.sleep(0.2)
    finally:
        server.kill()
    # polled: the worker runs niced, and on a loaded machine it noticed its parent gone after 10 s
    deadline = time.monotonic() + 30
    while workers_of(server):
        assert time.monotonic() < deadline, "the worker outlived its server"
        time.sleep(0.2)


def test_a_server_killed_while_its_worker_starts_leaves_no_worker(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'holter.db'}"
    server = ServerProcess(url, log_path=tmp_path / "server.log").start()
    server.kill()  # the worker may still be importing: once it has, it finds its parent gone
    # polled, not a fixed sleep: on a loaded machine the import alone can take longer than one
    deadline = time.monotonic() + 30
    while workers_of(server):
        assert time.monotonic() < deadline, "the worker outlived its server"
        time.sleep(0.2)


# Loaded by the worker's interpreter at start-up: every `Condition.notify_all` (which
# `Event.set` calls holding the event's lock) takes 0.3 s, so a second signal surely arrives
# while the first one's handler is inside it, as it did by chance on a loaded machine.
SLOW_NOTIFY = """
import threading, time
_notify_all = threading.Condition.notify_all
def _slow_notify_all(self):
    time.sleep(0.3)
    _notify_all(self)
threading.Condition.notify_all = _slow_notify_all
"""


def test_a_second_sigterm_during_the_first_ones_handling_still_ends_the_worker(tmp_path: Path) -> None:
    """The parent's death (PR_SET_PDEATHSIG) and a supervisor's terminate arrive together: the
    second signal's handler ran inside the first one's `Event.set` and blocked for good on the
    event's lock, so the worker lived on, deaf (seen: a worker left running 45 minutes after its
    server)."""
    (tmp_path / "sitecustomize.py").write_text(SLOW_NOTIFY)
    database = tmp_path / "holter.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    worker = subprocess.Popen(
        [sys.executable, "-m", "holter.cli", "worker", "--db", f"sqlite:///{database}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # past start-up (a signal before the handlers are set kills it outright) into its wait loop
        deadline = time.monotonic() + 60
        while not database.exists():
            assert time.monotonic() < deadline and worker.poll() is None, "the worker did not start"
            time.sleep(0.1)
        time.sleep(3)
        worker.send_signal(signal.SIGTERM)
        time.sleep(0.1)
        worker.send_signal(signal.SIGTERM)
        worker.wait(20)
    except subprocess.TimeoutExpired:
        raise AssertionError("the worker did not end within 20 s of two SIGTERMs") from None
    finally:
        if worker.poll() is None:
            worker.kill()


def niceness_of_threads(pid: int) -> set[int]:
    """The nice value of each thread of a process (field 19 of /proc/<pid>/task/<tid>/stat)."""
    values = set()
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        fields = stat.read_text().rsplit(")", 1)[1].split()
        values.add(int(fields[16]))
    return values


def test_the_worker_and_its_loops_run_below_the_apis_priority(tmp_path: Path) -> None:
    """On a full machine the API's requests get the CPU first: the worker runs at HOLTER_WORKER_NICE."""
    server = ServerProcess(f"sqlite:///{tmp_path / 'holter.db'}", log_path=tmp_path / "server.log").start()
    try:
        assert server.process is not None
        deadline = time.monotonic() + 30
        while not workers_of(server) or len(niceness_of_threads(int(workers_of(server)[0].split()[0]))) == 0:
            assert time.monotonic() < deadline, "no worker started"
            time.sleep(0.2)
        worker = int(workers_of(server)[0].split()[0])
        api = niceness_of_threads(server.process.pid)
        deadline = time.monotonic() + 30
        while len(list(Path(f"/proc/{worker}/task").iterdir())) < 4:  # the main thread and its loops
            assert time.monotonic() < deadline, "the worker's loops did not start"
            time.sleep(0.2)
        assert niceness_of_threads(worker) == {min(max(api) + 10, 19)}
    finally:
        server.kill()


def test_the_worker_gets_the_database_url_by_environment_not_on_its_command_line(
    store_url: str, tmp_path: Path
) -> None:
    env = {"HOLTER_AUTH": "on", "HOLTER_ADMIN_TOKEN": ADMIN_TOKEN}
    secured = ServerProcess(store_url, env=env, log_path=tmp_path / "server.log").start()
    try:
        assert secured.process is not None
        children = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _parent_of(p) == secured.process.pid]
        workers = [p for p in children if b"worker" in (p / "cmdline").read_bytes()]
        assert workers, "holter serve started no worker"
        for worker in workers:
            assert secured.database_url.encode() not in (worker / "cmdline").read_bytes()
            assert b"--db" not in (worker / "cmdline").read_bytes()
    finally:
        secured.stop()


def _parent_of(proc: object) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])  # type: ignore[operator]
    except (OSError, ValueError, IndexError):
        return None
