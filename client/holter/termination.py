"""A rank told to stop says so before it goes.

When one rank of a job dies, its launcher stops the others with SIGTERM (torchrun tears the
whole worker group down; SLURM's `scancel` and preemption send it too). By default a SIGTERM ends
a Python process on the spot, without `atexit`: each rank stopped so would go as silent as the
one that died, and the service could not tell the rank that died from those stopped after it.

So a process that is a rank of a distributed job, and left SIGTERM to its default, gets a handler
that ends its runs as crashed ("terminated by SIGTERM") within a couple of seconds and then lets
the signal do what it would have done. A Python handler runs only when the main thread is back
in the interpreter, and a rank's main thread is often blocked inside a collective: the signal
also wakes a thread of ours (`signal.set_wakeup_fd`), which does the same at once. Nothing is
installed where the program has a SIGTERM handler or a wakeup descriptor of its own (an asyncio
loop), nor outside the main thread. Standard library only.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable

GRACE_S = 3.0  # what a terminated rank spends telling the service, at most
_lock = threading.Lock()
_handled = False
_installed = False


def install(end_runs: Callable[[str, float], None]) -> bool:
    """Have SIGTERM end this process's runs with `end_runs(reason, timeout)` before it takes the
    process (see the module doc); True when installed (once per process)."""
    global _installed  # noqa: PLW0603 — one handler per process
    if _installed:
        return True
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "set_wakeup_fd"):
        return False
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    reader, writer = os.pipe()
    os.set_blocking(writer, False)
    try:
        previous = signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
    except (ValueError, OSError):
        os.close(reader)
        os.close(writer)
        return False
    if previous != -1:  # the program's own (asyncio's): leave it as it was
        signal.set_wakeup_fd(previous)
        os.close(reader)
        os.close(writer)
        return False

    def on_signal(signum: int, frame: object) -> None:
        _terminate(signum, end_runs)

    signal.signal(signal.SIGTERM, on_signal)
    threading.Thread(target=_wake_on, args=(reader, end_runs), name="holter-termination", daemon=True).start()
    _installed = True
    return True


def _wake_on(reader: int, end_runs: Callable[[str, float], None]) -> None:
    while True:
        try:
            received = os.read(reader, 64)
        except OSError:
            return
        if not received:
            return
        if signal.SIGTERM in received:
            _report(signal.SIGTERM, end_runs)
            # the main thread may be blocked in a collective for good: end the process from here,
            # with the status a shell gives a process a SIGTERM ended (only the main thread may
            # give the signal back its default action)
            os._exit(128 + signal.SIGTERM)


def _terminate(signum: int, end_runs: Callable[[str, float], None]) -> None:
    """The main thread's handler: report, then die of the signal as the default would have."""
    _report(signum, end_runs)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _report(signum: int, end_runs: Callable[[str, float], None]) -> None:
    """End the runs, once (whichever of the handler and the thread comes first; the other waits)."""
    global _handled  # noqa: PLW0603 — one report per process
    with _lock:
        if _handled:
            return
        _handled = True
        try:
            end_runs(f"terminated by {signal.Signals(signum).name}", GRACE_S)
        except Exception as exc:  # noqa: BLE001 — dying is what matters now
            print(f"holter: could not report the termination: {exc!r}", file=sys.stderr)
