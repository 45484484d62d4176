"""W&B offline run folders (`wandb/offline-run-*`): the run's `.wandb` log, read record by record
with the `wandb` package's protobuf definitions (`pip install 'holter[wandb]'`).

The `.wandb` file is a LevelDB-style log (github.com/google/leveldb doc/log_format.md) after a
7-byte W&B header: 32 KiB blocks of records, each with a CRC-32 of its type and data, a length and
a type (whole, first, middle or last piece of one protobuf `Record`).

W&B's `_step` counts `wandb.log` calls, not training steps: the training step is
`train/global_step` (transformers' WandbCallback) or `trainer/global_step` (Lightning's
WandbLogger) when the run logs one, else `--step-column`, else `_step`. A log call without the
step key happened at the last step seen.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from holter_server.importers.series import ImportFormatError, Point, Source, parse_wall_time
from holter_server.nonfinite import from_name

HEADER = b":W&B"
HEADER_LEN = 7
BLOCK_LEN = 32768
RECORD_HEADER_LEN = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
# Training-step keys, preferred over `_step` (a count of log calls).
GLOBAL_STEP_KEYS = ("train/global_step", "trainer/global_step")
BOOKKEEPING_KEYS = ("_step", "_timestamp", "_runtime")


def run_log(path: Path) -> Path | None:
    """The `.wandb` log of a run folder (or the file itself); None when `path` is neither."""
    if path.is_file():
        return path if path.suffix == ".wandb" else None
    logs = sorted(path.glob("run-*.wandb"))
    if logs:
        return logs[0]
    folders = [*path.glob("*run-*"), *path.glob("wandb/*run-*")]  # a wandb/ folder, or the folder holding it
    runs = sorted(p for p in folders if p.is_dir() and not p.is_symlink() and any(p.glob("run-*.wandb")))
    if len(runs) == 1:
        return run_log(runs[0])
    if runs:
        raise ImportFormatError(
            f"{path}: holds {len(runs)} W&B runs; import one folder ({', '.join(r.name for r in runs[:5])} ...)"
        )
    return None


def open_wandb(path: Path, *, step_column: str | None = None) -> Source:
    """Open a W&B offline run: its history as points, its config, its display name."""
    try:
        from wandb.proto import wandb_internal_pb2
    except ImportError:
        raise ImportFormatError("reading W&B runs needs the 'wandb' package (pip install 'holter[wandb]')") from None
    log = run_log(path)
    if log is None:
        raise ImportFormatError(f"{path}: no W&B run log (run-*.wandb) here")
    handle = log.open("rb")
    if handle.read(HEADER_LEN)[:4] != HEADER:
        handle.close()
        raise ImportFormatError(f"{log}: not a W&B run log (no ':W&B' header)")
    size = log.stat().st_size or 1
    source = Source(
        path=path, format="wandb", points=iter(()), progress=lambda: handle.tell() / size if not handle.closed else 1.0
    )
    source.points = _points(handle, log, source, wandb_internal_pb2.Record, step_column)
    return source


def _points(handle: BinaryIO, log: Path, source: Source, record_type: Any, step_column: str | None) -> Iterator[Point]:
    step_key = step_column
    step: int | None = None
    with handle:
        for record in _records(handle, log, record_type):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                source.name = record.run.display_name or None
                _merge_config(source.config, record.run.config.update, log)
            elif kind == "config":
                _merge_config(source.config, record.config.update, log)
            elif kind == "history":
                items = _history_items(record.history.item)
                if step_key is None:
                    step_key = next((k for k in GLOBAL_STEP_KEYS if k in items), "_step")
                if step_key in items:
                    step = _int(items[step_key])
                if step is None:
                    continue  # logged before the run's first training step was known
                wall_time = parse_wall_time(_number(items.get("_timestamp", "null")))
                for name, text in items.items():
                    if name == step_key or name in BOOKKEEPING_KEYS or name in GLOBAL_STEP_KEYS:
                        continue
                    for metric, value in _numbers(name, _json(text, log)):
                        yield Point(metric, step, value, wall_time)


def _records(handle: BinaryIO, log: Path, record_type: Any) -> Iterator[Any]:
    """Every protobuf record of the log, joined from its pieces; a torn last record (the run was
    killed mid-write) ends the log, a bad checksum before that is an error."""
    pieces = b""
    while True:
        offset = handle.tell()
        left = BLOCK_LEN - offset % BLOCK_LEN
        if left < RECORD_HEADER_LEN:
            handle.read(left)  # the block's zero trailer
            continue
        header = handle.read(RECORD_HEADER_LEN)
        if len(header) < RECORD_HEADER_LEN:
            return
        checksum, length, kind = struct.unpack("<IHB", header)
        if checksum == 0 and length == 0 and kind == 0:
            handle.read(left - RECORD_HEADER_LEN)  # zero padding to the end of the block
            continue
        data = handle.read(length)
        if len(data) < length:
            return
        if zlib.crc32(data, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != checksum:
            raise ImportFormatError(f"{log}: damaged record at byte {offset} (checksum mismatch)")
        pieces = data if kind in (FULL, FIRST) else pieces + data
        if kind in (FULL, LAST):
            record = record_type()
            try:
                record.ParseFromString(pieces)
            except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError, or a RecursionError on deep nesting
                raise ImportFormatError(f"{log}: malformed record at byte {offset} ({type(exc).__name__})") from None
            pieces = b""
            yield record


def _key(item: Any) -> str:
    return "/".join(item.nested_key) if item.nested_key else item.key


def _history_items(items: Any) -> dict[str, str]:
    """The history record's items by name, less the media: W&B writes a logged Table, Histogram
    or Image as items under its key (`preds/_type` "table-file", `preds/nrows`, `preds/ncols`,
    `preds/size`, ...), and their numbers are the medium's metadata, not curves."""
    media = {
        tuple(item.nested_key[:-1]) for item in items if len(item.nested_key) > 1 and item.nested_key[-1] == "_type"
    }
    kept = {}
    for item in items:
        path = tuple(item.nested_key)
        if media and any(path[:n] in media for n in range(1, len(path))):
            continue
        kept[_key(item)] = item.value_json
    return kept


