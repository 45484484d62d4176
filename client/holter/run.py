"""`holter.init()` and the `Run` a training job logs into."""

from __future__ import annotations

import atexit
import operator
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any

from holter.sender import Barrier, Control, Sender
from holter.spool import Spool, default_spool_root
from holter.throughput import ThroughputMeter, rates
from holter.transport import RejectedError, Transport, TransportError
from holter.wire import dumps

DEFAULT_URL = "http://127.0.0.1:8765"

# Runs not yet finished; held strongly so a run the caller forgot about is still flushed at exit.
_active_runs: "set[Run]" = set()
_hooks_installed = False


class Run:
    """One training run. Create it with `holter.init()`."""

    def __init__(
        self,
        *,
        run_id: str,
        project: str,
        name: str | None,
        config: Mapping[str, Any] | None,
        tags: list[str] | None,
        url: str,
        api_key: str | None,
        spool_root: Path,
        flush_interval: float,
        max_queued_calls: int,
        connect_timeout: float,
    ) -> None:
        self.id = run_id
        self.project = project
        self.name = name
        self.config = dict(config or {})
        self.url = url
        self.resumed = False
        self.status = "running"
        self._max_queued_calls = max_queued_calls
        self._next_step = 0
        self._summary: dict[str, Any] = {}
        self._throughput = ThroughputMeter()
        self._finish_lock = threading.Lock()
        register = Control(
            "/api/v1/runs",
            {"id": run_id, "project": project, "name": name, "config": self.config, "tags": list(tags or [])},
        )
        spool = Spool(spool_root, run_id)
        self._registered = False
        # With batches of an earlier process still spooled, registering now would put this
        # process's start before that process's end; the sender replays them first instead.
        if not len(spool):
            self._register_now(url, api_key, register, connect_timeout)
        self._sender = Sender(
            transport=Transport(url, api_key),
            spool=spool,
            run_id=run_id,
            register=register,
            flush_interval=flush_interval,
        )
        if not self._registered:
            self._sender.queue.append(register)
        self._queue = self._sender.queue
        self._wake = self._sender.wake
        self._sender.start()
        _active_runs.add(self)

    def _register_now(self, url: str, api_key: str | None, register: Control, timeout: float) -> None:
        """Try once to register so a resumed run learns its last step; never fatal."""
        try:
            answer = Transport(url, api_key, timeout=timeout).request("POST", register.path, dumps(register.payload))
        except TransportError as exc:
            print(f"holter: service at {url} unreachable ({exc}); spooling to disk until it returns", file=sys.stderr)
            return
        except RejectedError as exc:
            raise ValueError(f"holter.init refused by the service: {exc.detail}") from exc
        self._registered = True
        self.resumed = bool(answer.get("resumed"))
        if answer.get("last_step") is not None:
            self._next_step = int(answer["last_step"]) + 1

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Record metric values at `step` (default: one past the previous step).

        Returns at once: the values are queued and sent by a background thread. NaN and ±Inf
        are kept as they are.
        """
        if step is None:
            step = self._next_step
        elif type(step) is not int:
            step = operator.index(step)  # accepts numpy ints; refuses 1.5 here rather than at the service
        self._next_step = step + 1
        values = dict(metrics)
        self._summary.update(values)
        queue = self._queue
        queue.append((step, time.time(), values))
        if len(queue) >= self._max_queued_calls:
            self._wait_for_room()

    def update_config(self, values: Mapping[str, Any]) -> None:
        """Merge `values` into the run's config, here and at the service (wandb's `config.update`)."""
        self.config.update(values)
        # creating an existing run resumes it and merges the config it is given into the stored one
        self._queue.append(Control("/api/v1/runs", {"id": self.id, "project": self.project, "name": self.name,
                                                    "config": dict(values), "tags": []}))
        self._wake.set()

    @property
    def summary(self) -> Mapping[str, Any]:
        """The last value logged for each metric (read-only, like the service's latest values)."""
        return MappingProxyType(self._summary)

    def log_throughput(self, tokens: float | None = None, samples: float | None = None, *, step: int | None = None) -> None:
        """Call once per training step, after it: logs `step_time` (the time since the previous
        call), `throughput/tokens_per_s` and `throughput/samples_per_s` for the step's `tokens`
        and `samples`. The first call only starts the clock and logs nothing.
        """
        metrics = self._throughput.mark(tokens, samples)
        if metrics is not None:
            self.log(metrics, step=step)

    @contextmanager
    def timed_step(self, tokens: float | None = None, samples: float | None = None, *, step: int | None = None) -> Iterator[None]:
        """Time the block as one step and log `step_time` and the throughput of its `tokens` and
        `samples`; nothing is logged when the block raises."""
        started = time.perf_counter()
        yield
        self.log(rates(time.perf_counter() - started, tokens, samples), step=step)

    def _wait_for_room(self) -> None:
        # Memory stays bounded: the sender always drains the queue, to the service or to disk.
        self._wake.set()
        while len(self._queue) >= self._max_queued_calls // 2 and self._sender.is_alive():
            time.sleep(0.001)

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until everything logged so far was sent or spooled; False on timeout."""
        barrier = Barrier()
        self._queue.append(barrier)
        self._wake.set()
        return barrier.done.wait(timeout)

    def finish(self, status: str = "finished", timeout: float | None = None) -> None:
        """Mark the run finished (or "crashed") and deliver what is queued.

        Waits up to `timeout` seconds (default $HOLTER_FLUSH_TIMEOUT or 30); whatever could not
        reach the service by then stays in the spool and is sent by the next process for this run.
        """
        with self._finish_lock:
            if self.status != "running":
                return
            self.status = status
            _active_runs.discard(self)
        if timeout is None:
            timeout = float(os.environ.get("HOLTER_FLUSH_TIMEOUT", "30"))
        self._queue.append(Control(f"/api/v1/runs/{self.id}/finish", {"status": status}))
        if not self._sender.stop(timeout):
            print(f"holter: run {self.id} finished with batches still in the spool at {self._sender._spool.path}", file=sys.stderr)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.finish("crashed" if exc_type is not None else "finished")

    def __repr__(self) -> str:
        return f"Run(id={self.id!r}, project={self.project!r}, name={self.name!r}, status={self.status!r})"


def init(
    project: str | None = None,
    name: str | None = None,
    config: Mapping[str, Any] | None = None,
    *,
    id: str | None = None,
    tags: list[str] | None = None,
    url: str | None = None,
    api_key: str | None = None,
    spool_dir: str | os.PathLike[str] | None = None,
    flush_interval: float = 1.0,
    max_queued_calls: int = 200_000,
    connect_timeout: float = 3.0,
) -> Run:
    """Start (or resume, when `id` names an existing run) a run and return it.

    `url` and `api_key` default to $HOLTER_URL and $HOLTER_API_KEY; `id` to $HOLTER_RUN_ID or a
    new random id. Giving the same id after a restart appends to the same run.
    """
    _install_hooks()
    return Run(
        run_id=id or os.environ.get("HOLTER_RUN_ID") or uuid.uuid4().hex[:16],
        project=project or os.environ.get("HOLTER_PROJECT") or "default",
        name=name,
        config=config,
        tags=tags,
        url=url or os.environ.get("HOLTER_URL") or DEFAULT_URL,
        api_key=api_key or os.environ.get("HOLTER_API_KEY"),
        spool_root=Path(spool_dir) if spool_dir else default_spool_root(),
        flush_interval=flush_interval,
        max_queued_calls=max_queued_calls,
        connect_timeout=connect_timeout,
    )


def _install_hooks() -> None:
    """Mark runs crashed on an uncaught exception and flush them at interpreter exit."""
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    previous_hook = sys.excepthook

    def excepthook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        for run in list(_active_runs):
            run.finish("crashed")
        previous_hook(exc_type, exc, tb)

    sys.excepthook = excepthook
    atexit.register(_finish_all)


def _finish_all() -> None:
    for run in list(_active_runs):
        run.finish("finished")
