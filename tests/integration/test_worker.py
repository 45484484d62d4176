"""The worker process `holter serve` starts beside the API ends with it, even after a SIGKILL."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.servers import ServerProcess


def workers_of(database_url: str) -> list[str]:
    listing = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in listing.splitlines() if "holter.cli worker" in line and database_url in line]


def test_the_worker_dies_with_a_killed_server(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'holter.db'}"
    server = ServerProcess(url, log_path=tmp_path / "server.log").start()
    try:
        deadline = time.monotonic() + 30
        while not workers_of(url):
            assert time.monotonic() < deadline, "no worker started"
            time.sleep(0.2)
    finally:
        server.kill()
    deadline = time.monotonic() + 10
    while workers_of(url):
        assert time.monotonic() < deadline, "the worker outlived its server"
        time.sleep(0.2)


def test_a_server_killed_while_its_worker_starts_leaves_no_worker(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'holter.db'}"
    server = ServerProcess(url, log_path=tmp_path / "server.log").start()
    server.kill()  # the worker may still be importing
    time.sleep(4)
    assert workers_of(url) == []
