"""Export a run or some of its series as CSV or Parquet, streamed in constant memory.

Points are read a chunk at a time (each chunk a fresh keyed range read, so no transaction stays
open across a slow download) and written out as they come: CSV row by row, Parquet one row group
per chunk. Small series are read together, as many as their stored counts fit in one chunk (at
most `METRICS_PER_READ`), so a run of 10,000 small series costs a few hundred reads, not 10,000,
and no read sorts more than a chunk whatever the database's statistics say. Columns: metric, step, value, wall_time.
NaN and ±Inf are written as `NaN`, `Infinity`, `-Infinity` in CSV and natively in Parquet.
"""

from __future__ import annotations

import csv
import importlib.util
import io
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager

from sqlalchemy.orm import Session

from holter_server.nonfinite import csv_text
from holter_server.store import points as points_store
from holter_server.store.points import RunPointsSlice

CHUNK_POINTS = 50_000
METRICS_PER_READ = 500  # series read together at most (each is a bound parameter of the read)
CSV_HEADER = ("metric", "step", "value", "wall_time")


def _groups(series: Sequence[tuple[str, int, int]], chunk_points: int) -> Iterator[list[tuple[str, int, int]]]:
    """The series (name, metric id, stored points) in groups whose points fit one chunk, in
    metric id order (a group is read by its ids' range)."""
    group: list[tuple[str, int, int]] = []
    points = 0
    for item in sorted(series, key=lambda item: item[1]):
        if group and (points + item[2] > chunk_points or len(group) == METRICS_PER_READ):
            yield group
            group, points = [], 0
        group.append(item)
        points += item[2]
    if group:
        yield group


def _chunks(
    open_session: Callable[[], AbstractContextManager[Session]],
    run_id: str,
    series: Sequence[tuple[str, int, int]],
    start: int | None,
    end: int | None,
    chunk_points: int,
) -> Iterator[tuple[list[str], RunPointsSlice]]:
    """Each chunk with the name of each of its points' metric."""
    for group in _groups(series, chunk_points):
        names = {metric_id: name for name, metric_id, _count in group}
        after: tuple[int, int] | None = None
        while True:
            with open_session() as session:
                chunk = points_store.read_run_points(
                    session=session,
                    run_id=run_id,
                    metric_ids=sorted(names),
                    after=after,
                    start=start,
                    end=end,
                    limit=chunk_points,
                )
            if chunk.steps:
                yield [names[metric_id] for metric_id in chunk.metric_ids], chunk
            if len(chunk.steps) < chunk_points:
                break
            after = (chunk.metric_ids[-1], chunk.steps[-1])


def csv_stream(
    *,
    open_session: Callable[[], AbstractContextManager[Session]],
    run_id: str,
    series: Sequence[tuple[str, int, int]],
    start: int | None = None,
    end: int | None = None,
    chunk_points: int = CHUNK_POINTS,
) -> Iterator[bytes]:
    """The series (name, metric id, stored points) as CSV, one chunk of bytes per chunk of points."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    yield buffer.getvalue().encode()
    for names, chunk in _chunks(open_session, run_id, series, start, end, chunk_points):
        buffer.seek(0)
        buffer.truncate()
        writer.writerows(
            (name, step, csv_text(value), "" if wall_time is None else repr(wall_time))
            for name, step, value, wall_time in zip(names, chunk.steps, chunk.values, chunk.wall_times)
        )
        yield buffer.getvalue().encode()


class _Drain(io.RawIOBase):
    """A write-only file that hands back what was written since the last `take()`."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out = b"".join(self._parts)
        self._parts.clear()
        return out


PARQUET_EXTRA_HINT = "Parquet needs pyarrow: pip install 'holter[parquet]'"


def parquet_available() -> bool:
    """Whether pyarrow is installed (the `parquet` extra), checked before a Parquet stream starts."""
    return importlib.util.find_spec("pyarrow") is not None


def parquet_stream(
    *,
    open_session: Callable[[], AbstractContextManager[Session]],
    run_id: str,
    series: Sequence[tuple[str, int, int]],
    start: int | None = None,
    end: int | None = None,
    chunk_points: int = CHUNK_POINTS,
) -> Iterator[bytes]:
    """The series (name, metric id, stored points) as one Parquet file, a row group per chunk of points."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [("metric", pa.string()), ("step", pa.int64()), ("value", pa.float64()), ("wall_time", pa.float64())]
    )
    sink = _Drain()
    with pq.ParquetWriter(sink, schema, compression="zstd") as writer:
        for names, chunk in _chunks(open_session, run_id, series, start, end, chunk_points):
            table = pa.table(
                {
                    # dictionary-encoded by the writer: a chunk of a few metrics' points stays small
                    "metric": pa.array(names, pa.string()),
                    "step": pa.array(chunk.steps, pa.int64()),
                    "value": pa.array(chunk.values, pa.float64()),
                    "wall_time": pa.array(chunk.wall_times, pa.float64()),
                },
                schema=schema,
            )
            writer.write_table(table)
            yield sink.take()
    yield sink.take()
