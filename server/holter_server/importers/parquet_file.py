"""Parquet files of metrics, read with pyarrow a batch of rows at a time: in long form (`metric`,
`step`, `value`, `wall_time`: Holter's own export, `GET /runs/{id}/export?format=parquet`) or
wide (a step column and one column per metric, as pandas writes a history)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from holter_readers import STEP_NAMES, Entry, Reader, parse_step, parse_wall_time
from holter_readers.entries import MAX_METRICS
from holter_readers.tabular import LONG_NAME_COLUMNS, NON_METRIC_COLUMNS, TIME_COLUMNS

from holter_server.importers.series import ImportFormatError

PARQUET_MAGIC = b"PAR1"
BATCH_ROWS = 65_536


def is_parquet(path: Path) -> bool:
    """A file that starts with Parquet's magic bytes."""
    if not path.is_file():
        return False
    with path.open("rb") as handle:
        return handle.read(4) == PARQUET_MAGIC


class ParquetReader(Reader):
    """Every numeric cell of a Parquet file of metrics, at its row's step (and wall time)."""

    format = "parquet"

    def __init__(self, path: Path, *, step_column: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.step_column = step_column
        self.rows = 0
        self.total = 0

    def position(self) -> dict[str, Any]:
        return {"rows": self.rows}

    def restore(self, position: dict[str, Any]) -> None:
        self.rows = int(position.get("rows") or 0)

    def progress(self) -> float | None:
        return min(1.0, self.rows / self.total) if self.total else None

    def read(self, *, final: bool = False) -> Iterator[Entry]:
        try:
            import pyarrow.parquet as pq
            from pyarrow import ArrowException
        except ImportError:
            raise ImportFormatError("reading Parquet files needs pyarrow: pip install 'holter[parquet]'") from None
        try:
            parquet = pq.ParquetFile(self.path)
        except (ArrowException, OSError) as exc:
            raise ImportFormatError(f"{self.path}: not a readable Parquet file ({exc})") from None
        names = list(parquet.schema_arrow.names)
        self.total = parquet.metadata.num_rows
        lowered = [n.lower() for n in names]
        step = self._step_column(names, lowered)
        time = next((names[lowered.index(c)] for c in TIME_COLUMNS if c in lowered), None)
        name = next((names[lowered.index(c)] for c in LONG_NAME_COLUMNS if c in lowered), None)
        if name is not None and "value" in lowered:
            columns = [step, name, names[lowered.index("value")], *([time] if time else [])]
            read = self._long
        else:
            metrics = [n for n, low in zip(names, lowered) if n != step and low not in NON_METRIC_COLUMNS]
            metrics = [n for n in metrics if is_number_type(parquet.schema_arrow.field(n).type)]
            if not metrics:
                raise ImportFormatError(f"{self.path}: no numeric metric column besides the step")
            if len(metrics) > MAX_METRICS:
                raise ImportFormatError(
                    f"{self.path}: {len(metrics):,} metric columns, more than the {MAX_METRICS:,} one run may have"
                )
            columns = [step, *metrics, *([time] if time else [])]
            read = self._wide
        try:
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns):
                table = batch.to_pydict()
                yield from read(table, step, time, columns)
                self.rows += batch.num_rows
        except ArrowException as exc:
            raise ImportFormatError(f"{self.path}: not a readable Parquet file ({exc})") from None

    def _step_column(self, names: list[str], lowered: list[str]) -> str:
        if self.step_column is not None:
            if self.step_column not in names:
                raise ImportFormatError(f"{self.path}: no column {self.step_column!r} for --step-column")
            return self.step_column
        found = next((names[lowered.index(c)] for c in STEP_NAMES if c in lowered), None)
        if found is None:
            raise ImportFormatError(f"{self.path}: no step column (expected one of: {', '.join(STEP_NAMES)})")
        return found

    def _long(self, table: dict[str, list[Any]], step: str, time: str | None, columns: list[str]) -> Iterator[Entry]:
        _, name, value = columns[:3]
        times = table[time] if time else None
        where = str(self.path)
        for index, (metric, at, number) in enumerate(zip(table[name], table[step], table[value])):
            if metric is None or at is None or number is None:
                continue
            yield Entry(
                parse_step(at, where),
                parse_wall_time(times[index]) if times else None,
                self.admit({str(metric): float(number)}, where),
            )

    def _wide(self, table: dict[str, list[Any]], step: str, time: str | None, columns: list[str]) -> Iterator[Entry]:
        metrics = [c for c in columns[1:] if c != time]
        times = table[time] if time else None
        where = str(self.path)
        for index, at in enumerate(table[step]):
            if at is None or (isinstance(at, float) and math.isnan(at)):
                continue
            values = {m: float(table[m][index]) for m in metrics if table[m][index] is not None}
            if values:
                yield Entry(parse_step(at, where), parse_wall_time(times[index]) if times else None, values)


def is_number_type(arrow_type: Any) -> bool:
    """Whether a Parquet column holds numbers (integers or floats, booleans not)."""
    import pyarrow.types as types

    return bool(types.is_integer(arrow_type) or types.is_floating(arrow_type))
