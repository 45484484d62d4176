"""CSV (a step column and metric columns) and JSONL (one JSON object of metrics per line), read as
they grow."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from holter_readers.entries import MAX_METRICS, Entry, Reader
from holter_readers.points import STEP_NAMES, FormatError, parse_number, parse_step, parse_wall_time
from holter_readers.tail import MAX_LINE, FileTail

STEP_COLUMNS = STEP_NAMES
# Columns that say when a row was logged (TensorBoard's export: "Wall time"; W&B: "_timestamp").
TIME_COLUMNS = ("wall time", "wall_time", "walltime", "timestamp", "_timestamp", "time")
# Columns that describe the row rather than measure the run.
NON_METRIC_COLUMNS = (*TIME_COLUMNS, "_runtime")
# A column naming each row's metric: the file is in long form (one point per row) when it has a
# `value` column beside it.
LONG_NAME_COLUMNS = ("metric", "tag")
DELIMITERS = ",;\t"

STEP_KEYS = STEP_NAMES
TIME_KEYS = ("wall_time", "_timestamp", "timestamp", "time")
NON_METRIC_KEYS = (*TIME_KEYS, "_runtime")


@dataclass(frozen=True)
class _Columns:
    """How a CSV's rows are read: the delimiter, the step and time columns, and either the
    metric columns (wide: one column per metric) or the columns naming each row's metric and
    holding its value (long: `metric,step,value`, Holter's own export; `run,tag,step,value`)."""

    delimiter: str
    step: int
    time: int | None
    metrics: dict[int, str]
    name: int | None = None
    value: int | None = None
    run: int | None = None


class CsvReader(Reader):
    """A CSV file: the step is `step_column` when given, else the first of `STEP_COLUMNS` the
    header has; every other numeric cell is a point. A file whose only metric column is called
    `value` names its metric after the file (`loss.csv` -> `loss`), which is how TensorBoard and
    W&B export one chart; a file with a `metric` (or `tag`) column beside `value` is in long
    form, one point per row (Holter's own export, `GET /runs/{id}/export`). The delimiter
    (comma, semicolon or tab) is the header's most common."""

    format = "csv"

    def __init__(self, path: Path, *, step_column: str | None = None, strict: bool = True) -> None:
        super().__init__(strict=strict)
        self.path = Path(path)
        self.step_column = step_column
        self.tail = FileTail(self.path, say=self.note)
        self.header: str | None = None
        self.line = 0
        self._plan: _Columns | None = None

    def position(self) -> dict[str, Any]:
        return {**self.tail.position(), "header": self.header, "line": self.line}

    def restore(self, position: dict[str, Any]) -> None:
        self.tail.restore(position)
        self.header = position.get("header")
        self.line = int(position.get("line") or 0)
        self._plan = None

    def progress(self) -> float | None:
        size = self.tail.size()
        return min(1.0, self.tail.offset / size) if size else None

    def written(self) -> object:
        return self.tail.size()

    def read(self, *, final: bool = False) -> Iterator[Entry]:
        where = str(self.path)
        for raw in self.tail.lines(final=final):
            if self.tail.restarted:  # replaced or cut (the tail said so): its header comes again
                self.tail.restarted, self.header, self.line, self._plan = False, None, 0, None
            self.line += 1
            if raw is None:
                self.problem(f"{where}:{self.line}: a line longer than {MAX_LINE >> 20} MiB is not a row of metrics")
                continue
            text = raw.decode("utf-8", "replace").rstrip("\r")
            if self.header is None:
                if text.strip():
                    self.header = text.lstrip("\ufeff")
                    self._plan = self._plan_of(self.header)
                continue
            if self._plan is None:  # going on from a kept position
                self._plan = self._plan_of(self.header)
            if not text.strip():
                continue
            entry = self._row(text, f"{where}:{self.line}")
            if entry is not None:
                yield entry

    def _plan_of(self, header: str) -> _Columns:
        delimiter = max(DELIMITERS, key=header.count) if any(d in header for d in DELIMITERS) else ","
        try:
            names = [h.strip() for h in next(csv.reader([header], delimiter=delimiter))]
        except csv.Error as exc:
            raise FormatError(f"{self.path}:1: not a CSV header ({exc})") from None
        if not names or not any(names):
            raise FormatError(f"{self.path}: empty CSV file")
        lowered = [n.lower() for n in names]
        step_col = self._step_index(names, lowered)
        time_col = next((lowered.index(c) for c in TIME_COLUMNS if c in lowered), None)
        name_col = next((lowered.index(c) for c in LONG_NAME_COLUMNS if c in lowered), None)
        if name_col is not None and "value" in lowered:
            run_col = lowered.index("run") if "run" in lowered else None
            return _Columns(delimiter, step_col, time_col, {}, name=name_col, value=lowered.index("value"), run=run_col)
        metric_cols = [
            i
            for i, n in enumerate(lowered)
            if i != step_col and n not in NON_METRIC_COLUMNS and n and n not in STEP_COLUMNS
        ]
        if not metric_cols:
            raise FormatError(f"{self.path}: no metric column besides the step")
        if len(metric_cols) > MAX_METRICS:
            raise FormatError(
                f"{self.path}: {len(metric_cols):,} metric columns, more than the {MAX_METRICS:,} one run may have"
            )
        metric_names = {i: names[i] for i in metric_cols}
        if len(metric_cols) == 1 and lowered[metric_cols[0]] == "value":
            metric_names[metric_cols[0]] = self.path.stem
        return _Columns(delimiter, step_col, time_col, metric_names)

    def _step_index(self, names: list[str], lowered: list[str]) -> int:
        if self.step_column is not None:
            if self.step_column not in names:
                shown = ", ".join(names[:20]) + (f" and {len(names) - 20:,} more" if len(names) > 20 else "")
                raise FormatError(f"{self.path}: no column {self.step_column!r} for --step-column (columns: {shown})")
            return names.index(self.step_column)
        step_col = next((lowered.index(c) for c in STEP_COLUMNS if c in lowered), None)
        if step_col is None:
            raise FormatError(
                f"{self.path}: no step column (expected one of: {', '.join(STEP_COLUMNS)}; "
                "name another with --step-column)"
            )
        return step_col

    def _row(self, text: str, where: str) -> Entry | None:
        plan = self._plan
        assert plan is not None
        try:
            row = next(csv.reader([text], delimiter=plan.delimiter))
        except csv.Error as exc:
            self.problem(f"{where}: not a CSV row ({exc})")
            return None
        width = len(row)
        if not row or plan.step >= width or not row[plan.step].strip():
            return None
        try:
            step = parse_step(row[plan.step], where)
        except FormatError as exc:
            self.problem(str(exc))
            return None
        wall_time = parse_wall_time(row[plan.time]) if plan.time is not None and plan.time < width else None
        if plan.name is not None:
            return self._long_row(row, plan, step, wall_time, where)
        values = {}
        for i, name in plan.metrics.items():
            if i < width:
                value = parse_number(row[i])
                if value is not None:
                    values[name] = value
        return Entry(step, wall_time, values) if values else None

    def _long_row(self, row: list[str], plan: _Columns, step: int, wall_time: float | None, where: str) -> Entry | None:
        if plan.name >= len(row) or plan.value >= len(row):  # type: ignore[operator]
            return None
        name = row[plan.name].strip()  # type: ignore[index]
        value = parse_number(row[plan.value])  # type: ignore[index]
        if not name or value is None:
            return None
        if plan.run is not None and plan.run < len(row) and row[plan.run].strip() not in ("", "."):
            name = f"{row[plan.run].strip()}/{name}"
        return Entry(step, wall_time, self.admit({name: value}, str(self.path)))


class JsonlReader(Reader):
    """One JSON object of metrics per line: its numbers are the points (nested dicts become
    'a/b'), at its step key (`step_column`, else the first of `STEP_KEYS` it has, else the
    line's index) and wall time."""

    format = "jsonl"

    def __init__(self, path: Path, *, step_column: str | None = None, strict: bool = True) -> None:
        super().__init__(strict=strict)
        self.path = Path(path)
        self.step_column = step_column
        self.tail = FileTail(self.path, say=self.note)
        self.line = 0

    def position(self) -> dict[str, Any]:
        return {**self.tail.position(), "line": self.line}

    def restore(self, position: dict[str, Any]) -> None:
        self.tail.restore(position)
        self.line = int(position.get("line") or 0)

    def progress(self) -> float | None:
        size = self.tail.size()
        return min(1.0, self.tail.offset / size) if size else None

    def written(self) -> object:
        return self.tail.size()

    def read(self, *, final: bool = False) -> Iterator[Entry]:
        for raw in self.tail.lines(final=final):
            if self.tail.restarted:  # replaced or cut (the tail said so)
                self.tail.restarted, self.line = False, 0
            index = self.line
            self.line += 1
            where = f"{self.path}:{self.line}"
            if raw is None:
                self.problem(f"{where}: a line longer than {MAX_LINE >> 20} MiB is not a record of metrics")
                continue
            if not raw.strip():
                continue
            try:
                record = load_json(raw, where)
            except FormatError as exc:
                self.problem(str(exc))
                continue
            if not isinstance(record, dict):
                self.problem(f"{where}: expected a JSON object of metrics")
                continue
            try:
                entry = entry_of_record(record, index, where, step_key=self.step_column)
            except FormatError as exc:
                self.problem(str(exc))
                continue
            if entry is not None:
                yield Entry(entry.step, entry.wall_time, self.admit(entry.values, str(self.path)))


def load_json(raw: bytes | str, where: str) -> Any:
    """The JSON value of `raw`; raises FormatError (never RecursionError) on bad or too deeply
    nested JSON. Python's json accepts NaN and ±Infinity as written by Python's own json."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{where}: not JSON ({exc.msg})") from None
    except RecursionError:
        raise FormatError(f"{where}: JSON nested too deeply") from None
    except UnicodeDecodeError:
        raise FormatError(f"{where}: not UTF-8 text") from None


def entry_of_record(
    record: dict[str, Any], default_step: int, where: str, *, step_key: str | None = None
) -> Entry | None:
    """The numeric metrics of one logged dict, at its step (`step_key`, else the first of
    `STEP_KEYS` it has, else `default_step`) and wall time; None when it holds none (or lacks
    the chosen step: W&B logs eval and train lines apart)."""
    if step_key is not None:
        if step_key not in record:
            return None
        key: str | None = step_key
    else:
        key = next((k for k in STEP_KEYS if k in record), None)
    step = parse_step(record[key], where) if key else default_step
    wall_time = next((parse_wall_time(record[k]) for k in TIME_KEYS if k in record), None)
    values = {
        name: value
        for name, value in flatten(record)
        if name != key and name not in STEP_KEYS and name not in NON_METRIC_KEYS
    }
    return Entry(step, wall_time, values) if values else None


def flatten(record: dict[str, Any], prefix: str = "", depth: int = 0) -> Iterator[tuple[str, float]]:
    """(name, number) of every number in a dict, nested dicts as 'a/b'; booleans are not numbers."""
    if depth > 32:
        return
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            try:
                yield name, float(value)
            except OverflowError:  # an integer too large for a float
                continue
        elif isinstance(value, dict):
            yield from flatten(value, f"{name}/", depth + 1)
