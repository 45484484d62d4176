"""JSONL: one JSON object of metrics per line, with a step key or the line number as step."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from holter_server.importers.series import (
    STEP_NAMES,
    FileProgress,
    ImportFormatError,
    Point,
    parse_step,
    parse_wall_time,
)

STEP_KEYS = STEP_NAMES
TIME_KEYS = ("wall_time", "_timestamp", "timestamp", "time")
NON_METRIC_KEYS = (*TIME_KEYS, "_runtime")


def iter_jsonl(path: Path, *, step_column: str | None = None, progress: FileProgress | None = None) -> Iterator[Point]:
    """Yield a point for every number in every line; nested dicts become 'a/b'."""
    with path.open("rb") as raw:
        if progress is not None:
            progress.current = raw.tell
        for index, line in enumerate(io.TextIOWrapper(raw, encoding="utf-8")):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ImportFormatError(f"{path}:{index + 1}: not JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise ImportFormatError(f"{path}:{index + 1}: expected a JSON object of metrics")
            yield from points_of_record(record, index, f"{path}:{index + 1}", step_key=step_column)


def points_of_record(
    record: dict[str, Any], default_step: int, where: str, *, step_key: str | None = None
) -> Iterator[Point]:
    """The numeric metrics of one logged dict, at its step (`step_key`, else the first of
    `STEP_KEYS` it has, else `default_step`) and wall time."""
    if step_key is not None:
        if step_key not in record:
            return  # a line without the chosen step (W&B logs eval and train lines apart): not at a step
        key: str | None = step_key
    else:
        key = next((k for k in STEP_KEYS if k in record), None)
    step = parse_step(record[key], where) if key else default_step
    wall_time = next((parse_wall_time(record[k]) for k in TIME_KEYS if k in record), None)
    for name, value in _flatten(record):
        if name == key or name in STEP_KEYS or name in NON_METRIC_KEYS:
            continue
        yield Point(name, step, value, wall_time)


def _flatten(record: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            yield name, float(value)
        elif isinstance(value, dict):
            yield from _flatten(value, f"{name}/")
