"""TensorBoard event files (one file, or every event file under a folder): scalar summaries.

The `tensorboard` package is imported only when an event file is read, so the rest of Holter
does not depend on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from holter_server.importers.series import ImportFormatError, Point

EVENT_FILE_MARKER = "tfevents"


def event_files(path: Path) -> list[Path]:
    """The event files at `path`: itself, or every one below the folder, in name order."""
    if path.is_dir():
        files = sorted(p for p in path.rglob(f"*{EVENT_FILE_MARKER}*") if p.is_file())
        if not files:
            raise ImportFormatError(f"{path}: folder holds no TensorBoard event files")
        return files
    return [path]


def iter_tensorboard(path: Path) -> Iterator[Point]:
    """Yield (tag, step, value) for every scalar, event by event (runs in subfolders get 'run/tag')."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.util import tensor_util
    except ImportError:
        raise ImportFormatError("reading TensorBoard files needs the 'tensorboard' package (pip install tensorboard)") from None
    root = path if path.is_dir() else path.parent
    for file in event_files(path):
        run = file.parent.relative_to(root).as_posix()
        prefix = "" if run == "." else f"{run}/"
        try:
            for event in EventFileLoader(str(file)).Load():
                if not event.HasField("summary"):
                    continue
                for value in event.summary.value:
                    number = _scalar(value, tensor_util)
                    if number is not None:
                        yield f"{prefix}{value.tag}", int(event.step), number
        except Exception as exc:  # a truncated or foreign file surfaces as a decoding error
            if isinstance(exc, ImportFormatError):
                raise
            raise ImportFormatError(f"{file}: not a readable TensorBoard event file ({exc})") from None


def _scalar(value: object, tensor_util: object) -> float | None:
    kind = value.WhichOneof("value")  # type: ignore[attr-defined]
    if kind == "simple_value":
        return float(value.simple_value)  # type: ignore[attr-defined]
    if kind == "tensor":
        array = tensor_util.make_ndarray(value.tensor)  # type: ignore[attr-defined]
        if array.ndim == 0 and array.dtype.kind in "fiu":
            return float(array)
    return None