def _json(text: str, log: Path) -> Any:
    """A value the run logged; a malformed or too deeply nested one is a format error."""
    try:
        return json.loads(text)
    except ValueError:
        raise ImportFormatError(f"{log}: a logged value is not JSON ({text[:60]!r})") from None
    except RecursionError:
        raise ImportFormatError(f"{log}: a logged value nests too deeply") from None


def _merge_config(config: dict[str, Any], items: Any, log: Path) -> None:
    for item in items:
        key = _key(item)
        if key == "_wandb":
            continue
        value = _json(item.value_json, log)
        # wandb's config.yaml shape ({"value": ..., "desc": ...}) when it comes through a sync
        config[key] = (
            value["value"]
            if isinstance(value, dict) and set(value) <= {"value", "desc"} and "value" in value
            else value
        )


def _numbers(name: str, value: Any, depth: int = 0) -> Iterator[tuple[str, float]]:
    """The numbers of one logged value; a dict of numbers becomes 'name/key'. Media, tables
    and histograms (dicts with a `_type`) are not curves and are skipped."""
    if isinstance(value, bool) or value is None or depth > 32:
        return
    if isinstance(value, (int, float)):
        yield name, float(value)
    elif isinstance(value, str) and (number := from_name(value)) is not None:
        yield name, number
    elif isinstance(value, dict) and "_type" not in value:
        for key, inner in value.items():
            yield from _numbers(f"{name}/{key}", inner, depth + 1)


def _number(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _int(text: str) -> int | None:
    value = _number(text)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value == int(value):
        return int(value)
    return None
