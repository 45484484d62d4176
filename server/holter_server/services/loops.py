"""Background work as loop services: each has a `run_once()` that tests call directly, and a
thread that calls it every `interval` seconds inside the service process.

Nothing a loop holds must survive a restart: its work is found in the database every time.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import httpx
from sqlalchemy.orm import Session, sessionmaker

from holter_server.services.detection import detect_pending
from holter_server.services.dispatch import dispatch_due
from holter_server.services.lifecycle import mark_stalled
from holter_server.store.database import session_scope

log = logging.getLogger("holter.loops")


class LoopService:
    """Calls `run_once()` every `interval` seconds on a daemon thread until stopped."""

    name = "loop"

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> int:
        """Do one round of work; return how much was done (0 when idle)."""
        raise NotImplementedError

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"holter-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                busy = self.run_once()
            except Exception:  # a failing round is logged and retried, never fatal to the service
                log.exception("%s: round failed", self.name)
                busy = 0
            if not busy:
                self._stop.wait(self.interval)


class DetectionLoop(LoopService):
    """Live detection on newly stored points."""

    name = "detection"

    def __init__(self, session_factory: sessionmaker[Session], interval: float = 0.5) -> None:
        super().__init__(interval)
        self.session_factory = session_factory

    def run_once(self) -> int:
        return detect_pending(session_factory=self.session_factory)


class AlertDispatcher(LoopService):
    """Delivers queued alerts to their channels."""

    name = "alert-dispatch"

    def __init__(self, session_factory: sessionmaker[Session], *, base_url: str, timeout: float, give_up_after: timedelta,
                 allow_private: bool, interval: float = 0.25) -> None:
        super().__init__(interval)
        self.session_factory = session_factory
        self.base_url = base_url
        self.allow_private = allow_private
        self.give_up_after = give_up_after
        self.client = httpx.Client(timeout=timeout, follow_redirects=False)

    def run_once(self) -> int:
        return dispatch_due(session_factory=self.session_factory, client=self.client, base_url=self.base_url,
                            give_up_after=self.give_up_after, allow_private=self.allow_private)


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
