"""`holter import PATH --project P --name N [--kind NAME=KIND]`: bring a run logged elsewhere
into the service.

Points stream from the file's reader through the real client (`holter.init` + `run.log_at`,
with each point's original step and wall time; the `holter` CLI passes the client in, see
`commands/sending.py`), so a file of any size goes through in bounded
memory. The imported run is analysed by the service like a live one, each metric read as the
kind it is declared (`--kind`, sent with the run) or recognised as, with every other metric of
the run in view (a `loss` beside GRPO's rewards is a policy loss); the findings printed at the
end are the service's reading of the whole run, series by series and read together (train vs
eval loss, a loss stuck at 0 beside its gradient norm), the same as `holter analyze` gives on
the file.

The run is created only once the first point has been read: a file that cannot be read leaves
no run behind (an empty "crashed" run would fire the run-crashed alert). At the end two checks
must pass, else the import exits 4: the client's own account (`finish()`'s `Delivery`: no point
refused by the service, none left in the spool or only in memory), which holds for an import
into an existing run too; and, for a new run, the stored point counts read back against what was
sent, which also catches points the service said it took and does not hold.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from holter_server.commands.analyze import how_understood
from holter_server.commands.kinds import parse_kind_options
from holter_server.commands.sending import Client, Delivery, SentRun
from holter_server.commands.service import auth_headers, service_is_up, service_url
from holter_server.detect import is_alarm
from holter_server.detect.events import format_step
from holter_server.importers import ImportFormatError, Point, Source, open_source
from holter_server.vocabulary.ranks import RANK_PREFIX, rank_of
from holter_server.vocabulary.severities import verdict_of, verdict_rank
from holter_server.vocabulary.statuses import RunStatus

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_NO_SERVICE = 3
EXIT_NOT_STORED = 4
PROGRESS_EVERY_S = 0.2
READ_ERRORS = (ImportFormatError, OSError, UnicodeDecodeError)
PROGRESS_EXTRA_HINT = "pip install 'holter[progress]' for a progress bar"

if TYPE_CHECKING:
    from rich.console import Console


class SentCounts:
    """Points sent per metric, less the repeats of a step the service keeps once; None for a
    metric whose steps went backwards (its repeats cannot be told apart cheaply)."""

    def __init__(self) -> None:
        self.count: dict[str, int | None] = {}
        self._last_step: dict[str, int] = {}

    def add(self, metric: str, step: int) -> None:
        last = self._last_step.get(metric)
        self._last_step[metric] = step if last is None else max(last, step)
        if metric not in self.count:
            self.count[metric] = 1
        elif self.count[metric] is not None and last is not None:
            if step < last:
                self.count[metric] = None
            elif step > last:
                self.count[metric] += 1  # type: ignore[operator]


class ImportProgress:
    """A progress bar on stderr with percentage, points and ETA (on a terminal, with rich: the
    `progress` extra), and one line at the end."""

    def __init__(self, source: Source, console: Console | None = None) -> None:
        self.source = source
        self.started = self.shown = time.monotonic()
        self.bar: Any = None
        self.points = 0
        try:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
        except ImportError:
            self.console: Console | None = None
            if sys.stderr.isatty():
                print(f"importing ({PROGRESS_EXTRA_HINT})", file=sys.stderr, flush=True)
            return
        self.console = console or Console(stderr=True)
        if self.console.is_terminal:
            self.bar = Progress(
                TextColumn("importing"),
                BarColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[points]} points"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self.task = self.bar.add_task("import", total=1.0, points="0")
            self.bar.start()

    def update(self, points: int) -> None:
        now = time.monotonic()
        if self.bar is None or now - self.shown < PROGRESS_EVERY_S:
            return
        self.shown = now
        fraction = self.source.progress()
        self.bar.update(self.task, completed=fraction if fraction is not None else 0.0, points=f"{points:,}")

    def close(self, points: int, metrics: int) -> None:
        if self.bar is not None:
            self.bar.stop()
        elapsed = max(time.monotonic() - self.started, 1e-9)
        line = f"  {points:,} points, {metrics} metrics in {elapsed:.1f} s ({points / elapsed:,.0f} points/s)"
        if self.console is None:
            print(line, file=sys.stderr, flush=True)
        else:
            self.console.print(line, highlight=False)


def stream_points(points: Iterator[Point], run: SentRun, sent: SentCounts, progress: ImportProgress) -> int:
    """Log every point to `run` at its step and wall time, consecutive points of one step together
    (the client keeps one wall time per step, the latest: TensorBoard's scalars of one step,
    written a few microseconds apart, go as one call). A distributed job's log (torchrun's rank
    prefixes) has its ranks join the run, as read from a log (no beats)."""
    pending: dict[str, float] = {}
    pending_step: int | None = None
    pending_time: float | None = None
    count = 0
    joined: set[int] = set()
    try:
        for metric, step, value, wall_time in points:
            owner = rank_of(metric)
            if owner is not None and owner[0] not in joined:
                # a distributed job's log: its ranks join the run as `holter follow` joins them
                joining = sorted({0, owner[0]} - joined)
                joined.update(joining)
                for rank in joining:
                    run.join_rank(rank, max(joined) + 1, launcher="import", job=str(progress.source.path))
            if step != pending_step or metric in pending:
                if pending:
                    run.log_at(pending, step=pending_step, wall_time=pending_time)  # type: ignore[arg-type]
                pending, pending_step = {}, step
            pending[metric] = value
            pending_time = wall_time
            sent.add(metric, step)
            count += 1
            if count % 1024 == 0:
                progress.update(count)
    finally:  # what was read before a bad line is sent too
        if pending:
            run.log_at(pending, step=pending_step, wall_time=pending_time)  # type: ignore[arg-type]
        progress.points = count
    return count


def run(args: argparse.Namespace, *, client: Client) -> int:
    """Import `args.path` as a run of `args.project` named `args.name` through `client` (the
    `holter` package, passed in by its CLI), then print its findings."""
    url = service_url(args.url)
    path = Path(args.path)
    try:
        declarations = parse_kind_options(args.kind)
    except ValueError as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
    try:
        source = open_source(path, step_column=args.step_column, source_run=args.source_run)
        points = iter(source.points)
        first = next(points, None)
    except READ_ERRORS as exc:
        return _fail(_read_error(path, exc), EXIT_BAD_INPUT)
    if first is None:
        return _fail(f"{path}: no numeric metric found; nothing imported", EXIT_BAD_INPUT)
    if not service_is_up(url):
        return _fail(f"no Holter service answers at {url}; start one with `holter serve`", EXIT_NO_SERVICE)
    # the file's name, not its local path: a run's config is shown to everyone who may read it
    config = {"source": "holter import", "file": path.name, "format": source.format, **source.config}
    imported = client.init(
        project=args.project,
        name=args.name or source.name or path.name,
        id=args.run_id,
        url=url,
        tags=["imported"],
        config=config,
        kinds=declarations,
        quiet=True,
        system_vitals=False,
    )
    print(f"importing {path} ({source.format}) into run {imported.id} of project {args.project}", file=sys.stderr)
    progress = ImportProgress(source)
    sent = SentCounts()
    try:
        count = stream_points(_chain(first, points), imported, sent, progress)
    except READ_ERRORS as exc:
        progress.close(progress.points, len(sent.count))
        imported.finish(RunStatus.CRASHED)
        return _fail(f"{_read_error(path, exc)}; the points read before it are in run {imported.id}", EXIT_BAD_INPUT)
    except BaseException:
        imported.finish(RunStatus.CRASHED)
        raise
    progress.close(count, len(sent.count))
    late_config = {k: v for k, v in source.config.items() if config.get(k, object()) != v}
    if late_config:  # hyperparameters found while reading (TensorBoard's add_hparams file)
        imported.update_config(late_config)
    delivery = imported.finish()
    print(f"run {imported.id}: {url}/runs/{imported.id}")
    readable = _may_read(url, imported.id)
    if readable:
        analysis = _service_analysis(url, imported.id)
        if analysis is not None:
            print(findings_report(analysis, sent))
    else:
        print(
            "the key may send runs but not read them (an ingest key): the service's findings are on the run page, "
            "and the import is checked by the service's answers alone",
            file=sys.stderr,
        )
    undelivered = not_delivered(delivery)
    if undelivered:
        return _fail(f"the service did not store every point: {undelivered}", EXIT_NOT_STORED)
    if readable and not imported.resumed:
        missing = _not_stored(url, imported.id, sent)
        if missing:
            return _fail(f"the service did not store every point: {missing}", EXIT_NOT_STORED)
    return EXIT_OK


def _may_read(url: str, run_id: str) -> bool:
    """Whether the key may read the run back (an ingest key may not: 403). Any other failure
    counts as readable, so the read-back that follows reports it."""
    try:
        response = httpx.get(f"{url}/api/v1/runs/{run_id}", headers=auth_headers(), timeout=30)
    except httpx.HTTPError:
        return True
    return response.status_code != 403


def not_delivered(delivery: Delivery) -> str:
    """What the client's account of the import says did not reach the store ('' when nothing)."""
    parts = []
    if delivery.refused:
        parts.append(f"{delivery.refused:,} points refused (the reasons are above)")
    if delivery.spooled:
        parts.append(f"{delivery.spooled:,} requests still in the spool (sent when this run is resumed)")
    if delivery.not_durable:
        parts.append(f"{delivery.not_durable:,} points neither sent nor written to the spool")
    return "; ".join(parts)


