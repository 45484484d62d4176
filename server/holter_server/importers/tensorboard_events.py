"""TensorBoard event files (one file, or every event file under a folder): scalar summaries,
their wall times, and the hyperparameters of `add_hparams`.

The `tensorboard` package is imported only when an event file is read, so the rest of Holter
does not depend on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from holter_server.importers.series import FileProgress, ImportFormatError, Point

EVENT_FILE_MARKER = "tfevents"
HPARAMS_PLUGIN = "hparams"


def event_files(path: Path) -> list[Path]:
    """The event files at `path`: itself, or every one below the folder, in name order."""
    if path.is_dir():
        files = sorted(p for p in path.rglob(f"*{EVENT_FILE_MARKER}*") if p.is_file())
        if not files:
            raise ImportFormatError(f"{path}: folder holds no TensorBoard event files")
        return files
    return [path]


def iter_tensorboard(
    path: Path, *, config: dict[str, Any] | None = None, progress: FileProgress | None = None
) -> Iterator[Point]:
    """Yield every scalar, event by event, at its step and wall time (runs in subfolders get
    'run/tag'). Hyperparameters written by `SummaryWriter.add_hparams` go into `config`; the
    scalars beside them in that file are the `metric_dict`'s final values, not curves, and are
    skipped.
    """
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.plugins.hparams import plugin_data_pb2
        from tensorboard.util import tensor_util
    except ImportError:
        raise ImportFormatError(
            "reading TensorBoard files needs the 'tensorboard' package (pip install tensorboard)"
        ) from None
    root = path if path.is_dir() else path.parent
    for file in event_files(path):
        run = file.parent.relative_to(root).as_posix()
        prefix = "" if run == "." else f"{run}/"
        try:
            events: Any = EventFileLoader(str(file)).Load()
            if _may_hold_hparams(file):
                events = list(events)
                hparams = _hparams_of(events, plugin_data_pb2)
                if hparams is not None:
                    if config is not None:
                        config.update(hparams)
                    events = []
            for event in events:
                if not event.HasField("summary"):
                    continue
                for value in event.summary.value:
                    number = _scalar(value, tensor_util)
                    if number is not None:
                        yield Point(f"{prefix}{value.tag}", int(event.step), number, float(event.wall_time) or None)
        except Exception as exc:  # a truncated or foreign file surfaces as a decoding error
            if isinstance(exc, ImportFormatError):
                raise
            raise ImportFormatError(f"{file}: not a readable TensorBoard event file ({exc})") from None
        if progress is not None:
            progress.done += file.stat().st_size


def _may_hold_hparams(file: Path) -> bool:
    """Whether the file may hold an hparams summary: add_hparams writes a small file of its own,
    and the plugin's name is in its bytes (read only for files that small)."""
    return file.stat().st_size < 1 << 20 and b"_hparams_/session_start_info" in file.read_bytes()


def _hparams_of(events: list[Any], plugin_data_pb2: Any) -> dict[str, Any] | None:
    """The hyperparameters of an `add_hparams` session-start summary, or None when there is none."""
    for event in events:
        if not event.HasField("summary"):
            continue
        for value in event.summary.value:
            if value.metadata.plugin_data.plugin_name != HPARAMS_PLUGIN:
                continue
            data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
            if data.WhichOneof("data") == "session_start_info":
                return {name: _proto_value(v) for name, v in data.session_start_info.hparams.items()}
    return None


def _proto_value(value: Any) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        number = value.number_value
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None


def _scalar(value: object, tensor_util: object) -> float | None:
    kind = value.WhichOneof("value")  # type: ignore[attr-defined]
    if kind == "simple_value":
        return float(value.simple_value)  # type: ignore[attr-defined]
    if kind == "tensor":
        if value.metadata.plugin_data.plugin_name == HPARAMS_PLUGIN:  # type: ignore[attr-defined]
            return None
        array = tensor_util.make_ndarray(value.tensor)  # type: ignore[attr-defined]
        if array.ndim == 0 and array.dtype.kind in "fiu":
            return float(array)
    return None
