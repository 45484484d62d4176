"""CSV: a step column and one or more metric columns (or `step,value`, named by the file)."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from holter_server.importers.series import ImportFormatError, Point, parse_number, parse_step

STEP_COLUMNS = ("step", "global_step", "_step", "iteration", "iter", "steps")
# Columns that describe the row rather than measure the run.
NON_METRIC_COLUMNS = ("wall time", "wall_time", "walltime", "timestamp", "time", "_timestamp", "_runtime")


def iter_csv(path: Path) -> Iterator[Point]:
    """Yield (metric, step, value) for every numeric cell, row by row.

    A file whose only metric column is called `value` names its metric after the file
    (`loss.csv` -> `loss`), which is how TensorBoard and W&B export one chart.
    """
    with path.open(newline="") as handle:
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
        step_col = next((lowered.index(c) for c in STEP_COLUMNS if c in lowered), None)
        if step_col is None:
            raise ImportFormatError(f"{path}: no step column (expected one of: {', '.join(STEP_COLUMNS)})")
        metric_cols = [
            i for i, n in enumerate(lowered) if i != step_col and n not in NON_METRIC_COLUMNS and n
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
            for i in metric_cols:
                if i < len(row):
                    value = parse_number(row[i])
                    if value is not None:
                        yield metric_names[i], step, value
