"""Which reader a path needs: from its name, and where that is not enough, from what it holds."""

from __future__ import annotations

from pathlib import Path

from holter_readers.entries import Reader
from holter_readers.paths import NOT_REGULAR, is_special, open_regular
from holter_readers.points import FormatError
from holter_readers.tabular import CsvReader, JsonlReader
from holter_readers.tensorboard import TensorBoardReader, event_files, is_event_file
from holter_readers.textlog import AUTO, FORMATS, TextLogReader, sniff_text_log
from holter_readers.trainer_state import STATE_FILE, TrainerStateReader, is_trainer_state_folder

# The formats these readers know; `textlog` takes a line format (textlog.FORMATS) or a pattern.
READER_FORMATS = ("tensorboard", "trainer_state", "csv", "jsonl", "textlog")
TEXT_SUFFIXES = (".log", ".txt", ".out", ".err", ".stdout", ".stderr")
# Formats whose files name their own step column; step_column chooses another.
STEP_COLUMN_FORMATS = ("csv", "jsonl", "trainer_state")


def format_of(path: Path) -> str | None:
    """The reader format of `path` from its name and, where that is not enough, its content;
    None when it is none of them. A path that does not exist yet is judged by its name alone (a
    name without a suffix: a TensorBoard logdir to be)."""
    if path.is_dir():
        if event_files(path):
            return "tensorboard"
        if is_trainer_state_folder(path):
            return "trainer_state"
        return "tensorboard"
    if is_event_file(path):
        return "tensorboard"
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if path.name == STATE_FILE:
        return "trainer_state"
    if suffix == ".json":
        try:
            with open_regular(path) as handle:
                head = handle.read(65536)
        except OSError:  # not there yet, or not a regular file (NotRegularFile)
            return "jsonl"
        return "trainer_state" if b'"log_history"' in head else "jsonl"
    if suffix in TEXT_SUFFIXES:
        return "textlog"
    if not path.exists() and not suffix:
        return "tensorboard"
    return None


def open_reader(
    path: str | Path,
    *,
    file_format: str | None = None,
    line_format: str = AUTO,
    pattern: str | None = None,
    step_column: str | None = None,
    strict: bool = True,
) -> Reader:
    """The reader for `path` (`file_format`: one of READER_FORMATS, default: `format_of`);
    raises FormatError when it cannot be read, or is there but is neither a regular file nor a
    folder (a FIFO is never opened: see `holter_readers.paths`)."""
    path = Path(path)
    if is_special(path):
        raise FormatError(f"{path} {NOT_REGULAR}: only files and folders are read")
    if pattern is not None or line_format != AUTO:
        file_format = file_format or "textlog"
    chosen = file_format or format_of(path)
    if chosen is None:
        raise FormatError(
            f"{path}: unknown format (expected a TensorBoard logdir or event file, trainer_state.json, .csv, .jsonl, "
            f"or a text log: {', '.join(TEXT_SUFFIXES)})"
        )
    if step_column is not None and chosen not in STEP_COLUMN_FORMATS:
        raise FormatError(f"--step-column applies to {', '.join(STEP_COLUMN_FORMATS)} files, not to {chosen}")
    if chosen == "tensorboard":
        return TensorBoardReader(path, strict=strict)
    if chosen == "trainer_state":
        return TrainerStateReader(path, step_column=step_column, strict=strict)
    if chosen == "csv":
        return CsvReader(path, step_column=step_column, strict=strict)
    if chosen == "jsonl":
        return JsonlReader(path, step_column=step_column, strict=strict)
    if chosen == "textlog":
        return TextLogReader(path, line_format=line_format, pattern=pattern, strict=strict)
    raise FormatError(f"unknown format {chosen!r} (known: {', '.join(READER_FORMATS)})")


def is_text_log(path: Path) -> bool:
    """Whether a file's head holds a line of one of the built-in text log formats."""
    return path.is_file() and sniff_text_log(path) is not None


__all__ = [
    "FORMATS",
    "READER_FORMATS",
    "STEP_COLUMN_FORMATS",
    "TEXT_SUFFIXES",
    "format_of",
    "is_text_log",
    "open_reader",
]
