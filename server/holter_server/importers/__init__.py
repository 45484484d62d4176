"""Readers for metric files logged elsewhere: CSV, JSONL, HF trainer_state.json, TensorBoard.

Each format has an `iter_*` reader that streams (metric, step, value) points; `read_series`
picks the reader from the path and gathers the points into one `Series` per metric.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from holter_server.importers.csv_file import iter_csv
from holter_server.importers.jsonl import iter_jsonl
from holter_server.importers.series import ImportFormatError, Point, Series, collect
from holter_server.importers.tensorboard_events import EVENT_FILE_MARKER, iter_tensorboard
from holter_server.importers.trainer_state import iter_trainer_state

FORMATS = ("csv", "jsonl", "trainer_state", "tensorboard")


def detect_format(path: Path) -> str:
    """Name the format of `path` from its name (and, for .json, its first bytes)."""
    if not path.exists():
        raise ImportFormatError(f"{path}: no such file or folder")
    if path.is_dir() or EVENT_FILE_MARKER in path.name:
        return "tensorboard"
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".json":
        with path.open() as handle:
            head = handle.read(65536)
        return "trainer_state" if '"log_history"' in head or path.name == "trainer_state.json" else "jsonl"
    raise ImportFormatError(
        f"{path}: unknown format (expected .csv, .jsonl, trainer_state.json or a TensorBoard event file/folder)"
    )


def iter_points(path: str | Path) -> Iterator[Point]:
    """Stream (metric, step, value) points from any supported file or folder."""
    path = Path(path)
    readers = {"csv": iter_csv, "jsonl": iter_jsonl, "trainer_state": iter_trainer_state, "tensorboard": iter_tensorboard}
    return readers[detect_format(path)](path)


def read_series(path: str | Path) -> dict[str, Series]:
    """Every metric in the file, as `Series` in first-seen order; raises `ImportFormatError`."""
    series = collect(iter_points(path))
    if not series:
        raise ImportFormatError(f"{path}: no numeric metric found")
    return series


__all__ = ["FORMATS", "ImportFormatError", "Point", "Series", "detect_format", "iter_points", "read_series"]
