"""CSV: a step column and one or more metric columns (or `step,value`, named by the file)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

from holter_server.importers.series import (
    STEP_NAMES,
    FileProgress,
    ImportFormatError,
    Point,
    parse_number,
    parse_step,
    parse_wall_time,
)

STEP_COLUMNS = STEP_NAMES
# Columns that say when a row was logged (TensorBoard's export: "Wall time"; W&B: "_timestamp").
TIME_COLUMNS = ("wall time", "wall_time", "walltime", "timestamp", "_timestamp", "time")
# Columns that describe the row rather than measure the run.
NON_METRIC_COLUMNS = (*TIME_COLUMNS, "_runtime")


def iter_csv(path: Path, *, step_column: str | None = None, progress: FileProgress | None = None) -> Iterator[Point]:
    """Yield a point for every numeric cell, row by row.

    The step is `step_column` when given, else the first of `STEP_COLUMNS` the file has. A file
    whose only metric column is called `value` names its metric after the file (`loss.csv` ->
    `loss`), which is how TensorBoard and W&B export one chart.
    """
    with path.open("rb") as raw:
        if progress is not None:
            progress.current = raw.tell
        handle = io.TextIOWrapper(raw, newline="")
        sample = handle.read(4096)
        handle.seek(0)
        try:
            dialect = csv.Sniffer().sniff(sample, delimiters=",;\t")
        except csv.Error:
            dialect = csv.excel
        reader = csv.reader(handle, dialect)
        header = next(reader, None)
        if not header:
            raise ImportFormatError(f"{path}: empty CSV file")
        names = [h.strip() for h in header]
        lowered = [n.lower() for n in names]
        step_col = _step_column(path, names, lowered, step_column)
        time_col = next((lowered.index(c) for c in TIME_COLUMNS if c in lowered), None)
        metric_cols = [
            i
            for i, n in enumerate(lowered)
            if i != step_col and n not in NON_METRIC_COLUMNS and n and n not in STEP_COLUMNS
        ]
        if not metric_cols:
            raise ImportFormatError(f"{path}: no metric column besides the step")
        metric_names = {i: names[i] for i in metric_cols}
        if len(metric_cols) == 1 and lowered[metric_cols[0]] == "value":
            metric_names[metric_cols[0]] = path.stem
        for line_no, row in enumerate(reader, start=2):
            if not row or step_col >= len(row) or not row[step_col].strip():
                continue
            step = parse_step(row[step_col], f"{path}:{line_no}")
            wall_time = parse_wall_time(row[time_col]) if time_col is not None and time_col < len(row) else None
            for i in metric_cols:
                if i < len(row):
                    value = parse_number(row[i])
                    if value is not None:
                        yield Point(metric_names[i], step, value, wall_time)


def _step_column(path: Path, names: list[str], lowered: list[str], wanted: str | None) -> int:
    if wanted is not None:
        if wanted not in names:
            raise ImportFormatError(f"{path}: no column {wanted!r} for --step-column (columns: {', '.join(names)})")
        return names.index(wanted)
    step_col = next((lowered.index(c) for c in STEP_COLUMNS if c in lowered), None)
    if step_col is None:
        raise ImportFormatError(
            f"{path}: no step column (expected one of: {', '.join(STEP_COLUMNS)}; name another with --step-column)"
        )
    return step_col
