"""`holter worker`: the background loops (live detection, alert dispatch, stall watch) in a
process of their own. `holter serve` starts one beside the API; more can run anywhere that
reaches the database, since they claim their work through it."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import signal
import time
from pathlib import Path

from holter_server.services.loops import BackgroundWork, background_loops
from holter_server.settings import Settings
from holter_server.store.database import background_lock_path, make_engine, make_session_factory, upgrade


def parent_alive(pid: int) -> bool:
    if os.getppid() != pid:  # re-parented: the one that started us is gone
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def die_with_parent() -> None:
    """On Linux, have the kernel send SIGTERM when the parent dies, even by SIGKILL."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # elsewhere the polling below does it, within a second


class StopSignals:
    """SIGTERM and SIGINT, noted for a main loop to see.

    The handler only records the signal. A handler runs in the main thread between two
    bytecodes, so one that called `threading.Event.set` while the main thread was inside that
    event's `wait` or `set` (holding its lock) blocked on the lock for good: a burst of SIGTERMs,
    as when the parent dies (PR_SET_PDEATHSIG) and a supervisor terminates the group, left the
    process alive and deaf.
    """

    def __init__(self) -> None:
        self.received: list[int] = []
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda signum, _frame: self.received.append(signum))

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, less once a signal came; whether one has."""
        deadline = time.monotonic() + seconds
        while not self.received and time.monotonic() < deadline:
            time.sleep(min(0.1, max(deadline - time.monotonic(), 0.0)))
        return bool(self.received)


def yield_cpu(niceness: int) -> None:
    """Run this process `niceness` steps below its parent, so background work yields the CPU to
    the API's requests. Linux keeps a nice value per thread: the threads already running (the
    numerical libraries' pools) are lowered one by one, and those started later inherit it."""
    if not hasattr(os, "setpriority"):
        return  # not POSIX
    target = min(os.getpriority(os.PRIO_PROCESS, 0) + niceness, 19)
    tasks = Path("/proc/self/task")
    threads = [int(tid.name) for tid in tasks.iterdir()] if tasks.is_dir() else [0]
    for tid in threads:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.setpriority(os.PRIO_PROCESS, tid, target)


# The collector's thresholds in the worker (Python's default: 700, 10, 10). The loops allocate
# tens of thousands of short-lived objects a pass (rows, point lists, detector arrays' wrappers):
# at 700 the youngest generation was collected hundreds of times a minute, and every tenth of
# those swept the middle one, each visiting what survived the last; a tenth of live detection's
# CPU under a lab's load. Collected 15 times less often, a cycle of garbage waits a little longer.
COLLECT_EVERY = (10_000, 10, 10)


def quiet_collector() -> None:
    """Put everything made so far out of the cyclic collector's sight and collect less often.

    What the worker builds before its loops start (modules, the ORM's mappings, the numerical
    libraries: some 200,000 objects) lives as long as the process, yet every full collection
    walked all of it again, 0.1-0.2 s of CPU each, several a minute under load. Frozen
    (`gc.freeze`), a full collection walks only what the loops made since.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*COLLECT_EVERY)


def run(args: argparse.Namespace) -> int:
    if args.parent_pid is not None:
        die_with_parent()
        if not parent_alive(args.parent_pid):
            return 0
    settings = Settings(database_url=args.database_url) if args.database_url else Settings()
    yield_cpu(settings.worker_nice)
    url = settings.resolved_database_url()
    upgrade(url, partition_points=settings.partition_points)
    engine = make_engine(url, pool_size=settings.db_pool_size)
    work = BackgroundWork(background_loops(settings, make_session_factory(engine)), background_lock_path(url))
    quiet_collector()
    work.start()
    stop = StopSignals()
    # A worker started by `holter serve` ends with it, even when the serve process was killed.
    while not stop.wait(1.0):
        if args.parent_pid is not None and not parent_alive(args.parent_pid):
            break
    work.stop()
    engine.dispose()
    return 0
