"""What the readers hand over: entries (the values logged together at one step) and the points
they hold, and what every reader can do."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from holter_readers.points import FormatError, Point

# The most metrics one run may have (the service's HOLTER_MAX_METRICS_PER_RUN default): a file
# naming more is refused as it is read, before any of its work is done per metric.
MAX_METRICS = 10_000
# Warnings kept per reader: what was skipped and why, each said once.
_MAX_WARNINGS = 100


class Entry(NamedTuple):
    """Values logged together (one CSV row, one JSONL line, one TensorBoard event, one log line):
    their step, wall time (seconds since the epoch, None when the file does not say) and values,
    and the rank of a distributed job that logged them (a text log's `[rank3]:` line; 0, the
    run's own, for everything else). The readers carry the rank as it is; what a rank's series is
    called is the caller's to say."""

    step: int
    wall_time: float | None
    values: dict[str, float]
    rank: int = 0


def points_of(entries: Iterable[Entry], *, rank_series: Callable[[str, int], str] | None = None) -> Iterator[Point]:
    """The points of each entry, in order. Another rank's values are kept under
    `rank_series(name, rank)`; without it they are passed over, so as never to mix with rank 0's,
    which are the run's."""
    for step, wall_time, values, rank in entries:
        if rank and rank_series is None:
            continue
        for metric, value in values.items():
            yield Point(rank_series(metric, rank) if rank and rank_series else metric, step, value, wall_time)


class Reader:
    """A file (or folder) of training metrics read from where the last read stopped.

    `read()` yields the entries written since the last read, as far as the file is complete
    (`final=True`: the file is complete, so a last line without its newline counts too);
    `position()` is what to keep to go on after a restart, `restore()` goes on from it. `config`
    holds the run's hyperparameters found in the file; `warnings` what was skipped and why.
    """

    format = ""

    def __init__(self, *, strict: bool = True) -> None:
        # strict (importing a finished file): a problem is a FormatError; else (following a live
        # one) it is said once in `warnings` and what it concerns is skipped
        self.strict = strict
        self.config: dict[str, Any] = {}
        self.warnings: list[str] = []
        self.metrics: set[str] = set()

    def problem(self, message: str) -> None:
        """A part of the file that cannot be read: an error when strict, else a warning."""
        if self.strict:
            raise FormatError(message)
        if message not in self.warnings and len(self.warnings) < _MAX_WARNINGS:
            self.warnings.append(message)

    def note(self, message: str) -> None:
        """Something a user should hear that is no error, even when strict: a file read again
        from its start (said each time it happens), a line passed over, a path not read."""
        if len(self.warnings) < _MAX_WARNINGS:
            self.warnings.append(message)

    def admit(self, values: dict[str, float], where: str) -> dict[str, float]:
        """`values` less the metrics beyond `MAX_METRICS` (a problem: see `problem`)."""
        known = self.metrics
        if len(known) + len(values) <= MAX_METRICS or all(name in known for name in values):
            known.update(values)
            return values
        kept = {}
        for name, value in values.items():
            if name not in known and len(known) >= MAX_METRICS:
                self.problem(
                    f"{where}: more than {MAX_METRICS:,} metrics, the most one run may have; the rest are skipped"
                )
                continue
            known.add(name)
            kept[name] = value
        return kept

    def read(self, *, final: bool = False) -> Iterator[Entry]:
        raise NotImplementedError

    def position(self) -> dict[str, Any]:
        raise NotImplementedError

    def restore(self, position: dict[str, Any]) -> None:
        raise NotImplementedError

    def progress(self) -> float | None:
        """The share of the file read so far (0..1), None when it cannot tell."""
        return None

    def written(self) -> object:
        """Something that changes whenever the file is written to (its size, its files' sizes):
        a follower's sign of life from the job, metrics or not."""
        return None

    def crashed(self) -> bool:
        """Whether the file ends the way a crashed job's does (a text log ending in a traceback)."""
        return False
