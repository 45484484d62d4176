"""`holter serve`: run the service on one port."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading

import uvicorn

from holter_server.app import create_app
from holter_server.commands.worker import StopSignals, die_with_parent, parent_alive, quiet_collector
from holter_server.connections import uvicorn_options
from holter_server.services.auth import AuthMode
from holter_server.settings import Settings
from holter_server.store.database import upgrade


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings from the environment, overridden by whatever the command line gave."""
    overrides = {key: getattr(args, key, None) for key in ("host", "port", "database_url")}
    return Settings(**{key: value for key, value in overrides.items() if value is not None})


class WorkerSupervisor:
    """Keeps one `holter worker` process running beside the API, restarting it if it dies."""

    def __init__(self, settings: Settings) -> None:
        self.command = [sys.executable, "-m", "holter.cli", "worker", "--parent-pid", str(os.getpid())]
        # The database URL (and its password) goes by environment, never on the command line,
        # which `ps` shows every user of the machine; host and port make the worker's alert links
        # point at this service.
        self.env = {
            **os.environ,
            "HOLTER_DATABASE_URL": settings.resolved_database_url(),
            "HOLTER_HOST": settings.host,
            "HOLTER_PORT": str(settings.port),
        }
        self.process: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="holter-worker-supervisor", daemon=True)

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, env=self.env)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(2.0):
            if self.process is not None and self.process.poll() is not None:
                print(
                    f"holter: the worker exited with {self.process.returncode}; starting another",
                    file=sys.stderr,
                    flush=True,
                )
                self.process = subprocess.Popen(self.command, env=self.env)

    def stop(self) -> None:
        self._stop.set()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()


class ApiProcesses:
    """`--workers N`: N single-worker uvicorn processes accepting on one socket that this process
    binds (so a port in use fails here, once, clearly) and hands down by file descriptor. Each
    process is its own interpreter, so ingest uses every core instead of one GIL; the kernel's
    shared accept queue spreads connections over whichever process is free to take them. Their
    background loops are off: the background work runs in the one worker process beside them."""

    def __init__(self, args: argparse.Namespace, settings: Settings, count: int) -> None:
        self.socket = listening_socket(settings.host, settings.port)
        self.command = [
            sys.executable,
            "-m",
            "holter.cli",
            "serve",
            "--socket-fd",
            str(self.socket.fileno()),
            "--log-level",
            args.log_level,
            "--parent-pid",
            str(os.getpid()),
        ]
        # the database URL (and its password) by environment, never on the command line `ps` shows
        self.env = {
            **os.environ,
            "HOLTER_BACKGROUND": "off",
            "HOLTER_DATABASE_URL": settings.resolved_database_url(),
            "HOLTER_HOST": settings.host,
            "HOLTER_PORT": str(settings.port),
        }
        self.count = count
        self.processes: list[subprocess.Popen[bytes]] = []

    def _spawn(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.command, pass_fds=[self.socket.fileno()], env=self.env)

    def run(self) -> int:
        """Start them, restart any that dies, until this process is told to stop."""
        stop = StopSignals()
        self.processes = [self._spawn() for _ in range(self.count)]
        try:
            while not stop.wait(1.0):
                for index, process in enumerate(self.processes):
                    if process.poll() is not None:
                        print(
                            f"holter: API process {process.pid} exited with {process.returncode}; starting another",
                            file=sys.stderr,
                            flush=True,
                        )
                        self.processes[index] = self._spawn()
        finally:
            for process in self.processes:
                if process.poll() is None:
                    process.terminate()
            for process in self.processes:
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
            self.socket.close()
        return 0


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on host:port, with Nagle off for the connections it accepts (a
    response written in two parts must not wait for the client's delayed ACK)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it on Linux
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    url = settings.resolved_database_url()
    socket_fd = getattr(args, "socket_fd", None)
    if socket_fd is not None:
        # one of the API processes of `--workers N`: serve on the socket the parent bound
        if getattr(args, "parent_pid", None):
            die_with_parent()
            if not parent_alive(args.parent_pid):
                return 0
        app = create_app(settings)
        quiet_collector()  # as the worker does: what building the app made lives as long as the process
        uvicorn.run(
            app,
            fd=socket_fd,
            log_level=args.log_level,
            access_log=False,
            **uvicorn_options(header_timeout=settings.header_timeout, max_connections=settings.max_connections),
        )
        return 0
    workers = getattr(args, "workers", 1) or 1
    if workers < 1:
        print("holter serve: --workers must be at least 1", file=sys.stderr)
        return 2
    store = "SQLite at " + url.removeprefix("sqlite:///") if url.startswith("sqlite") else "Postgres"
    processes = f" in {workers} API processes" if workers > 1 else ""
    print(
        f"Holter {store}; listening on http://{settings.host}:{settings.port}{processes} (API docs at /docs)",
        flush=True,
    )
    print(AuthMode(settings).describe(), flush=True)
    supervisor = None
    background = settings.background
    if workers > 1 or background == "process":
        upgrade(url, partition_points=settings.partition_points)  # once, before any API process opens the store
    # `holter serve` runs the background loops in a worker process unless HOLTER_BACKGROUND says
    # otherwise: detection and alerting then never take the API's CPU and GIL from ingest.
    if background == "process":
        supervisor = WorkerSupervisor(settings)
        supervisor.start()
        settings = settings.model_copy(update={"background": "off"})
    try:
        if workers > 1:
            return ApiProcesses(args, settings, workers).run()
        app = create_app(settings)
        quiet_collector()  # as the worker does: what building the app made lives as long as the process
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            log_level=args.log_level,
            access_log=False,
            **uvicorn_options(header_timeout=settings.header_timeout, max_connections=settings.max_connections),
        )
    finally:
        if supervisor is not None:
            supervisor.stop()
    return 0
