"""Readers for runs logged elsewhere: CSV, JSONL, HF trainer_state.json, TensorBoard, text logs
(llm.c, nanoGPT, Megatron-LM, NeMo, torchtitan, the HF Trainer's printed dicts), Parquet (Holter's
own export among them), MLflow stores and W&B offline runs.

The file formats a running job writes are read by `holter_readers`, the standard-library
readers the client's `holter follow` uses too; this package adds the formats that need the
service's dependencies (Parquet, MLflow, W&B, Lightning's hparams.yaml). `open_source` picks the
reader from the path and returns a `Source`: the points (metric, step, value, wall time)
streamed lazily, the run's hyperparameters, and how far the reading has got. `read_series`
gathers the points into one `Series` per metric.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from holter_readers import points_of
from holter_readers.files import STEP_COLUMN_FORMATS as READER_STEP_COLUMN_FORMATS
from holter_readers.files import format_of, is_text_log, open_reader
from holter_readers.paths import is_special

from holter_server.importers.hparams_yaml import lightning_hparams
from holter_server.importers.llmc_log import SUFFIXES as LLMC_SUFFIXES
from holter_server.importers.llmc_log import LlmcLogReader, looks_like_llmc_log
from holter_server.importers.mlflow_store import file_store_root, is_mlflow_sqlite, open_mlflow
from holter_server.importers.parquet_file import ParquetReader, is_parquet
from holter_server.importers.series import ImportFormatError, Point, Series, Source, collect
from holter_server.importers.wandb_offline import open_wandb, run_log
from holter_server.vocabulary.ranks import rank_series

FORMATS = ("csv", "jsonl", "trainer_state", "tensorboard", "textlog", "parquet", "mlflow", "wandb", "llmc_log")
# Formats whose files name their own step column; --step-column chooses another.
STEP_COLUMN_FORMATS = (*READER_STEP_COLUMN_FORMATS, "parquet", "wandb")


def detect_format(path: Path) -> str:
    """Name the format of `path` from its name and, where that is not enough, its content."""
    if not path.exists():
        raise ImportFormatError(f"{path}: no such file or folder")
    if is_special(path):  # before anything opens it: opening a FIFO blocks for good
        raise ImportFormatError(f"{path}: not a regular file (a FIFO, a device or a socket)")
    if path.is_dir():
        if file_store_root(path) is not None:
            return "mlflow"
        if run_log(path) is not None:
            return "wandb"
        return format_of(path) or "tensorboard"
    suffix = path.suffix.lower()
    if suffix == ".wandb":
        return "wandb"
    if is_mlflow_sqlite(path):
        return "mlflow"
    if is_parquet(path) or suffix == ".parquet":
        return "parquet"
    if suffix in LLMC_SUFFIXES:
        with path.open(errors="replace") as handle:
            if looks_like_llmc_log(handle.read(4096)):
                return "llmc_log"
    found = format_of(path)
    if found == "textlog" and not is_text_log(path):
        found = None
    if found is None:
        raise ImportFormatError(
            f"{path}: unknown format (expected .csv, .jsonl, .parquet, trainer_state.json, a TensorBoard event "
            "file/folder, an MLflow store, a W&B offline run folder, or a text log of llm.c, nanoGPT, Megatron-LM, "
            "NeMo, torchtitan or the HF Trainer)"
        )
    return found


def open_source(path: str | Path, *, step_column: str | None = None, source_run: str | None = None) -> Source:
    """Open any supported file or folder for reading; raises `ImportFormatError`.

    `step_column` names the column (or key) holding the training step, for CSV, JSONL,
    trainer_state.json, Parquet and W&B; `source_run` picks one run of an MLflow store holding
    several.
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
    if file_format == "llmc_log":
        reader: Any = LlmcLogReader(path)
    elif file_format == "parquet":
        reader = ParquetReader(path, step_column=step_column)
    else:
        reader = open_reader(path, file_format=file_format, step_column=step_column)
    config: dict[str, Any] = lightning_hparams(path)
    source = Source(path=path, format=file_format, points=iter(()), config=config, progress=reader.progress)
    source.points = _points(reader, source)
    return source


def _points(reader: Any, source: Source) -> Iterator[Point]:
    """The reader's points (a distributed job's log: rank r's as `holter/rank/r/...`, rank 0's as
    the run's); the hyperparameters it finds while reading go into the source's config."""
    for point in points_of(reader.read(final=True), rank_series=rank_series):
        if reader.config:
            source.config.update(reader.config)
            reader.config.clear()
        yield point
    source.config.update(reader.config)


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