def _service_analysis(url: str, run_id: str) -> dict[str, Any] | None:
    """The service's reading of the whole run (POST /runs/{id}/analyze), or None, said on stderr."""
    try:
        response = httpx.post(f"{url}/api/v1/runs/{run_id}/analyze", headers=auth_headers(), timeout=600)
        response.raise_for_status()
        return response.json()
    except (httpx.HTTPError, ValueError) as exc:
        print(
            f"the run is imported, but its analysis could not be read ({exc}); open the run page to see it",
            file=sys.stderr,
        )
        return None


def _chain(first: Point, rest: Iterator[Point]) -> Iterator[Point]:
    yield first
    yield from rest


def _not_stored(url: str, run_id: str, sent: SentCounts) -> str:
    """Which metrics the service holds fewer points of than were sent ('' when none)."""
    try:
        response = httpx.get(f"{url}/api/v1/runs/{run_id}", headers=auth_headers(), timeout=30)
        response.raise_for_status()
        stored = {m["name"]: m["count"] for m in response.json()["metrics"]}
        if any(rank_of(name) for name in sent.count):  # a job's other ranks: left out of the run's own listing
            response = httpx.get(
                f"{url}/api/v1/runs/{run_id}/metrics",
                params={"prefix": RANK_PREFIX},
                headers=auth_headers(),
                timeout=30,
            )
            response.raise_for_status()
            stored.update({m["name"]: m["count"] for m in response.json()["data"]})
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        return f"could not read the run back ({exc})"
    short = [
        f"{name} ({stored.get(name, 0):,} of {expected:,})"
        for name, expected in sent.count.items()
        if expected is not None and stored.get(name, 0) < expected
    ]
    return ", ".join(short[:10]) + (f" and {len(short) - 10} more" if len(short) > 10 else "")


