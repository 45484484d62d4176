"""`holter follow PATH`: watch what a training job writes and stream it into a live run.

The job is not touched: whatever it already writes is read as it grows — a TensorBoard logdir
(new event files and runs as they appear), a `trainer_state.json` (or an output folder of
`checkpoint-N/`s), a CSV or JSONL file, or a text log in one of the formats of
`holter_readers.textlog` (nanoGPT, llm.c, Megatron-LM, NeMo, torchtitan, the HF Trainer's
printed dicts, `step N | name value` lines, or a `--pattern` of one's own). New points go
through the client's own sender (`Run.log_at`, with the spool when the service is away), so the
run gets the same live detection, alerts and dashboard as a run logged by `holter.init`.

Resumable: after every batch of points is sent or spooled, how far each file was read and the
run's id are kept in a small state file; a `holter follow` of the same path after a restart goes
on from there into the same run (a point read twice is stored once). A file cut or replaced
since (a job re-run with `> log`, noticed by its inode, its size and a checksum of the bytes
before the offset) is read again from its start, which stderr says. Only regular files are
opened: a FIFO, a device or a socket given as the path is refused (exit 2), one met while
following is named and passed over, so Ctrl-C always stops the follower (`holter_readers.paths`).

A distributed job's log (torchrun's `--tee`, or its `[rank${rank}]:` line prefix) is one run, as the
job itself would make it: the readers give each line's rank, rank 0's values are the run's curves,
rank r's are kept as `holter/rank/r/<name>` (`holter.job.rank_series`), and each rank seen joins
the run once (as read from its log: it sends no beat, so its silence says nothing), for the
service to read the ranks side by side.

The run is made when the first point is read (a path that never appears leaves no empty run). It
ends when the file goes quiet for `--idle` seconds or the process `--pid` exits (after a last
read), marked crashed when a text log ends in a traceback (a job that dies before its first
metrics line still gets its crashed run, for the alert). Ctrl-C (or SIGTERM) stops following and
leaves the run open, for the next `holter follow` of the path to go on with.

`Follower` is also what `holter.init(sync_tensorboard=True)` runs in a thread inside the job
(holter/tensorboard_sync.py).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from holter.job import rank_series
from holter.spool import default_spool_root

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
# What the ranks of a job read from its log join the run as (`RankJoin.launcher`).
LAUNCHER = "follow"
# How often the state file is brought up to date while points arrive (each time after a flush).
CHECKPOINT_EVERY_S = 2.0
FLUSH_TIMEOUT_S = 60.0


def _readers() -> Any:
    """holter_readers, the readers the client and the service share (installed with the client)."""
    import holter_readers.files

    return holter_readers.files


class Follower:
    """Reads new entries from `reader` and logs them into `run`, one `poll()` at a time.

    `poll()` returns how many entries it logged; the reader's hyperparameters (TensorBoard's
    add_hparams, a model's config.json) go into the run's config as they are found, and what the
    reader had to skip is said once on stderr.

    Entries of a rank other than 0 (a distributed job's log) are logged as that rank's series; the
    first such entry makes the run a job's: rank 0 and that rank join it, and every other rank
    joins when its first entry is read, the world size the largest rank seen so far and one, the
    job `job` (the followed path). `ranks` are those joined (kept across restarts by the caller).
    """

    def __init__(
        self, reader: Any, run: Any, *, quiet: bool = False, speaker: str = "holter follow", job: str = ""
    ) -> None:
        self.reader = reader
        self.run = run
        self.quiet = quiet
        self.speaker = speaker  # who says what the reader skipped, on stderr
        self.job = job
        self.entries = 0
        self.points = 0
        self.ranks: set[int] = set()
        self._config_sent: dict[str, Any] = {}
        self._warned = 0

    def poll(self, *, final: bool = False) -> int:
        """Log what was written since the last poll (`final`: the file is complete)."""
        count = 0
        log_at = self.run.log_at
        for entry in self.reader.read(final=final):
            values, rank = entry.values, entry.rank
            if not values:
                continue
            if rank:
                if rank not in self.ranks:
                    self._join(rank)
                values = {rank_series(name, rank): value for name, value in values.items()}
            log_at(values, step=entry.step, wall_time=entry.wall_time)
            count += 1
            self.points += len(values)
        self.entries += count
        self._send_config()
        self._say_warnings()
        return count

    def _join(self, rank: int) -> None:
        """Rank `rank` (and rank 0, the run's own, with the first other rank) joins the run, queued
        before its first points."""
        joining = sorted({0, rank} - self.ranks)
        self.ranks.update(joining)
        world_size = max(self.ranks) + 1
        for joined in joining:
            self.run.join_rank(joined, world_size, launcher=LAUNCHER, job=self.job)

    def _send_config(self) -> None:
        found = {k: v for k, v in self.reader.config.items() if self._config_sent.get(k, _MISSING) != v}
        if found:
            self._config_sent.update(found)
            self.run.update_config(found)

    def _say_warnings(self) -> None:
        warnings = self.reader.warnings
        if self._warned < len(warnings) and not self.quiet:
            for message in warnings[self._warned :]:
                print(f"{self.speaker}: {message}", file=sys.stderr)
        self._warned = len(warnings)


_MISSING = object()


class FollowState:
    """The state file of one followed path: the run's id, how far each file was read, and
    whether the run was ended. Written atomically (a temporary file, then a rename)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {}
        if path.is_file():
            try:
                loaded = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                print(f"holter follow: state file {path} unreadable ({exc}); starting over", file=sys.stderr)
            else:
                if isinstance(loaded, dict):
                    self.data = loaded

    def save(self, **values: Any) -> None:
        self.data.update(values)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with open(temporary, "w") as handle:
            json.dump(self.data, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)


def default_state_path(path: Path, file_format: str) -> Path:
    """Where the state of following `path` is kept: a file named after the path (resolved) and its
    format, under `<spool root>/../follow/`."""
    key = hashlib.sha256(f"{path.resolve()}\0{file_format}".encode()).hexdigest()[:20]
    return default_spool_root().parent / "follow" / f"{key}.json"


def process_alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie, exited but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def parse_kinds(options: list[str] | None) -> dict[str, str]:
    """`--kind NAME=KIND` (NAME may be a glob) or a bare `KIND` (every metric); the service
    checks the kinds and refuses an unknown one with the list."""
    kinds: dict[str, str] = {}
    for option in options or ():
        name, sep, kind = option.partition("=")
        if not sep:
            name, kind = "*", option
        if not name.strip() or not kind.strip():
            raise ValueError(f"--kind {option!r}: expected NAME=KIND or KIND")
        kinds[name.strip()] = kind.strip()
    return kinds


class _Stop:
    """Set by SIGINT/SIGTERM: the loop ends at its next turn."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal: int | None = None

    def __call__(self, signum: int, frame: Any) -> None:
        self.signal = signum
        self.event.set()


def run_command(args: argparse.Namespace) -> int:
    """`holter follow PATH`: see the module doc."""
    run_module = importlib.import_module("holter.run")  # `holter.run` is the current run, not the module

    files = _readers()
    path = Path(args.path)
    try:
        kinds = parse_kinds(args.kind)
        reader = files.open_reader(
            path,
            file_format=args.format,
            line_format=args.log_format,
            pattern=args.pattern,
            step_column=args.step_column,
            strict=False,
        )
    except ValueError as exc:  # FormatError is a ValueError
        return _fail(str(exc))
    if args.pid is not None and not process_alive(args.pid):
        return _fail(f"--pid {args.pid}: no such process")
    state = FollowState(Path(args.state) if args.state else default_state_path(path, reader.format))
    kept = state.data if state.data.get("path") == str(path.resolve()) and not args.new_run else {}
    if kept.get("position"):
        reader.restore(kept["position"])
    run_id = args.run_id or kept.get("run_id") or uuid.uuid4().hex[:16]
    name = args.name or kept.get("name") or path.name
    url = (args.url or os.environ.get("HOLTER_URL") or run_module.DEFAULT_URL).rstrip("/")
    config = {"source": "holter follow", "file": path.name, "format": reader.format}
    run = RunOnDemand(
        lambda: run_module.init(
            project=args.project,
            name=name,
            config=config,
            id=run_id,
            url=url,
            tags=["followed", *(args.tag or [])],
            kinds=kinds or None,
            quiet=True,
            system_vitals=False,
        )
    )
    state.save(path=str(path.resolve()), run_id=run_id, name=name, finished=False, ranks=kept.get("ranks") or [])
    described = reader.format
    if reader.format == "textlog":
        described = "text log, " + ("--pattern lines" if args.pattern else f"{args.log_format} format")
    resumed = " (going on where it stopped)" if kept.get("position") else ""
    project = args.project or os.environ.get("HOLTER_PROJECT") or "default"
    print(f"holter follow: {path} ({described}) → run {run_id} of project {project}{resumed}", file=sys.stderr)
    print(f"holter follow: {url}/runs/{run_id} (made when the first point is read)", file=sys.stderr)
    follower = Follower(reader, run, job=str(path.resolve()))
    follower.ranks.update(int(rank) for rank in kept.get("ranks") or ())
    stop = _Stop()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        status = _follow(args, reader, follower, state, stop)
    except ValueError as exc:  # unreadable after all (a CSV header without a step), or the service refused the run
        _leave_open(follower, state)
        return _fail(str(exc))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if status is None:
        _leave_open(follower, state)
        print(
            f"holter follow: stopped; {follower.points:,} points sent. The run stays open: `holter follow "
            f"{args.path}` goes on where this stopped",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if run.run is None and status != "crashed":
        state.save(position=reader.position(), finished=True)
        print(f"holter follow: nothing read from {path}; no run was made", file=sys.stderr)
        return EXIT_OK
    delivery = run.get().finish(status)
    _checkpoint(follower, state, finished=True, durable=not delivery.not_durable)
    print(f"holter follow: run {run_id} {status}; {follower.points:,} points sent", file=sys.stderr)
    return EXIT_OK


class RunOnDemand:
    """The followed run, started (`holter.run.init`) when there is first something to put in it:
    a path that never appears, or holds nothing, leaves no empty run behind."""

    def __init__(self, start: Callable[[], Any]) -> None:
        self._start = start
        self.run: Any = None

    def get(self) -> Any:
        if self.run is None:
            self.run = self._start()
        return self.run

    def log_at(self, values: dict[str, float], *, step: int, wall_time: float | None = None) -> None:
        self.get().log_at(values, step=step, wall_time=wall_time)

    def update_config(self, values: dict[str, Any]) -> None:
        self.get().update_config(values)

    def join_rank(self, rank: int, world_size: int, *, launcher: str, job: str) -> None:
        self.get().join_rank(rank, world_size, launcher=launcher, job=job)


def _follow(args: argparse.Namespace, reader: Any, follower: Follower, state: FollowState, stop: _Stop) -> str | None:
    """Follow until the run ends ("finished" or "crashed") or a signal stops it (None)."""
    quiet_since = time.monotonic()
    last_written = reader.written()
    last_checkpoint = 0.0
    announced_format = getattr(reader, "format_name", None)
    while True:
        got = follower.poll()
        now = time.monotonic()
        written = reader.written()
        if got or written != last_written:
            quiet_since, last_written = now, written
        name = getattr(reader, "format_name", None)
        if name and name != announced_format:
            announced_format = name
            print(f"holter follow: reading the log as {name} lines", file=sys.stderr)
        if got and now - last_checkpoint >= CHECKPOINT_EVERY_S:
            _checkpoint(follower, state)
            last_checkpoint = now
        ended = args.pid is not None and not process_alive(args.pid)
        idle = args.idle is not None and now - quiet_since >= args.idle
        if ended or idle:
            follower.poll(final=True)
            if ended:
                print(f"holter follow: process {args.pid} exited", file=sys.stderr)
            else:
                print(f"holter follow: nothing written for {args.idle:g} s", file=sys.stderr)
            return "crashed" if reader.crashed() else "finished"
        if stop.event.wait(args.poll):
            follower.poll()
            return None


def _checkpoint(follower: Follower, state: FollowState, *, finished: bool = False, durable: bool = True) -> None:
    """Keep how far the files were read, once what was read is sent or on disk in the spool."""
    run = follower.run.run
    if not finished and run is not None:
        run.flush(FLUSH_TIMEOUT_S)
        durable = not run._sender.delivery().not_durable
    if durable:
        state.save(position=follower.reader.position(), finished=finished, ranks=sorted(follower.ranks))


def _leave_open(follower: Follower, state: FollowState) -> None:
    """Stop following without ending the run: what was read is delivered (or spooled) and kept
    in the state, and the run is not finished at exit, for the next `holter follow` to go on."""
    _checkpoint(follower, state)
    run = follower.run.run
    if run is not None:
        importlib.import_module("holter.run")._active_runs.discard(run)
        run._sender.stop(FLUSH_TIMEOUT_S)


def _fail(message: str) -> int:
    print(f"holter follow: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT
