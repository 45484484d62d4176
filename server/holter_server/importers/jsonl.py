"""JSONL: one JSON object of metrics per line, with a step key or the line number as step."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from holter_server.importers.series import ImportFormatError, Point, parse_step

STEP_KEYS = ("step", "global_step", "_step", "iteration", "iter")
NON_METRIC_KEYS = ("timestamp", "time", "wall_time", "_timestamp", "_runtime")


def iter_jsonl(path: Path) -> Iterator[Point]:
    """Yield (metric, step, value) for every number in every line; nested dicts become 'a/b'."""
    with path.open() as handle:
        for index, line in enumerate(handle):
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ImportFormatError(f"{path}:{index + 1}: not JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise ImportFormatError(f"{path}:{index + 1}: expected a JSON object of metrics")
            yield from points_of_record(record, index, f"{path}:{index + 1}")


def points_of_record(record: dict[str, Any], default_step: int, where: str) -> Iterator[Point]:
    """The numeric metrics of one logged dict, at its step (or `default_step`)."""
    step_key = next((k for k in STEP_KEYS if k in record), None)
    step = parse_step(record[step_key], where) if step_key else default_step
    for name, value in _flatten(record):
        if name in STEP_KEYS or name in NON_METRIC_KEYS:
            continue
        yield name, step, value


def _flatten(record: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            yield name, float(value)
        elif isinstance(value, dict):
            yield from _flatten(value, f"{name}/")
