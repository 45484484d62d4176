"""The background sender: turns queued `log()` calls into batches and delivers them in order.

Everything a run sends (its registration, point batches, its finish) goes through one ordered
stream. While the service answers, requests go straight to it; after the first failure they are
appended to the run's disk spool, and the spool is replayed oldest first (with exponential
backoff and jitter between attempts) before anything new is sent directly, so the service sees
requests in the order the training job made them.

When the spool cannot be written either (a full disk, a spool path that is not a folder), the
requests are held in memory, after the spooled ones and in order, and retried: to disk and to the
service. The sender says so once. Memory for them is bounded (`max_held_bytes`); once it is
full the sender stops taking new calls from the queue, so `log()` waits for room rather than
dropping what it was given. What the service answers is reported once per metric: a metric it
refused (with its reason) and a metric re-sent with another value at a stored step.

A little over 400 lines, kept as one module: the direct path, the spool replay and the in-memory
hold are one ordered stream, and their hand-overs (which request may go next) only read right
side by side.
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from holter.job import rank_series
from holter.media import expand
from holter.spool import Spool
from holter.transport import RejectedError, Transport, TransportError
from holter.wire import dumps, encode_values


class Control:
    """A request placed in the log stream (register, finish), sent after everything queued before it."""

    def __init__(self, path: str, payload: dict[str, Any]) -> None:
        self.path = path
        self.payload = payload


def without_provenance(register: Control, refusal: RejectedError) -> bool:
    """A service older than the client's provenance refuses the field (422): take it out of the
    run's registration and say so once; True when there was one to take out (send again)."""
    if refusal.status != 422 or "provenance" not in register.payload or "provenance" not in str(refusal.detail):
        return False
    del register.payload["provenance"]
    print("holter: this service does not store a run's code version yet; registering without it", file=sys.stderr)
    return True


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


