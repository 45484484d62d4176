"""Hugging Face `trainer_state.json`: the `log_history` list of logged dicts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from holter_server.importers.jsonl import points_of_record
from holter_server.importers.series import ImportFormatError, Point


def iter_trainer_state(path: Path) -> Iterator[Point]:
    """Yield (metric, step, value) from every entry of `log_history` (train and eval alike)."""
    try:
        with path.open() as handle:
            state = json.load(handle)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise ImportFormatError(f"{path}: no 'log_history' list (is this a trainer_state.json?)")
    for index, entry in enumerate(history):
        if isinstance(entry, dict):
            yield from points_of_record(entry, index, f"{path}: log_history[{index}]")
