"""`holter.init(..., sync_tensorboard=True)`: the job's own TensorBoard scalars, streamed into the run.

Code that logs through TensorBoard (CleanRL, SB3-style RL, many research repos) keeps doing so;
the run gets every scalar as it is written. The event file writers the job creates after `init`
are noted as they open their files: torch's `SummaryWriter` and TensorBoard's own writer (both
`tensorboard.summary.writer.event_file_writer.EventFileWriter`) and tensorboardX's. A thread
reads those files as they grow with `holter_readers` and logs their scalars at their own steps
and wall times (`Run.log_at`), the same `Follower` that `holter follow` runs. The writers' flush
interval is shortened to `LIVE_FLUSH_S` (torch's default is 120 s) so the run stays live. When
the run finishes, the writers are flushed and their files read to the end first.

Metrics keep their TensorBoard tags (`charts/episodic_return`); a writer opened on a second
logdir names its metrics after that logdir's path from the first one's parent (`eval/loss`).
TF2's `tf.summary.create_file_writer` writes from C++ and is not followed.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
import threading
import weakref
from pathlib import Path
from typing import Any, ClassVar

from holter.follow import Follower

# How often the writers flush to disk while followed, and how often their files are read.
LIVE_FLUSH_S = 2.0
POLL_S = 1.0
# The writer classes noted: (module, class, how to find its event file from the instance).
WRITERS = (
    ("tensorboard.summary.writer.event_file_writer", "EventFileWriter", ("_file_name",)),
    ("tensorboardX.event_file_writer", "EventFileWriter", ("_ev_writer", "_file_name")),
)


class _Hooks:
    """The writer classes patched in this process, and the sync the writers they open go to."""

    active: TensorBoardSync | None = None
    lock = threading.Lock()
    patched: ClassVar[set[str]] = set()


class TensorBoardSync:
    """Follows the event files of the writers a job opens, into `run`, in a thread."""

    def __init__(self, run: Any, *, poll: float = POLL_S) -> None:
        from holter_readers.tensorboard import TensorBoardReader

        self.run = run
        self.poll = poll
        self.reader = TensorBoardReader(Path(os.getcwd()), strict=False, discover=False)
        self.follower = Follower(self.reader, run, speaker="holter (sync_tensorboard)")
        self.first_logdir: Path | None = None
        self._writers: weakref.WeakSet[Any] = weakref.WeakSet()
        self._stopped = threading.Event()
        self._read_lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name=f"holter-tensorboard-{run.id}", daemon=True)
        self._thread.start()

    def add_writer(self, writer: Any, logdir: Any, file_name: str | None) -> None:
        """Follow the event file `writer` just opened in `logdir`."""
        folder = Path(os.fspath(logdir)).resolve()
        if self.first_logdir is None:
            self.first_logdir = folder
        prefix = _prefix(self.first_logdir, folder)
        with self._read_lock:
            for file in [Path(file_name)] if file_name else _own_event_files(folder):
                self.reader.add_file(file, prefix)
        with contextlib.suppress(TypeError):  # a writer class without weak references: not flushed at the end
            self._writers.add(writer)

    def _loop(self) -> None:
        while not self._stopped.wait(self.poll):
            self._read()

    def _read(self, *, final: bool = False) -> None:
        with self._read_lock:
            try:
                self.follower.poll(final=final)
            except Exception as exc:  # noqa: BLE001 - the job must never fail for its monitoring
                print(f"holter: reading the TensorBoard files failed: {exc!r}", file=sys.stderr)

    def stop(self) -> None:
        """Flush the job's writers, read their files to the end, and stop following."""
        self._stopped.set()
        self._thread.join(10.0)
        for writer in list(self._writers):
            with contextlib.suppress(Exception):  # a closed writer has nothing left to flush
                writer.flush()
        self._read(final=True)
        with _Hooks.lock:
            if _Hooks.active is self:
                _Hooks.active = None


def sync_tensorboard(run: Any) -> TensorBoardSync:
    """Follow the TensorBoard writers the job opens from now on into `run` (see the module doc);
    the run stops it when it finishes."""
    sync = TensorBoardSync(run)
    with _Hooks.lock:
        _Hooks.active = sync  # a run started after another one takes the writers over
        for module, name, path in WRITERS:
            _patch(module, name, path)
    run._companions = (*run._companions, sync)
    return sync


def _patch(module_name: str, class_name: str, file_attribute: tuple[str, ...]) -> None:
    """Wrap the writer class's __init__ (once per process) when its package is installed."""
    if module_name in _Hooks.patched:
        return
    try:
        if module_name not in sys.modules and importlib.util.find_spec(module_name.split(".")[0]) is None:
            return
        writer_class = getattr(importlib.import_module(module_name), class_name)
    except Exception:  # noqa: BLE001 - a broken optional package: nothing to follow there
        return
    original = writer_class.__init__
    signature = inspect.signature(original)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            bound = None
        if bound is not None and _Hooks.active is not None:
            bound.apply_defaults()
            flush = bound.arguments.get("flush_secs")
            if isinstance(flush, (int, float)) and flush > LIVE_FLUSH_S:
                bound.arguments["flush_secs"] = LIVE_FLUSH_S
            original(*bound.args, **bound.kwargs)
        else:
            original(self, *args, **kwargs)
        sync = _Hooks.active
        if sync is None:
            return
        logdir = bound.arguments.get("logdir") if bound is not None else (args[0] if args else None)
        if logdir is None:
            return
        target: Any = self
        for attribute in file_attribute:
            target = getattr(target, attribute, None)
        sync.add_writer(self, logdir, target if isinstance(target, str) else None)

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    writer_class.__init__ = __init__
    _Hooks.patched.add(module_name)


def _prefix(first: Path, logdir: Path) -> str:
    """'' for the first logdir; another one's path from the first one's parent, as 'path/'."""
    if logdir == first:
        return ""
    try:
        relative = logdir.relative_to(first)
    except ValueError:
        try:
            relative = logdir.relative_to(first.parent)
        except ValueError:
            relative = Path(logdir.name)
    return f"{relative.as_posix()}/"


def _own_event_files(folder: Path) -> list[Path]:
    """Event files in `folder` written by this process (their names carry its pid)."""
    marker = f".{os.getpid()}."
    return sorted(p for p in folder.glob("*tfevents*") if marker in p.name)
