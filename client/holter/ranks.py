"""A rank's own vitals: its step cadence, its time computing and waiting in collectives, and a
beat from its background thread that keeps speaking while its main thread is stuck.

In synchronous data-parallel training every rank leaves each all-reduce together, so every
rank's step takes as long as the slowest one's: step time alone cannot tell which rank is slow.
What differs is how long each waits in the collectives for the others: the slow rank (the
straggler) arrives last and waits least. `CollectiveClock` measures, per step, the whole step
and the part of it spent blocked in collectives; the rest is the rank's own work before them.

It is fed by `holter.distributed` (a DDP communication hook timing each gradient bucket's
all-reduce, and timed wrappers of `torch.distributed`'s blocking collectives) and by the step
boundaries `holter.torch.watch` sees; without those, by the steps `log()` is called with. What it
measured goes two ways: into the run at most once a second as each rank's series
(`holter/dist/step_s`, `wait_s`, `compute_s`), and into the beat.

`RankBeat` sends every few seconds (`HOLTER_RANK_INTERVAL`, default 5) the step the rank is in,
how long ago that step moved, whether it is inside a collective (which, since when), its
window of timings (medians over its last 200 steps), and when its step has not moved, the top
frames of its main thread's stack (`sys._current_frames`): where a hung rank is stuck. A beat the
service does not take is not retried: the next one says everything again.

Standard library only.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

from holter.transport import RejectedError, Transport, TransportError
from holter.wire import dumps

DEFAULT_INTERVAL_S = 5.0
WINDOW_STEPS = 200  # the straggler is judged on a rank's recent steps, as "over the last 200 steps"
LOG_EVERY_S = 1.0  # a rank's timings reach its series at most this often (a mean of the steps since)
STACK_FRAMES = 8
STEP_S, WAIT_S, COMPUTE_S, LOCAL_GRAD_NORM = (
    "holter/dist/step_s",
    "holter/dist/wait_s",
    "holter/dist/compute_s",
    "holter/dist/local_grad_norm",
)
# torch.distributed's functions whose frame on a stack means the rank is inside that collective
COLLECTIVES = frozenset(
    {
        "all_reduce",
        "all_gather",
        "all_gather_into_tensor",
        "all_gather_object",
        "all_to_all",
        "all_to_all_single",
        "barrier",
        "broadcast",
        "broadcast_object_list",
        "gather",
        "monitored_barrier",
        "recv",
        "reduce",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "scatter",
        "send",
        "wait",
    }
)


# Ranks one service process carries at the default interval (bench/load/ranks.py: 256 ranks at
# 5 s held a p95 under 250 ms on 2 shared cores, 512 at 10 s): a bigger job spaces its ranks'
# beats and sends in proportion, so it offers the service what 256 ranks do.
RANKS_AT_DEFAULT_INTERVAL = 256
MAX_INTERVAL_S = 60.0


def rank_interval(world_size: int = 1) -> float:
    """Seconds between a rank's beats (and between sends of ranks other than 0):
    $HOLTER_RANK_INTERVAL, else 5 for a job of up to 256 ranks and in proportion beyond
    (10 s at 512, 20 s at 1,024, at most 60)."""
    import os

    given = os.environ.get("HOLTER_RANK_INTERVAL", "").strip()
    if given:
        try:
            value = float(given)
        except ValueError:
            value = 0.0
        if value > 0:
            return value
    scale = max(1.0, world_size / RANKS_AT_DEFAULT_INTERVAL)
    return min(MAX_INTERVAL_S, DEFAULT_INTERVAL_S * scale)


class CollectiveClock:
    """One rank's steps and its waits in collectives.

    `step_started(step)` opens a step (the previous one ends there). A blocking collective is
    timed by `entered(name)` ... `left()`; an asynchronous one (a DDP gradient bucket) by
    `launched(name)` when its work is handed over and `completed()` when it is done, from
    whatever thread completes it: the main thread waits at the end of the backward pass for the
    last bucket, so a step's wait there is its last bucket's completion minus its last launch.
    """

    def __init__(
        self,
        log: Callable[[dict[str, float], int], None] | None = None,
        *,
        perf: Callable[[], float] = time.perf_counter,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        # the clocks it reads (a test gives its own): intervals, moments told to the service, log pacing
        self._perf, self._wall, self._mono = perf, wall, mono
        self._lock = threading.Lock()
        self.step: int | None = None
        self.step_moved_at = wall()
        self._step_began: float | None = None
        self._wait = 0.0
        # asynchronous collectives of the open step: in flight, the last launch and last completion
        self._pending = 0
        self._pending_name: str | None = None
        self._pending_since: float | None = None
        self._last_launch: float | None = None
        self._last_done: float | None = None
        # a blocking collective under way: its name and when it began
        self._inside: tuple[str, float] | None = None
        self._window: deque[tuple[int, float, float]] = deque(maxlen=WINDOW_STEPS)
        self._unlogged: list[tuple[int, float, float]] = []
        self._logged_at = mono()
        self.extra: dict[
            str, float
        ] = {}  # values measured alongside (the local gradient norm), logged with the timings
        self.hooked = False  # a hook sees the steps (holter.torch.watch); else they are the steps log() is given

    # --- fed by the hooks -------------------------------------------------------------------

    def step_started(self, step: int) -> None:
        """Step `step` begins: the step before it (if any) is complete."""
        now = self._perf()
        with self._lock:
            if step == self.step:
                return
            previous, began = self.step, self._step_began
            if previous is not None and began is not None:
                wait = self._wait + max(0.0, (self._last_done or 0.0) - (self._last_launch or now))
                total = now - began
                self._window.append((previous, total, min(wait, total)))
                self._unlogged.append((previous, total, min(wait, total)))
            self.step, self._step_began = step, now
            self.step_moved_at = self._wall()
            self._wait = 0.0
            self._last_launch = self._last_done = None
        self._maybe_log()

    def entered(self, name: str) -> float:
        """A blocking collective begins; returns the moment to hand to `left`."""
        started = self._perf()
        self._inside = (name, self._wall())
        return started

    def left(self, started: float) -> None:
        """The blocking collective begun at `started` returned."""
        self._inside = None
        with self._lock:
            self._wait += self._perf() - started

    def launched(self, name: str) -> None:
        """An asynchronous collective was handed to the backend (a DDP gradient bucket)."""
        with self._lock:
            if self._pending == 0:
                self._pending_name, self._pending_since = name, self._wall()
            self._pending += 1
            self._last_launch = self._perf()

    def completed(self) -> None:
        """An asynchronous collective finished (from the backend's thread)."""
        with self._lock:
            self._pending = max(0, self._pending - 1)
            self._last_done = self._perf()
            if self._pending == 0:
                self._pending_name = self._pending_since = None

    # --- read by the beat -------------------------------------------------------------------

    def wall(self) -> float:
        """Now, on the clock its moments are told in (seconds since the epoch)."""
        return self._wall()

    def collective(self) -> tuple[str, float] | None:
        """The collective the rank is inside now (its name, since when, epoch seconds), if any."""
        inside = self._inside
        if inside is not None:
            return inside
        with self._lock:
            if self._pending and self._pending_name is not None and self._pending_since is not None:
                return self._pending_name, self._pending_since
        return None

    def window(self) -> dict[str, Any] | None:
        """The medians of the last steps (up to 200): whole step, wait in collectives, own work."""
        with self._lock:
            steps = list(self._window)
        if not steps:
            return None
        return {
            "steps": len(steps),
            "first_step": steps[0][0],
            "last_step": steps[-1][0],
            "step_s": statistics.median(s[1] for s in steps),
            "wait_s": statistics.median(s[2] for s in steps),
            "compute_s": statistics.median(s[1] - s[2] for s in steps),
        }

    def due(self) -> bool:
        """Whether the step now beginning is likely the last before the timings are next logged."""
        return self._mono() - self._logged_at >= 0.8 * LOG_EVERY_S

    def _maybe_log(self) -> None:
        if self._log is None or self._mono() - self._logged_at < LOG_EVERY_S:
            return
        with self._lock:
            steps, self._unlogged = self._unlogged, []
            extra, self.extra = self.extra, {}
        if not steps:
            return
        self._logged_at = self._mono()
        count = len(steps)
        total = sum(s[1] for s in steps) / count
        wait = sum(s[2] for s in steps) / count
        self._log({STEP_S: total, WAIT_S: wait, COMPUTE_S: total - wait, **extra}, steps[-1][0])


def main_thread_stack(frames: int = STACK_FRAMES) -> list[dict[str, Any]]:
    """The innermost `frames` frames of the main thread, outermost first: file, line, function, code."""
    ident = threading.main_thread().ident
    frame = sys._current_frames().get(ident) if ident is not None else None
    if frame is None:
        return []
    summary = traceback.extract_stack(frame)[-frames:]
    return [
        {
            "file": entry.filename[-512:],
            "line": entry.lineno or 0,
            "function": entry.name[:256],
            "code": (entry.line or "")[:512],
        }
        for entry in summary
    ]


def collective_on(stack: list[dict[str, Any]]) -> str | None:
    """The torch.distributed collective a stack is inside, by its frames (None: none)."""
    for frame in reversed(stack):
        if frame["function"] in COLLECTIVES and "torch/distributed" in frame["file"].replace("\\", "/"):
            return str(frame["function"])
    return None


class RankBeat(threading.Thread):
    """Tells the service every `interval` seconds where this rank stands (see the module doc)."""

    def __init__(
        self,
        *,
        transport: Transport,
        path: str,
        clock: CollectiveClock,
        logged_step: Callable[[], int],
        interval: float,
    ) -> None:
        super().__init__(name="holter-rank-beat", daemon=True)
        self._transport = transport
        self._path = path
        self.clock = clock
        self._logged_step = logged_step
        self.interval = interval
        self._halt = threading.Event()
        self._last_logged = -1
        self._logged_moved_at = clock.wall()
        self.sent = 0

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            self.beat()

    def payload(self) -> dict[str, Any]:
        """The beat as sent: the rank's step, how long it has been quiet, its collective, its timings
        and, when quiet, its stack."""
        now = self.clock.wall()
        logged = self._logged_step()
        if logged != self._last_logged:
            self._last_logged, self._logged_moved_at = logged, now
        clock = self.clock
        # the step in progress: the one a hook saw begin, unless the rank logged past it (no hook
        # sees its steps, or it is stuck before its next forward): then the one after its last log
        step, quiet = max(logged + 1, 0), now - self._logged_moved_at
        if clock.step is not None and clock.step >= step:
            step, quiet = clock.step, now - clock.step_moved_at
        payload: dict[str, Any] = {"step": step, "quiet_s": round(max(0.0, quiet), 3), "interval_s": self.interval}
        stack = main_thread_stack() if quiet >= min(self.interval, 2.0) else []
        inside = clock.collective()
        if inside is not None:
            payload["collective"] = {"name": inside[0], "since_s": round(max(0.0, now - inside[1]), 3)}
        elif stack and (name := collective_on(stack)) is not None:
            payload["collective"] = {"name": name, "since_s": round(max(0.0, quiet), 3)}
        if stack:
            payload["stack"] = stack
        window = clock.window()
        if window is not None:
            payload["timing"] = window
        return payload

    def beat(self) -> bool:
        """Send one beat now; False when the service did not take it (it is not retried)."""
        try:
            self._transport.request("POST", self._path, dumps(self.payload()))
        except (TransportError, RejectedError):
            return False
        self.sent += 1
        return True

    def stop(self, timeout: float = 2.0) -> None:
        """Stop beating (a beat under way completes)."""
        self._halt.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)
