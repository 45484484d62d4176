"""Hugging Face `trainer_state.json`: the `log_history` list of logged dicts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from holter_server.importers.jsonl import points_of_record
from holter_server.importers.series import FileProgress, ImportFormatError, Point


def iter_trainer_state(
    path: Path, *, step_column: str | None = None, progress: FileProgress | None = None
) -> Iterator[Point]:
    """Yield the points of every entry of `log_history` (train and eval alike).

    The Trainer records no wall time per entry, so these points carry none.
    """
    try:
        with path.open() as handle:
            state = json.load(handle)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise ImportFormatError(f"{path}: no 'log_history' list (is this a trainer_state.json?)")
    if progress is not None:
        size = path.stat().st_size
        progress.current = lambda: size  # the whole file is read by now
    for index, entry in enumerate(history):
        if isinstance(entry, dict):
            yield from points_of_record(entry, index, f"{path}: log_history[{index}]", step_key=step_column)