@dataclass(frozen=True)
class Delivery:
    """What became of the points a run logged, as far as this process knows.

    `stored`, `duplicates` and `refused` count points the service answered for (`refused`:
    points of metrics it would not store, each reported on stderr with its reason, and every
    point of a batch it refused whole, kept under the spool's `rejected/`); `spooled`
    counts requests on disk waiting for the service (durable: the next process for this run
    sends them); `not_durable` counts points only in this process's memory, lost if it ends now.
    """

    stored: int = 0
    duplicates: int = 0
    refused: int = 0
    spooled: int = 0
    not_durable: int = 0


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
        max_held_bytes: int = 256 * 1024 * 1024,
        offline: bool = False,
        rank: int = 0,
    ) -> None:
        super().__init__(name=f"holter-sender-{run_id}", daemon=True)
        # offline (mode="offline"): every request goes to the spool and nothing to the network;
        # `holter sync` sends the spool later
        self._offline = offline
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
        # requests the spool could not take: (entry, points), oldest first, after the spooled ones
        self._held: deque[tuple[bytes, int]] = deque()
        self._held_bytes = 0
        self._max_held_bytes = max_held_bytes
        self._said: set[str] = set()  # what was already reported, so each thing is said once
        self._stored = self._duplicates = self._refused = 0
        self._points_in_flight = 0
        # a rank of a distributed job other than 0 sends its metrics as that rank's series (holter/job.py)
        self._rank = rank
        self._sent_names: dict[str, str] = {}
        self._gone = False  # the service said the run was deleted (410): nothing more is sent

    # --- called from the training thread -------------------------------------------------

    def stop(self, timeout: float) -> bool:
        """Deliver what is queued (up to `timeout` seconds), then end; True when nothing is left unsent."""
        self._stop_deadline = time.monotonic() + timeout
        self._stopping = True
        self.wake.set()
        self.join(timeout + 1.0)
        return not self.queue and not self._spooling

    @property
    def spool_path(self) -> Path:
        """The run's spool folder."""
        return self._spool.path

    @property
    def spooling(self) -> bool:
        """True while the service is away and batches are going to disk (or, failing that, to memory)."""
        return self._spooling

    def delivery(self) -> Delivery:
        """The counts so far (see `Delivery`); points still queued count as not durable."""
        queued = sum(len(item[2]) for item in list(self.queue) if type(item) is tuple)
        return Delivery(
            stored=self._stored,
            duplicates=self._duplicates,
            refused=self._refused,
            spooled=len(self._spool),
            not_durable=queued + self._points_in_flight + sum(points for _entry, points in list(self._held)),
        )

    def send_spooled(self) -> bool:
        """Send what the spool holds now, oldest first, from the calling thread (`holter sync`);
        True when all of it reached the service, False when it went away (the rest stays)."""
        self._spooling = True
        self._replay()
        return not self._spooling

    # --- the thread -----------------------------------------------------------------------

    def run(self) -> None:
        while True:
            self.wake.wait(self._wait_time())
            self.wake.clear()
            stopping = self._stopping
            try:
                if self._held:
                    self._persist_held()
                if self._held_bytes < self._max_held_bytes:
                    self._drain()
                else:
                    self._say_once(
                        "memory full",
                        f"holter: {self._held_bytes / 2**20:.0f} MiB of requests are held in memory "
                        "(the service is away and the spool cannot be written); log() now waits for room",
                    )
                if self._spooling and not self._offline and time.monotonic() >= self._next_retry:
                    self._replay()
                self._heartbeat()
            except Exception as exc:  # noqa: BLE001 — the sender must outlive any one bad batch
                print(f"holter: sender error, will retry: {exc!r}", file=sys.stderr)
            if (
                stopping
                and (not self.queue or self._held_bytes >= self._max_held_bytes)
                and (not self._spooling or self._offline or time.monotonic() >= self._stop_deadline)
            ):
                return

    def _wait_time(self) -> float:
        if self._offline:
            return 0.0 if self._stopping else self._flush_interval
        if self._stopping:
            return max(0.0, min(self._next_retry - time.monotonic(), 0.2)) if self._spooling else 0.0
        if self._spooling:
            return max(0.01, min(self._flush_interval, self._next_retry - time.monotonic()))
        return self._flush_interval

    def _drain(self) -> None:
        """Turn everything queued so far into requests, keeping the order of controls and points."""
        batch = _Batch()
        queue = self.queue
        while queue and self._held_bytes < self._max_held_bytes:
            item = queue.popleft()
            if type(item) is tuple:
                batch.add(*item)
                self._points_in_flight = batch.count
                if batch.count >= self._max_batch_points:
                    self._deliver_points(batch)
                    batch = _Batch()
                continue
            if batch.count:
                self._deliver_points(batch)
                batch = _Batch()
            if isinstance(item, Control):
                self._deliver(item.path, dumps(item.payload), 0)
            elif isinstance(item, Barrier):
                if self._spooling and not self._offline and time.monotonic() >= self._next_retry:
                    self._replay()
                item.done.set()
        if batch.count:
            self._deliver_points(batch)

    def _deliver_points(self, batch: _Batch) -> None:
        self._deliver(self._points_path, self._points_body(batch), batch.count)
        self._points_in_flight = 0

    def _points_body(self, batch: _Batch) -> bytes:
        metrics: dict[str, dict[str, list[Any]]] = {}
        # what histograms logged in this batch become: their quantile metrics, by name
        expanded: dict[str, tuple[list[int], list[float]]] = {}
        for name, (logged_steps, values) in batch.columns.items():
            steps = logged_steps
            if not isinstance(name, str):  # checked here, not in log(), which stays cheap
                self._refused += len(steps)
                self._say_once(
                    f"name {name!r}",
                    f"holter: metric name {name!r} is not text ({type(name).__name__}); its points are not sent",
                )
                continue
            try:
                floats = [float(v) for v in values]
            except (TypeError, ValueError, OverflowError):
                floats, steps = self._keep_numeric(name, steps, values, expanded)
                if not floats:
                    continue
            metrics[self._sent_name(name)] = {"steps": steps, "values": encode_values(floats)}
        for name, (steps, floats) in expanded.items():
            column = metrics.setdefault(self._sent_name(name), {"steps": [], "values": []})
            column["steps"] = column["steps"] + steps
            column["values"] = column["values"] + encode_values(floats)
        step_times = {"steps": list(batch.step_times), "times": list(batch.step_times.values())}
        return dumps({"metrics": metrics, "step_times": step_times})

    def _sent_name(self, name: str) -> str:
        if not self._rank:
            return name
        sent = self._sent_names.get(name)
        if sent is None:
            sent = self._sent_names[name] = rank_series(name, self._rank)
        return sent

    def _keep_numeric(
        self, name: str, steps: list[int], values: list[Any], expanded: dict[str, tuple[list[int], list[float]]]
    ) -> tuple[list[float], list[int]]:
        kept: tuple[list[float], list[int]] = ([], [])
        for step, value in zip(steps, values):
            try:
                kept[0].append(float(value))
            except (TypeError, ValueError, OverflowError):
                # a Histogram's quantiles, a dict's values under name/key; nothing for an image or a table
                points = expand(name, value)
                if points is None:
                    self._say_not_numeric(name, value)
                    continue
                for metric, item in points.items():
                    try:
                        number = float(item)
                    except (TypeError, ValueError, OverflowError):
                        self._say_not_numeric(metric, item)
                        continue
                    column = expanded.setdefault(metric, ([], []))
                    column[0].append(step)
                    column[1].append(number)
                continue
            kept[1].append(step)
        return kept

    def _say_not_numeric(self, name: str, value: Any) -> None:
        if name not in self._bad_metrics:
            self._bad_metrics.add(name)
            print(
                f"holter: metric {name!r} got a non-numeric value {value!r}; such values are skipped", file=sys.stderr
            )

    def _deliver(self, path: str, body: bytes, points: int) -> None:
        entry = encode_entry(path, body)
        if self._offline or self._spooling or not self._send(entry):
            self._spooling = True
            # once anything is held in memory, newer requests are held behind it, to keep the order
            if self._held or not self._spool_put(entry):
                self._held.append((entry, points))
                self._held_bytes += len(entry)

    def _spool_put(self, entry: bytes) -> bool:
        try:
            self._spool.put(entry)
        except OSError as exc:
            self._say_once(
                "spool",
                f"holter: cannot write the spool at {self._spool.path} ({exc}); requests the service has "
                "not taken are held in memory and retried, but are lost if this process ends before they are sent",
            )
            return False
        return True

    def _persist_held(self) -> None:
        """Move held requests to the spool, oldest first, while it takes them."""
        while self._held and self._spool_put(self._held[0][0]):
            entry, _points = self._held.popleft()
            self._held_bytes -= len(entry)

    def _replay(self) -> None:
        for batch_file in self._spool.pending():
            try:
                entry = batch_file.read_bytes()
            except FileNotFoundError:  # another process for this run replayed it
                continue
            if not self._send(entry):
                return
            self._spool.remove(batch_file)
        while self._held:
            if not self._send(self._held[0][0]):
                return
            entry, _points = self._held.popleft()
            self._held_bytes -= len(entry)
        self._spooling = False

    def _send(self, entry: bytes) -> bool:
        """Send one request; False when the service is away (try again later)."""
        path, body = decode_entry(entry)
        if self._gone:  # the run was deleted on the service: nothing more of it is sent
            self._set_aside(path, body, RejectedError(410, "the run was deleted"), quiet=True)
            return True
        try:
            answer = self._post(path, body)
        except TransportError:
            self._failures += 1
            delay = min(30.0, 0.25 * 2 ** min(self._failures, 8))
            self._next_retry = time.monotonic() + delay * random.uniform(0.5, 1.0)
            return False
        except RejectedError as exc:
            if exc.status == 410:  # someone deleted the run: it stays deleted, and this process says so once
                self._gone = True
                self._say_once(
                    "gone",
                    f"holter: {exc.detail}; what this process logs for it from now on is kept in "
                    f"{self._spool.path / 'rejected'}, not sent",
                )
            self._set_aside(path, body, exc, quiet=exc.status == 410)
        else:
            if path == self._points_path and isinstance(answer, dict):
                self._take_answer(answer)
        self._failures = 0
        self._last_contact = time.monotonic()
        return True

    def _post(self, path: str, body: bytes) -> Any:
        try:
            return self._transport.request("POST", path, body)
        except RejectedError as exc:
            if path == self._register.path and without_provenance(self._register, exc):
                return self._transport.request("POST", path, dumps(self._register.payload))
            # The run is unknown (say the service lost its database): register it again, then resend.
            if exc.status != 404 or path == self._register.path:
                raise
            self._transport.request("POST", self._register.path, dumps(self._register.payload))
            return self._transport.request("POST", path, body)

    def _take_answer(self, answer: dict[str, Any]) -> None:
        """Count what a points batch did and report, once per metric, what was refused or conflicted."""
        self._stored += int(answer.get("stored") or 0)
        self._duplicates += int(answer.get("duplicates") or 0)
        for refused in answer.get("refused") or ():
            self._refused += int(refused.get("points") or 0)
            self._say_refused(str(refused.get("metric")), str(refused.get("reason")))
        for conflict in answer.get("conflicts") or ():
            metric, steps = conflict.get("metric"), conflict.get("steps") or []
            self._say_once(
                f"conflict {metric}",
                f"holter: metric {metric!r} was logged again at step {steps[0] if steps else '?'} "
                "with another value; the service keeps the value logged first (further such points of this metric "
                "are not reported)",
            )

    def _say_refused(self, metric: str, reason: str) -> None:
        self._say_once(
            f"refused {metric}",
            f"holter: the service refused metric {metric!r}: {reason}; its points are not "
            "stored, the other metrics are",
        )

    def _say_once(self, key: str, message: str) -> None:
        if key not in self._said:
            self._said.add(key)
            print(message, file=sys.stderr)

    def _set_aside(self, path: str, body: bytes, exc: RejectedError, *, quiet: bool = False) -> None:
        """Keep a refused request on disk for a person to look at, instead of retrying it forever
        (`quiet`: the reason was said already, as for every request of a deleted run)."""
        refusals = (
            [e for e in exc.detail if isinstance(e, dict) and e.get("type") == "metric_refused"]
            if isinstance(exc.detail, list)
            else []
        )
        for refusal in refusals:
            self._refused += int(refusal.get("points") or 0)
            self._say_refused(str((refusal.get("loc") or ["?"])[-1]), str(refusal.get("msg")))
        if path == self._points_path and not refusals:  # refused whole (too large, malformed): every point of it
            self._refused += _points_in(body)
        rejected = self._spool.path / "rejected"
        target = rejected / f"{time.time_ns():020d}.json"
        try:
            rejected.mkdir(parents=True, exist_ok=True)
            target.write_bytes(encode_entry(path, body))
        except OSError as write_error:
            print(
                f"holter: the service refused {path} ({exc}); it could not be kept on disk either ({write_error})",
                file=sys.stderr,
            )
            return
        if refusals:
            self._say_once("rejected", f"holter: requests the service refused are kept in {rejected}")
        elif not quiet:
            print(f"holter: the service refused {path} ({exc}); kept in {target}", file=sys.stderr)

    def _heartbeat(self) -> None:
        if self._offline or self._spooling or time.monotonic() - self._last_contact < self._heartbeat_interval:
            return
        with contextlib.suppress(TransportError, RejectedError):
            self._transport.request("POST", f"/api/v1/runs/{self._run_id}/heartbeat", b"{}")
            self._last_contact = time.monotonic()


def _points_in(body: bytes) -> int:
    """The points of a points request's body (0 when it cannot be read)."""
    try:
        metrics = json.loads(body).get("metrics") or {}
        return sum(len(series.get("steps") or ()) for series in metrics.values())
    except (ValueError, AttributeError, TypeError):
        return 0
