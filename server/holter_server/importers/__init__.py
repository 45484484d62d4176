"""Readers for runs logged elsewhere: CSV, JSONL, HF trainer_state.json, TensorBoard, MLflow
stores, W&B offline runs and llm.c's main.log.

`open_source` picks the reader from the path and returns a `Source`: the points (metric, step,
value, wall time) streamed lazily, the run's hyperparameters, and how far the reading has got.
`read_series` gathers the points into one `Series` per metric.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from holter_server.importers.csv_file import iter_csv
from holter_server.importers.hparams_yaml import lightning_hparams
from holter_server.importers.jsonl import iter_jsonl
from holter_server.importers.llmc_log import SUFFIXES as LLMC_SUFFIXES
from holter_server.importers.llmc_log import iter_llmc_log, looks_like_llmc_log
from holter_server.importers.mlflow_store import file_store_root, is_mlflow_sqlite, open_mlflow
from holter_server.importers.series import FileProgress, ImportFormatError, Point, Series, Source, collect
from holter_server.importers.tensorboard_events import EVENT_FILE_MARKER, event_files, iter_tensorboard
from holter_server.importers.trainer_state import iter_trainer_state
from holter_server.importers.wandb_offline import open_wandb, run_log

FORMATS = ("csv", "jsonl", "trainer_state", "tensorboard", "mlflow", "wandb", "llmc_log")
# Formats whose files name their own step column; --step-column chooses another.
STEP_COLUMN_FORMATS = ("csv", "jsonl", "trainer_state", "wandb")


def detect_format(path: Path) -> str:
    """Name the format of `path` from its name and, where that is not enough, its content."""
    if not path.exists():
        raise ImportFormatError(f"{path}: no such file or folder")
    if path.is_dir():
        if file_store_root(path) is not None:
            return "mlflow"
        if run_log(path) is not None:
            return "wandb"
        return "tensorboard"
    if EVENT_FILE_MARKER in path.name:
        return "tensorboard"
    suffix = path.suffix.lower()
    if suffix == ".wandb":
        return "wandb"
    if is_mlflow_sqlite(path):
        return "mlflow"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".json":
        with path.open() as handle:
            head = handle.read(65536)
        return "trainer_state" if '"log_history"' in head or path.name == "trainer_state.json" else "jsonl"
    if suffix in LLMC_SUFFIXES:
        with path.open(errors="replace") as handle:
            if looks_like_llmc_log(handle.read(4096)):
                return "llmc_log"
    raise ImportFormatError(
        f"{path}: unknown format (expected .csv, .jsonl, trainer_state.json, a TensorBoard event file/folder, "
        "an MLflow store, a W&B offline run folder or an llm.c main.log)"
    )


def open_source(path: str | Path, *, step_column: str | None = None, source_run: str | None = None) -> Source:
    """Open any supported file or folder for reading; raises `ImportFormatError`.

    `step_column` names the column (or key) holding the training step, for CSV, JSONL,
    trainer_state.json and W&B; `source_run` picks one run of an MLflow store holding several.
    """
    path = Path(path)
    file_format = detect_format(path)
    if step_column is not None and file_format not in STEP_COLUMN_FORMATS:
        raise ImportFormatError(
            f"--step-column applies to {', '.join(STEP_COLUMN_FORMATS)} files, not to {file_format}"
        )
    if file_format == "mlflow":
        return open_mlflow(path, run_id=source_run)
    if file_format == "wandb":
        return open_wandb(path, step_column=step_column)
    config: dict[str, Any] = lightning_hparams(path)
    if file_format == "tensorboard":
        progress = FileProgress(event_files(path))
        points = iter_tensorboard(path, config=config, progress=progress)
    elif file_format == "llmc_log":
        progress = FileProgress([path])
        points = iter_llmc_log(path, progress=progress)
    else:
        progress = FileProgress([path])
        reader = {"csv": iter_csv, "jsonl": iter_jsonl, "trainer_state": iter_trainer_state}[file_format]
        points = reader(path, step_column=step_column, progress=progress)
    return Source(path=path, format=file_format, points=points, config=config, progress=progress)


def iter_points(path: str | Path, *, step_column: str | None = None) -> Iterator[Point]:
    """Stream the points of any supported file or folder."""
    return open_source(path, step_column=step_column).points


def read_series(path: str | Path, *, step_column: str | None = None) -> dict[str, Series]:
    """Every metric in the file, as `Series` in first-seen order; raises `ImportFormatError`."""
    series = collect(iter_points(path, step_column=step_column))
    if not series:
        raise ImportFormatError(f"{path}: no numeric metric found")
    return series


__all__ = [
    "FORMATS",
    "ImportFormatError",
    "Point",
    "Series",
    "Source",
    "detect_format",
    "iter_points",
    "open_source",
    "read_series",
]
