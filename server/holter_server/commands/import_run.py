"""`holter import PATH --project P --name N`: bring a run logged elsewhere into the service.

Points stream from the file's reader through the real client (`holter.init` + `run.log`), so a
file of any size goes through in bounded memory, and the same points feed one incremental
classifier per vital-sign series on the way: the findings printed at the end are the ones
`holter analyze` gives on the file, and the imported run is analysed by the service like a live
one.
"""

from __future__ import annotations

import argparse
import sys
import time
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import numpy as np

import holter
from holter_server.commands.service import service_url
from holter_server.commands.demo import service_is_up
from holter_server.detect import IncrementalDetector, is_alarm, is_vital_sign, verdict
from holter_server.detect.events import Event, format_step
from holter_server.importers import ImportFormatError, Point, detect_format, iter_points

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_NO_SERVICE = 3
# Points per metric handed to its detector at once: large enough to vectorise, small enough to stay light.
DETECT_CHUNK = 4096
PROGRESS_EVERY_S = 0.5


class SeriesDiagnosis:
    """Feeds one metric's points to an incremental classifier in chunks."""

    def __init__(self, metric: str) -> None:
        self.detector = IncrementalDetector(metric)
        self.count = 0
        self._steps, self._values = array("q"), array("d")

    def add(self, step: int, value: float) -> None:
        self._steps.append(step)
        self._values.append(value)
        self.count += 1
        if len(self._steps) >= DETECT_CHUNK:
            self.flush()

    def flush(self) -> None:
        if self._steps:
            self.detector.add(np.array(self._steps, dtype=np.int64), np.array(self._values, dtype=np.float64))
            self._steps, self._values = array("q"), array("d")

    def events(self) -> list[Event]:
        self.flush()
        return self.detector.events


class Progress:
    """One self-rewriting stderr line: points and metrics sent so far, and the rate."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.started = time.monotonic()
        self.shown = self.started
        self.interactive = stream.isatty()

    def update(self, points: int, metrics: int, *, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self.shown < PROGRESS_EVERY_S:
            return
        self.shown = now
        rate = points / max(now - self.started, 1e-9)
        line = f"  {points:,} points, {metrics} metrics, {rate:,.0f} points/s"
        if self.interactive:
            self.stream.write(f"\r{line}" + ("\n" if final else ""))
        elif final:
            self.stream.write(line + "\n")
        self.stream.flush()


def stream_points(points: Iterator[Point], run: holter.Run, diagnoses: dict[str, SeriesDiagnosis], progress: Progress) -> int:
    """Log every point to `run`, grouping consecutive points of one step into one `log` call."""
    pending: dict[str, float] = {}
    pending_step: int | None = None
    count = 0
    for metric, step, value in points:
        if step != pending_step or metric in pending:
            if pending:
                run.log(pending, step=pending_step)
            pending, pending_step = {}, step
        pending[metric] = value
        if metric not in diagnoses and is_vital_sign(metric):
            diagnoses[metric] = SeriesDiagnosis(metric)
        if metric in diagnoses:
            diagnoses[metric].add(step, value)
        count += 1
        if count % 1024 == 0:
            progress.update(count, len(diagnoses))
    if pending:
        run.log(pending, step=pending_step)
    return count


def run(args: argparse.Namespace) -> int:
    """Import `args.path` as a run of `args.project` named `args.name`, then print its findings."""
    url = service_url(args.url)
    path = Path(args.path)
    try:
        file_format = detect_format(path)
    except ImportFormatError as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
    if not service_is_up(url):
        return _fail(f"no Holter service answers at {url}; start one with `holter serve`", EXIT_NO_SERVICE)
    imported = holter.init(project=args.project, name=args.name, id=args.run_id, url=url, tags=["imported"],
                           config={"source": "holter import", "path": str(path.resolve()), "format": file_format})
    print(f"importing {path} ({file_format}) into run {imported.id} of project {args.project}", file=sys.stderr)
    progress = Progress()
    diagnoses: dict[str, SeriesDiagnosis] = {}
    try:
        count = stream_points(iter_points(path), imported, diagnoses, progress)
    except (ImportFormatError, OSError, UnicodeDecodeError) as exc:
        imported.finish("crashed")
        return _fail(str(exc) if isinstance(exc, ImportFormatError) else f"{path}: {exc}", EXIT_BAD_INPUT)
    except BaseException:
        imported.finish("crashed")
        raise
    progress.update(count, len(diagnoses), final=True)
    imported.finish()
    print(f"run {imported.id}: {url}/api/v1/runs/{imported.id}")
    print(findings_report(diagnoses))
    return EXIT_OK


def findings_report(diagnoses: dict[str, SeriesDiagnosis]) -> str:
    """What the classifier found on each vital-sign series, worst verdicts first."""
    results = [(metric, d.count, d.events()) for metric, d in diagnoses.items()]
    if not results:
        return "no vital-sign series to analyse"
    order = {"critical": 0, "warning": 1, "notice": 2, "healthy": 3}
    results.sort(key=lambda r: order[verdict(r[2])])
    alarms = sum(is_alarm(verdict(events)) for _, _, events in results)
    lines = [f"{len(results)} series analysed, {alarms} need attention"]
    for metric, count, events in results:
        lines.append(f"{metric} ({count:,} points): {verdict(events)}")
        for event in events:
            span = f"step {format_step(event.start_step)}"
            if event.end_step != event.start_step:
                span = f"steps {format_step(event.start_step)}–{format_step(event.end_step)}"
            lines.append(f"  [{event.severity}] {event.kind} at {span}: {event.summary}")
    return "\n".join(lines)


def _fail(message: str, code: int) -> int:
    print(f"holter import: {message}", file=sys.stderr)
    return code
