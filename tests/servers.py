"""Real Holter servers for tests: `holter serve` in a child process on a loopback port."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
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
