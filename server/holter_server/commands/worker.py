"""`holter worker`: the background loops (live detection, alert dispatch, stall watch) in a
process of their own. `holter serve` starts one beside the API; more can run anywhere that
reaches the database, since they claim their work through it."""

from __future__ import annotations

import argparse
import os
import signal
import threading

from holter_server.app import background_loops
from holter_server.settings import Settings
from holter_server.store.database import make_engine, make_session_factory, upgrade


def run(args: argparse.Namespace) -> int:
    settings = Settings(database_url=args.database_url) if args.database_url else Settings()
    url = settings.resolved_database_url()
    upgrade(url)
    engine = make_engine(url)
    loops = background_loops(settings, make_session_factory(engine))
    for loop in loops:
        loop.start()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    parent = os.getppid()
    # A worker started by `holter serve` ends with it, even when the serve process was killed.
    while not stop.wait(1.0):
        if args.with_parent and os.getppid() != parent:
            break
    for loop in loops:
        loop.stop()
    engine.dispose()
    return 0
