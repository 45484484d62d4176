"""`holter worker`: the background loops (live detection, alert dispatch, stall watch) in a
process of their own. `holter serve` starts one beside the API; more can run anywhere that
reaches the database, since they claim their work through it."""

from __future__ import annotations

import argparse
import os
import signal
import threading

from holter_server.app import background_loops
from holter_server.services.loops import BackgroundWork
from holter_server.settings import Settings
from holter_server.store.database import background_lock_path, make_engine, make_session_factory, upgrade


def _parent_alive(pid: int) -> bool:
    if os.getppid() != pid:  # re-parented: the one that started us is gone
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _die_with_parent() -> None:
    """On Linux, have the kernel send SIGTERM when the parent dies, even by SIGKILL."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # elsewhere the polling below does it, within a second


def run(args: argparse.Namespace) -> int:
    if args.parent_pid is not None:
        _die_with_parent()
        if not _parent_alive(args.parent_pid):
            return 0
    settings = Settings(database_url=args.database_url) if args.database_url else Settings()
    url = settings.resolved_database_url()
    upgrade(url)
    engine = make_engine(url)
    work = BackgroundWork(background_loops(settings, make_session_factory(engine)), background_lock_path(url))
    work.start()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    # A worker started by `holter serve` ends with it, even when the serve process was killed.
    while not stop.wait(1.0):
        if args.parent_pid is not None and not _parent_alive(args.parent_pid):
            break
    work.stop()
    engine.dispose()
    return 0