def findings_report(analysis: dict[str, Any], sent: SentCounts) -> str:
    """What the service found on each analysed series (each read as the kind it is declared or
    recognised as), worst verdicts first, then what the run's series say read together (train vs
    eval loss, a loss stuck at 0 beside its gradient norm)."""
    results = sorted(analysis.get("series") or [], key=lambda r: (-verdict_rank(r["verdict"]), r["metric"]))
    if not results:
        return "no series to analyse (only schedules and counters)"
    alarms = sum(is_alarm(r["verdict"]) for r in results)
    lines = [f"{len(results)} series analysed, {alarms} need attention"]
    for result in results:
        points = sent.count.get(result["metric"])
        count = f", {points:,} points" if points is not None else ""
        lines.append(
            f"{result['metric']} ({how_understood(result['kind'], result['understood'])}{count}): {result['verdict']}"
        )
        lines += [_event_line(event) for event in result["events"]]
    findings = analysis.get("findings") or []
    if findings:
        lines.append(f"the run, its series read together: {verdict_of(f['severity'] for f in findings)}")
        lines += [_event_line(event) for event in findings]
    return "\n".join(lines)


def _read_error(path: Path, exc: BaseException) -> str:
    return str(exc) if isinstance(exc, ImportFormatError) else f"{path}: {exc}"


def _event_line(event: dict[str, Any]) -> str:
    span = f"step {format_step(event['start_step'])}"
    if event["end_step"] != event["start_step"]:
        span = f"steps {format_step(event['start_step'])}–{format_step(event['end_step'])}"
    return f"  [{event['severity']}] {event['kind']} at {span}: {event['summary']}"


def _fail(message: str, code: int) -> int:
    print(f"holter import: {message}", file=sys.stderr)
    return code


__all__ = ["findings_report", "not_delivered", "run", "stream_points"]
