"""Background work as loop services: each has a `run_once()` that tests call directly, and a
thread that calls it every `interval` seconds inside the service process.

Nothing a loop holds must survive a restart: its work is found in the database every time.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from datetime import timedelta
from pathlib import Path
from typing import IO

import httpx
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from holter_server.alerts.targets import TargetGuard
from holter_server.services.detection import LiveDetectors, detect_pending, detection_limits
from holter_server.services.dispatch import dispatch_due
from holter_server.services.lifecycle import mark_stalled
from holter_server.services.ranks import RankWatchState, watch_ranks
from holter_server.services.reference_drift import record_due_drifts
from holter_server.settings import Settings
from holter_server.store import alerts as alerts_store
from holter_server.store.database import session_scope

try:
    import fcntl
except ImportError:  # not POSIX: no lock, so run one service process per SQLite file there
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("holter.loops")


class LoopService:
    """Calls `run_once()` every `interval` seconds on a daemon thread until stopped."""

    name = "loop"

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._nudged = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> int:
        """Do one round of work; return how much was done (0 when idle)."""
        raise NotImplementedError

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"holter-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._nudged.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def nudge(self) -> None:
        """Cut the current pause short: there is work now (from any thread)."""
        self._nudged.set()

    def pause_after(self, done: int, took: float) -> float:
        """Seconds to wait after a round that did `done` work in `took` seconds: none while
        there is work, `interval` when idle."""
        return 0.0 if done else self.interval

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                busy = self.run_once()
            except Exception:  # a failing round is logged and retried, never fatal to the service
                log.exception("%s: round failed", self.name)
                busy = 0
            pause = self.pause_after(busy, time.monotonic() - started)
            if pause > 0:
                self._nudged.wait(pause)
            self._nudged.clear()


class BackgroundWork:
    """The background loops of one process, started only while it holds the database's
    background lock, if it has one.

    Postgres needs none: each loop claims its rows with SKIP LOCKED, so any number of processes
    share the work. SQLite has no row locks: two processes on one file (two `holter serve`, or a
    `holter worker` beside one) would both detect the same points and send the same alert. There
    the loops run in the one process holding an exclusive lock on a file beside the database; the
    others wait, and the first of them to get the lock takes over when that process ends.
    """

    def __init__(self, loops: list[LoopService], lock_path: Path | None, poll: float = 1.0) -> None:
        self.loops = loops
        self.lock_path = lock_path
        self.poll = poll
        self._lock_file: IO[bytes] | None = None
        self._stop = threading.Event()
        self._waiter: threading.Thread | None = None
        self.running = threading.Event()

    def start(self) -> None:
        # a process with no loops (an API process beside a worker) must not take the lock from it
        if not self.loops or self.lock_path is None or fcntl is None:
            self._start_loops()
            return
        self._waiter = threading.Thread(target=self._wait_for_lock, name="holter-background-lock", daemon=True)
        self._waiter.start()

    def stop(self) -> None:
        self._stop.set()
        if self._waiter is not None:
            self._waiter.join(timeout=30)
        if self.running.is_set():
            for loop in self.loops:
                loop.stop()
        if self._lock_file is not None:
            self._lock_file.close()  # releases the lock: a waiting process takes over
            self._lock_file = None

    def _start_loops(self) -> None:
        for loop in self.loops:
            loop.start()
        self.running.set()

    def _wait_for_lock(self) -> None:
        assert self.lock_path is not None and fcntl is not None
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.lock_path, "ab")  # noqa: SIM115 — held (and locked) for the process's life
        said = False
        while not self._stop.is_set():
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not said:
                    log.info("another process runs the background work on this SQLite database; waiting to take over")
                    said = True
                self._stop.wait(self.poll)
                continue
            self._lock_file = handle
            self._start_loops()
            return
        handle.close()


class DetectionLoop(LoopService):
    """Live detection on newly stored points, using at most `cpu_share` of a core on average."""

    name = "detection"

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        interval: float = 0.5,
        period: float = 1.0,
        cpu_share: float = 0.25,
    ) -> None:
        super().__init__(interval)
        self.session_factory = session_factory
        self.period = period
        self.cpu_share = cpu_share
        self.limit = detection_limits(session_factory)[0]
        self.last_cpu = 0.0  # CPU-seconds this thread spent in the last pass
        self.live = LiveDetectors()  # the detectors kept between passes

    def run_once(self) -> int:
        started = time.thread_time()
        try:
            return detect_pending(session_factory=self.session_factory, live=self.live, limit=self.limit)
        finally:
            self.last_cpu = time.thread_time() - started

    def pause_after(self, done: int, took: float) -> float:
        # Points arrive all the time under load; a pass that caught up waits out the rest of
        # `period`, so each metric is read once a second with a second's points, not a step at
        # a time. A detector's cost is mostly per call (it works over its tail whatever the
        # number of new points), so when a lab's worth of metrics makes the passes long, they
        # are spaced to keep detection within `cpu_share` of a core: each metric is then read
        # every few seconds with a few seconds' points, at about the cost of one second's, and
        # ingest keeps the rest of the machine. A full pass (a backlog) waits only for that.
        if not done:
            return self.interval
        budget = self.last_cpu / self.cpu_share - took if self.cpu_share > 0 else 0.0
        if done >= self.limit:
            return max(0.0, budget)
        return max(0.0, self.period - took, budget)


_DISPATCHERS: weakref.WeakSet[AlertDispatcher] = weakref.WeakSet()


@event.listens_for(Session, "after_commit")
def _wake_dispatchers(session: Session) -> None:
    # A transaction that queued a delivery wakes this process's dispatchers as it commits, so an
    # alert leaves at once however long they had been sleeping.
    if session.info.pop(alerts_store.QUEUED, False):
        for dispatcher in list(_DISPATCHERS):
            dispatcher.nudge()


@event.listens_for(Session, "after_rollback")
def _forget_queued(session: Session) -> None:
    session.info.pop(alerts_store.QUEUED, None)


class AlertDispatcher(LoopService):
    """Delivers queued alerts to their channels.

    With nothing to send it polls less and less often, from `interval` up to `idle_interval`
    (each empty round is two transactions: with no channel configured, polling four times a
    second took a quarter of the worker's CPU under load). A delivery queued in this process
    wakes it at once; one queued by another process (an API process's tripwire, another worker)
    waits at most `idle_interval`.
    """

    name = "alert-dispatch"

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        *,
        base_url: str,
        timeout: float,
        give_up_after: timedelta,
        allow_private: bool,
        image_ttl: float = 7 * 86_400.0,
        interval: float = 0.25,
        idle_interval: float = 2.0,
    ) -> None:
        super().__init__(interval)
        self.idle_interval = idle_interval
        self._pause = interval
        self.session_factory = session_factory
        self.base_url = base_url
        self.guard = TargetGuard(allow_private=allow_private)
        self.image_ttl = image_ttl
        self.give_up_after = give_up_after
        self.client = httpx.Client(timeout=timeout, follow_redirects=False)

    def run_once(self) -> int:
        return dispatch_due(
            session_factory=self.session_factory,
            client=self.client,
            base_url=self.base_url,
            give_up_after=self.give_up_after,
            guard=self.guard,
            image_ttl=self.image_ttl,
        )

    def start(self) -> None:
        _DISPATCHERS.add(self)
        super().start()

    def stop(self) -> None:
        _DISPATCHERS.discard(self)
        super().stop()

    def pause_after(self, done: int, took: float) -> float:
        if done:
            self._pause = self.interval
            return 0.0
        pause = self._pause
        self._pause = min(self._pause * 2, self.idle_interval)
        return pause


class StallWatch(LoopService):
    """Marks runs stalled when neither points nor heartbeats arrive for `stall_after`."""

    name = "stall-watch"

    def __init__(self, session_factory: sessionmaker[Session], stall_after: timedelta, interval: float = 5.0) -> None:
        super().__init__(interval)
        self.session_factory = session_factory
        self.stall_after = stall_after

    def run_once(self) -> int:
        with session_scope(self.session_factory) as session:
            stalled = mark_stalled(session=session, stall_after=self.stall_after)
        return 0 if not stalled else len(stalled)


class RankWatch(LoopService):
    """Reads the ranks of every active distributed job side by side: the straggler, the hung job,
    the lost rank, the rank out of its peers' band (services/ranks.py)."""

    name = "ranks watch"

    def __init__(self, session_factory: sessionmaker[Session], interval: float = 2.0) -> None:
        super().__init__(interval)
        self.session_factory = session_factory
        self.state = RankWatchState()

    def run_once(self) -> int:
        return watch_ranks(session_factory=self.session_factory, state=self.state)

    def pause_after(self, done: int, took: float) -> float:
        return self.interval  # every pass reads every job: no backlog to catch up on


class ReferenceDriftLoop(LoopService):
    """The comparison of each finished run's losses with its reference run, once it finished."""

    name = "reference drift"

    def __init__(self, session_factory: sessionmaker[Session], interval: float = 1.0) -> None:
        super().__init__(interval)
        self.session_factory = session_factory

    def run_once(self) -> int:
        return record_due_drifts(session_factory=self.session_factory)

    def pause_after(self, done: int, took: float) -> float:
        return self.interval if not done else 0.0  # runs still due: go on


def background_loops(settings: Settings, session_factory: sessionmaker[Session]) -> list[LoopService]:
    """The loops this process runs: the stall watch, the ranks watch, the alert dispatcher,
    reference drift on finished runs, and live detection (unless disabled)."""
    loops: list[LoopService] = [
        StallWatch(session_factory, timedelta(seconds=settings.stall_after), settings.stall_check_interval),
        RankWatch(session_factory, settings.rank_watch_interval),
        AlertDispatcher(
            session_factory,
            base_url=settings.base_url(),
            timeout=settings.alert_timeout,
            give_up_after=timedelta(seconds=settings.alert_give_up_after),
            allow_private=settings.allow_private_webhooks,
            image_ttl=settings.image_link_ttl,
        ),
        ReferenceDriftLoop(session_factory),
    ]
    if settings.detection_enabled:
        loops.append(
            DetectionLoop(session_factory, settings.detection_interval, cpu_share=settings.detection_cpu_share)
        )
    return loops
