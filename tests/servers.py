"""Real Holter servers for tests: `holter serve` in a child process on a loopback port."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import httpx


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """A `holter serve` child process that tests can start, SIGKILL and start again."""

    def __init__(
        self,
        database_url: str,
        *,
        port: int | None = None,
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        args: tuple[str, ...] = (),
    ) -> None:
        self.database_url = database_url
        self.args = args  # more `holter serve` options
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # Test receivers listen on loopback, which a real deployment refuses as a webhook target.
        # Auth is off unless a test turns it on: the access tests create keys in the shared store,
        # which would switch `auto` on for every other server of the session.
        self.env = {**os.environ, "HOLTER_ALLOW_PRIVATE_WEBHOOKS": "true", "HOLTER_AUTH": "off", **(env or {})}
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> ServerProcess:
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
            *self.args,
        ]
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115 — the child's, for its life
        self.process = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self.healthy():
            if self.process.poll() is not None:
                raise RuntimeError(f"holter serve exited with {self.process.returncode}; log: {self.log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError("holter serve did not become healthy")
            time.sleep(0.1)
        return self

    def api(self, *, key: str | None = None, timeout: float = 30.0) -> httpx.Client:
        """An HTTP client for this server's API (`key`: sent as a bearer token)."""
        headers = {"Authorization": f"Bearer {key}"} if key else None
        return httpx.Client(base_url=f"{self.url}/api/v1", headers=headers, timeout=timeout)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/health", timeout=1) as response:
                return json.load(response)["status"] == "ok"
        except (OSError, ValueError):
            return False

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush, as a crash or the OOM killer would."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


class InProcessServer:
    """The service in this test process: uvicorn in a thread on a loopback port, the background
    loops in threads, and Dash only when asked (`create_app(dashboard=False)` otherwise). It answers the real client and
    plain HTTP as `holter serve` does, and starts in a fraction of a second instead of several:
    for the API tests that never kill, restart or look at the server's process."""

    def __init__(
        self, database_url: str, *, settings: dict[str, object] | None = None, dashboard: bool = False
    ) -> None:
        from holter_server.settings import Settings

        self.database_url = database_url
        self.dashboard = dashboard
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # as ServerProcess: loopback receivers allowed, auth off unless the test turns it on
        given: dict[str, object] = {"allow_private_webhooks": True, "auth": "off", **(settings or {})}
        self.settings = Settings(database_url=database_url, port=self.port, background="thread", **given)
        self._server: object | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 60.0) -> InProcessServer:
        import uvicorn
        from holter_server.app import create_app
        from holter_server.connections import uvicorn_options

        config = uvicorn.Config(
            create_app(self.settings, dashboard=self.dashboard),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            access_log=False,
            **uvicorn_options(
                header_timeout=self.settings.header_timeout, max_connections=self.settings.max_connections
            ),
        )
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(target=server.run, name=f"holter-in-process-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.healthy():
            if not self._thread.is_alive():
                raise RuntimeError("the in-process server stopped before it became healthy")
            if time.monotonic() > deadline:
                raise RuntimeError("the in-process server did not become healthy")
            time.sleep(0.02)
        return self

    def api(self, *, key: str | None = None, timeout: float = 30.0) -> httpx.Client:
        """An HTTP client for this server's API (`key`: sent as a bearer token)."""
        headers = {"Authorization": f"Bearer {key}"} if key else None
        return httpx.Client(base_url=f"{self.url}/api/v1", headers=headers, timeout=timeout)

    def healthy(self) -> bool:
        return ServerProcess.healthy(self)  # type: ignore[arg-type]

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True  # type: ignore[attr-defined]
            self._thread.join(15)
