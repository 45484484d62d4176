"""`holter serve`: run the service on one port."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading

import uvicorn

from holter_server.app import create_app
from holter_server.services.auth import AuthMode
from holter_server.settings import Settings
from holter_server.store.database import upgrade


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings from the environment, overridden by whatever the command line gave."""
    overrides = {key: getattr(args, key, None) for key in ("host", "port", "database_url")}
    return Settings(**{key: value for key, value in overrides.items() if value is not None})


class WorkerSupervisor:
    """Keeps one `holter worker` process running beside the API, restarting it if it dies."""

    def __init__(self, database_url: str) -> None:
        self.command = [sys.executable, "-m", "holter.cli", "worker", "--db", database_url, "--parent-pid", str(os.getpid())]
        self.process: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="holter-worker-supervisor", daemon=True)

    def start(self) -> None:
        self.process = subprocess.Popen(self.command)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(2.0):
            if self.process is not None and self.process.poll() is not None:
                print(f"holter: the worker exited with {self.process.returncode}; starting another", file=sys.stderr, flush=True)
                self.process = subprocess.Popen(self.command)

    def stop(self) -> None:
        self._stop.set()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    url = settings.resolved_database_url()
    store = "SQLite at " + url.removeprefix("sqlite:///") if url.startswith("sqlite") else "Postgres"
    print(f"Holter {store}; listening on http://{settings.host}:{settings.port} (API docs at /docs)", flush=True)
    print(AuthMode(settings).describe(), flush=True)
    supervisor = None
    # `holter serve` runs the background loops in a worker process unless HOLTER_BACKGROUND says
    # otherwise: detection and alerting then never take the API's CPU and GIL from ingest.
    if os.environ.get("HOLTER_BACKGROUND", "process") == "process":
        upgrade(url)
        supervisor = WorkerSupervisor(url)
        supervisor.start()
        settings = settings.model_copy(update={"background": "off"})
    try:
        # Clients send every second on a kept-alive connection; a short keep-alive makes the server
        # close it just as the next batch goes out (the client retries, but it costs a round trip).
        uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level=args.log_level, access_log=False,
                    timeout_keep_alive=75)
    finally:
        if supervisor is not None:
            supervisor.stop()
    return 0
