"""The background sender: turns queued `log()` calls into batches and delivers them in order.

Everything a run sends (its registration, point batches, its finish) goes through one ordered
stream. While the service answers, requests go straight to it; after the first failure they are
appended to the run's disk spool, and the spool is replayed oldest first (with exponential
backoff and jitter between attempts) before anything new is sent directly, so the service sees
requests in the order the training job made them.
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from holter.spool import Spool
from holter.transport import RejectedError, Transport, TransportError
from holter.wire import dumps, encode_values


class Control:
    """A request placed in the log stream (register, finish), sent after everything queued before it."""

    def __init__(self, path: str, payload: dict[str, Any]) -> None:
        self.path = path
        self.payload = payload


class Barrier:
    """A marker in the log stream; the sender sets `done` once everything before it was handled."""

    def __init__(self) -> None:
        self.done = threading.Event()


class _Batch:
    """Points gathered for one request: columns per metric, and one wall time per step
    (metrics logged together share it, which keeps the body a third of the size)."""

    def __init__(self) -> None:
        self.columns: dict[str, tuple[list[int], list[Any]]] = {}
        self.step_times: dict[int, float] = {}
        self.count = 0

    def add(self, step: int, wall_time: float, metrics: dict[str, Any]) -> None:
        columns = self.columns
        for name, value in metrics.items():
            column = columns.get(name)
            if column is None:
                column = columns[name] = ([], [])
            column[0].append(step)
            column[1].append(value)
        self.step_times[step] = wall_time
        self.count += len(metrics)


def encode_entry(path: str, body: bytes) -> bytes:
    """One spool entry: the request path on the first line, the JSON body after it."""
    return path.encode() + b"\n" + body


def decode_entry(entry: bytes) -> tuple[str, bytes]:
    """Split a spool entry back into path and body."""
    path, _, body = entry.partition(b"\n")
    return path.decode(), body


class Sender(threading.Thread):
    """Delivers one run's stream to the service, spooling to disk whenever it is away."""

    def __init__(
        self,
        *,
        transport: Transport,
        spool: Spool,
        run_id: str,
        register: Control,
        flush_interval: float = 1.0,
        max_batch_points: int = 50_000,
        heartbeat_interval: float = 30.0,
    ) -> None:
        super().__init__(name=f"holter-sender-{run_id}", daemon=True)
        self.queue: deque[Any] = deque()
        self.wake = threading.Event()
        self._transport = transport
        self._spool = spool
        self._run_id = run_id
        self._points_path = f"/api/v1/runs/{run_id}/points"
        self._register = register
        self._flush_interval = flush_interval
        self._max_batch_points = max_batch_points
        self._heartbeat_interval = heartbeat_interval
        self._stopping = False
        self._stop_deadline = 0.0
        # Entries left by an earlier process for this run are replayed before anything new.
        self._spooling = len(spool) > 0
        self._failures = 0
        self._next_retry = 0.0
        self._last_contact = time.monotonic()
        self._bad_metrics: set[str] = set()

    # --- called from the training thread -------------------------------------------------

    def stop(self, timeout: float) -> bool:
        """Deliver what is queued (up to `timeout` seconds), then end; True when nothing is left unsent."""
        self._stop_deadline = time.monotonic() + timeout
        self._stopping = True
        self.wake.set()
        self.join(timeout + 1.0)
        return not self.queue and not self._spooling

    @property
    def spooling(self) -> bool:
        """True while the service is away and batches are going to disk."""
        return self._spooling

    # --- the thread -----------------------------------------------------------------------

    def run(self) -> None:
        while True:
            self.wake.wait(self._wait_time())
            self.wake.clear()
            stopping = self._stopping
            try:
                self._drain()
                if self._spooling and time.monotonic() >= self._next_retry:
                    self._replay()
                self._heartbeat()
            except Exception as exc:  # the sender must outlive any one bad batch
                print(f"holter: sender error, will retry: {exc!r}", file=sys.stderr)
            if stopping and not self.queue:
                if not self._spooling or time.monotonic() >= self._stop_deadline:
                    return

    def _wait_time(self) -> float:
        if self._stopping:
            return max(0.0, min(self._next_retry - time.monotonic(), 0.2)) if self._spooling else 0.0
        if self._spooling:
            return max(0.01, min(self._flush_interval, self._next_retry - time.monotonic()))
        return self._flush_interval

    def _drain(self) -> None:
        """Turn everything queued so far into requests, keeping the order of controls and points."""
        batch = _Batch()
        queue = self.queue
        while queue:
            item = queue.popleft()
            if type(item) is tuple:
                batch.add(*item)
                if batch.count >= self._max_batch_points:
                    self._deliver(self._points_path, self._points_body(batch))
                    batch = _Batch()
                continue
            if batch.count:
                self._deliver(self._points_path, self._points_body(batch))
                batch = _Batch()
            if isinstance(item, Control):
                self._deliver(item.path, dumps(item.payload))
            elif isinstance(item, Barrier):
                if self._spooling and time.monotonic() >= self._next_retry:
                    self._replay()
                item.done.set()
        if batch.count:
            self._deliver(self._points_path, self._points_body(batch))

    def _points_body(self, batch: _Batch) -> bytes:
        metrics = {}
        for name, (steps, values) in batch.columns.items():
            try:
                floats = [float(v) for v in values]
            except (TypeError, ValueError):
                floats, steps = self._keep_numeric(name, steps, values)
                if not floats:
                    continue
            metrics[name] = {"steps": steps, "values": encode_values(floats)}
        step_times = {"steps": list(batch.step_times), "times": list(batch.step_times.values())}
        return dumps({"metrics": metrics, "step_times": step_times})

    def _keep_numeric(self, name: str, steps: list[int], values: list[Any]) -> tuple[list[float], list[int]]:
        kept: tuple[list[float], list[int]] = ([], [])
        for step, value in zip(steps, values):
            try:
                kept[0].append(float(value))
            except (TypeError, ValueError):
                if name not in self._bad_metrics:
                    self._bad_metrics.add(name)
                    print(f"holter: metric {name!r} got a non-numeric value {value!r}; such values are skipped", file=sys.stderr)
                continue
            kept[1].append(step)
        return kept

    def _deliver(self, path: str, body: bytes) -> None:
        entry = encode_entry(path, body)
        if self._spooling or not self._send(entry):
            self._spool.put(entry)
            self._spooling = True

    def _replay(self) -> None:
        for batch_file in self._spool.pending():
            try:
                entry = batch_file.read_bytes()
            except FileNotFoundError:  # another process for this run replayed it
                continue
            if not self._send(entry):
                return
            self._spool.remove(batch_file)
        self._spooling = False

    def _send(self, entry: bytes) -> bool:
        """Send one request; False when the service is away (try again later)."""
        path, body = decode_entry(entry)
        try:
            self._post(path, body)
        except TransportError:
            self._failures += 1
            delay = min(30.0, 0.25 * 2 ** min(self._failures, 8))
            self._next_retry = time.monotonic() + delay * random.uniform(0.5, 1.0)
            return False
        except RejectedError as exc:
            self._set_aside(path, body, exc)
        self._failures = 0
        self._last_contact = time.monotonic()
        return True

    def _post(self, path: str, body: bytes) -> None:
        try:
            self._transport.request("POST", path, body)
        except RejectedError as exc:
            # The run is unknown (say the service lost its database): register it again, then resend.
            if exc.status != 404 or path == self._register.path:
                raise
            self._transport.request("POST", self._register.path, dumps(self._register.payload))
            self._transport.request("POST", path, body)

    def _set_aside(self, path: str, body: bytes, exc: RejectedError) -> None:
        """Keep a refused request on disk for a person to look at, instead of retrying it forever."""
        rejected = self._spool.path / "rejected"
        rejected.mkdir(parents=True, exist_ok=True)
        target = rejected / f"{time.time_ns():020d}.json"
        target.write_bytes(encode_entry(path, body))
        print(f"holter: the service refused {path} ({exc}); kept in {target}", file=sys.stderr)

    def _heartbeat(self) -> None:
        if self._spooling or time.monotonic() - self._last_contact < self._heartbeat_interval:
            return
        with contextlib.suppress(TransportError, RejectedError):
            self._transport.request("POST", f"/api/v1/runs/{self._run_id}/heartbeat", b"{}")
            self._last_contact = time.monotonic()


def load_entry_json(entry_file: Path) -> tuple[str, Any]:
    """Read a spool entry as (path, decoded body); for tools and tests."""
    path, body = decode_entry(entry_file.read_bytes())
    return path, json.loads(body)
