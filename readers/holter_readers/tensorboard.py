"""TensorBoard event files, read with the standard library alone: scalar summaries, their steps
and wall times, and the hyperparameters of `add_hparams`.

An event file is a TFRecord file (tensorflow/core/lib/io/record_writer.cc): each record is the
length (uint64, little-endian), a masked CRC-32C of those 8 bytes, the data, and a masked
CRC-32C of the data. The data is one `Event` protocol buffer (tensorboard/compat/proto/
event.proto): `wall_time` (1, double), `step` (2, int64), `summary` (5). A `Summary` holds
`value`s (1): `tag` (1), `simple_value` (2, float; SummaryWriter.add_scalar, tensorboardX), or
a `tensor` (8; TF2's tf.summary.scalar) with `metadata` (9) naming its plugin. A scalar tensor
is a rank-0 `TensorProto` whose one number is in `tensor_content` (4) or in the field of its
type. Only rank-0 numeric tensors are read: nothing is ever allocated from a tensor's declared
shape, so a tiny file claiming a huge tensor costs nothing.

A folder is read event file by event file; the files of a subfolder (a run, in TensorBoard's
words) name their metrics 'subfolder/tag'. Only regular files are read, and nothing below the
folder that resolves outside it (a symlinked file or folder pointing elsewhere is said once and
passed over). A file written by `add_hparams` (its summaries come from the hparams plugin) gives
the run's config; its scalars are the hparams' `metric_dict` final values, not curves, and are
skipped.

A record's length is bounded before anything is read for it. A record longer than `_MAX_READ`
holds no scalars (a graph, images, audio) and is skipped unread; a length no event can have
(`_MAX_RECORD`: a protocol buffer is under 2 GiB, where a damaged or hostile file may claim up to
2^64 - 1) or a length whose checksum does not match is a damaged file: a follower says so and
reads the later files (an import stops there). A record not all written yet (the end of a live
file) is waited for by the file's size alone: its bytes are read once, when they are all there.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from holter_readers import protobuf as pb
from holter_readers.entries import Entry, Reader
from holter_readers.paths import NOT_REGULAR, inside
from holter_readers.points import FormatError
from holter_readers.tail import FileTail

EVENT_FILE_MARKER = "tfevents"
HPARAMS_PLUGIN = b"hparams"
_HEADER = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_WALL_TIME = struct.Struct("<d")
_VALUE = struct.Struct("<f")
_CHUNK = 1 << 20
# The longest record read into memory. A step's scalars come nowhere near it: add_scalar writes
# ~50 bytes, and even TF1's merge_all, which puts a step's every summary (scalars beside
# histograms and images) in one event, makes records of a few MiB. A longer record is a graph,
# images or audio: skipped unread (a seek), so it costs no memory whatever it claims.
_MAX_READ = 64 << 20
# No record of an event file is longer: an Event is a protocol buffer, and protocol buffers are
# under 2 GiB. A longer length is a damaged file (a seek past 2^63 would not even be possible).
_MAX_RECORD = (2 << 30) - 1

# TensorFlow's DataType numbers (tensorflow/core/framework/types.proto) of the numeric types,
# with the struct format of one element in `tensor_content` and the repeated field holding the
# values otherwise (5 float_val, 6 double_val, 7 int_val, 10 int64_val, 13 half_val, 16
# uint32_val, 17 uint64_val).
_DTYPES: dict[int, tuple[str, int]] = {
    1: ("<f", 5),  # DT_FLOAT
    2: ("<d", 6),  # DT_DOUBLE
    3: ("<i", 7),  # DT_INT32
    4: ("<B", 7),  # DT_UINT8
    5: ("<h", 7),  # DT_INT16
    6: ("<b", 7),  # DT_INT8
    9: ("<q", 10),  # DT_INT64
    14: ("bfloat16", 13),  # DT_BFLOAT16: the upper half of a float32
    17: ("<H", 7),  # DT_UINT16
    19: ("<e", 13),  # DT_HALF
    22: ("<I", 16),  # DT_UINT32
    23: ("<Q", 17),  # DT_UINT64
}


def _crc32c_byte_table() -> list[int]:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of each byte value."""
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_BYTES = _crc32c_byte_table()
_HALVES: tuple[list[int], list[int]] | None = None


def _half_word_tables() -> tuple[list[int], list[int]]:
    """Tables that take a 32-bit word's CRC step two bytes at a time (slicing-by-4 with the four
    byte tables pairwise merged): two lookups per word, about 1.8x the byte-at-a-time speed in
    Python. Built on first use (65,536 entries each, ~5 MB, ~40 ms)."""
    global _HALVES  # noqa: PLW0603 - built once per process, on first use
    if _HALVES is None:
        tables = [_BYTES]
        for _ in range(3):
            tables.append([(crc >> 8) ^ _BYTES[crc & 0xFF] for crc in tables[-1]])
        t0, t1, t2, t3 = tables
        low = [t3[i & 0xFF] ^ t2[i >> 8] for i in range(65536)]
        high = [t1[i & 0xFF] ^ t0[i >> 8] for i in range(65536)]
        _HALVES = (low, high)
    return _HALVES


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C (Castagnoli), rotated and offset so that a CRC of data
    holding CRCs stays strong."""
    crc = 0xFFFFFFFF
    low, high = _half_word_tables()
    words = len(data) // 4
    for word in struct.unpack_from(f"<{words}I", data):
        crc ^= word
        crc = low[crc & 0xFFFF] ^ high[crc >> 16]
    table = _BYTES
    for byte in data[words * 4 :]:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


_LENGTH_CRCS: dict[bytes, int] = {}


def _length_crc(header: bytes) -> int:
    """The checksum of a record's length: records of one length share it, so it is kept."""
    crc = _LENGTH_CRCS.get(header)
    if crc is None:
        if len(_LENGTH_CRCS) > 4096:
            _LENGTH_CRCS.clear()
        crc = _LENGTH_CRCS[header] = masked_crc32c(header)
    return crc


def is_event_file(path: Path) -> bool:
    """Whether the name is a TensorBoard event file's (`events.out.tfevents.*`)."""
    return EVENT_FILE_MARKER in path.name


def event_files(path: Path, *, passed_over: dict[Path, str] | None = None) -> list[Path]:
    """The event files at `path`: itself, or every one below the folder, in name order (the
    names start with the time they were created).

    Below a folder only regular files are event files, and nothing that resolves outside the
    folder is read: a symlinked file is read when it resolves inside, a symlinked folder is not
    walked (the folder it points to is walked as itself when it is inside, so a link back up
    makes no loop; one pointing outside is passed over). What is passed over, and why, goes into
    `passed_over` when given.
    """
    if not path.is_dir():
        return [path]
    skipped: dict[Path, str] = {} if passed_over is None else passed_over
    found = []
    folders = [path]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as scanned:
                entries = list(scanned)
        except OSError:
            continue  # gone since, or not ours to read
        for entry in entries:
            marked = EVENT_FILE_MARKER in entry.name
            try:
                if entry.is_symlink():
                    if not inside(Path(entry.path), path):
                        if marked or entry.is_dir():
                            skipped[Path(entry.path)] = f"resolves outside {path}"
                        continue
                    if entry.is_dir():
                        continue  # the folder it points to is walked as itself
                if entry.is_dir(follow_symlinks=False):
                    folders.append(Path(entry.path))
                elif marked:
                    if entry.is_file():
                        found.append(Path(entry.path))
                    elif os.path.exists(entry.path):  # not a dangling link: a FIFO, a device, a socket
                        skipped[Path(entry.path)] = NOT_REGULAR
            except OSError:
                continue
    return sorted(found)


class EventFile:
    """One event file, read record by record from where the last read stopped. `root`: the
    followed folder it was found in (a file resolving outside it is not read); `say`: told what
    a user should hear once (a record skipped unread, the file replaced)."""

    def __init__(
        self, path: Path, prefix: str, *, root: Path | None = None, say: Callable[[str], None] | None = None
    ) -> None:
        self.tail = FileTail(path, root=root, say=say)
        self.prefix = prefix
        self.say = say
        self.hparams = False  # written by add_hparams: its scalars are not curves
        self.broken: str | None = None
        # the file size that holds the whole record being written at the offset: until the file
        # is that long, nothing is read again
        self.waiting: int | None = None
        self._said_large = False

    def records(self) -> Iterator[tuple[bytes, int]]:
        """(data, its masked CRC-32C) of every whole record after the offset; the offset moves
        past a record once the caller takes the next one. Raises FormatError on a damaged
        length; the caller checks the data's checksum (only records with scalars in them are
        worth the pure-Python checksum)."""
        if self.waiting is not None and self.tail.short_of(self.waiting):
            return  # the record at the offset is still being written
        self.waiting = None
        handle = self.tail.open()
        if handle is None:
            return
        self.tail.restarted = False  # replaced or cut (the tail said so): its records simply come again
        with handle:
            try:
                yield from self._records(handle)
            finally:
                self.tail.mark(handle)

    def _records(self, handle: Any) -> Iterator[tuple[bytes, int]]:
        tail = self.tail
        buffer = b""
        start = 0
        while True:
            if len(buffer) - start < _HEADER.size:
                more = handle.read(_CHUNK)
                if not more:
                    return  # the rest is not written yet (or, when final, a torn last record)
                buffer = buffer[start:] + more
                start = 0
                continue
            length, length_crc = _HEADER.unpack_from(buffer, start)
            if _length_crc(buffer[start : start + 8]) != length_crc:
                raise FormatError(f"{tail.path}: damaged record at byte {tail.offset} (length checksum mismatch)")
            if length > _MAX_RECORD:
                raise FormatError(
                    f"{tail.path}: damaged record at byte {tail.offset} (it claims {length:,} bytes; "
                    "no event is 2 GiB or longer)"
                )
            size = _HEADER.size + length + 4
            if len(buffer) - start < size:
                end = tail.offset + size
                if os.fstat(handle.fileno()).st_size < end:
                    self.waiting = end  # not all written yet: its bytes are read once they are
                    return
                if length > _MAX_READ:
                    self._skip_large(length)
                    tail.offset = end
                    handle.seek(end)
                    buffer, start = b"", 0
                    continue
                buffer = buffer[start:] + handle.read(size - (len(buffer) - start))
                start = 0
                if len(buffer) < size:
                    return  # cut since its size was taken: the next read starts over
            data = buffer[start + _HEADER.size : start + _HEADER.size + length]
            (data_crc,) = _CRC.unpack_from(buffer, start + _HEADER.size + length)
            start += size
            yield data, data_crc
            tail.offset += size

    def _skip_large(self, length: int) -> None:
        if not self._said_large and self.say is not None:
            self.say(
                f"{self.tail.path}: a record of {length / (1 << 20):,.0f} MiB at byte {self.tail.offset}, longer "
                f"than the {_MAX_READ >> 20} MiB an event with scalars holds (a graph, images, audio): skipped unread"
            )
        self._said_large = True


class TensorBoardReader(Reader):
    """A TensorBoard event file, or a logdir whose event files (new ones as they appear) are read
    in name order. With `files`, only the event files added by `add_file` are read (the files a
    job's own SummaryWriters write, for `sync_tensorboard`)."""

    format = "tensorboard"

    def __init__(self, path: Path, *, strict: bool = True, discover: bool = True) -> None:
        super().__init__()
        self.path = Path(path)
        self.strict = strict  # raise on a damaged file; else say so in `warnings` and skip the file
        self.discover = discover
        self.files: dict[str, EventFile] = {}
        self._kept: dict[str, dict[str, Any]] = {}
        self._passed_over: set[Path] = set()  # said once each

    def add_file(self, path: Path, prefix: str = "") -> None:
        """Read `path` too, its metrics named 'prefix' + tag."""
        key = str(path)
        if key not in self.files:
            self.files[key] = self._event_file(Path(path), prefix, key)

    def _event_file(self, path: Path, prefix: str, key: str, *, root: Path | None = None) -> EventFile:
        event_file = EventFile(path, prefix, root=root, say=self.note)
        kept = self._kept.pop(key, None)
        if kept:
            event_file.tail.restore(kept)
            event_file.hparams = bool(kept.get("hparams"))
        return event_file

    def _discover(self) -> None:
        if not self.discover:
            return
        if not self.path.exists():
            return
        if not self.path.is_dir():
            self.add_file(self.path)
            return
        passed_over: dict[Path, str] = {}
        for file in event_files(self.path, passed_over=passed_over):
            key = file.relative_to(self.path).as_posix()
            if key not in self.files:
                run = file.parent.relative_to(self.path).as_posix()
                self.files[key] = self._event_file(file, "" if run == "." else f"{run}/", key, root=self.path)
        for path, why in passed_over.items():
            if path not in self._passed_over:
                self._passed_over.add(path)
                self.note(f"{path} {why}; it is not read")

    def read(self, *, final: bool = False) -> Iterator[Entry]:
        self._discover()
        if self.discover and self.path.is_dir() and not self.files and final:
            raise FormatError(f"{self.path}: folder holds no TensorBoard event files")
        for event_file in list(self.files.values()):
            if event_file.broken:
                continue
            try:
                yield from self._entries(event_file)
            except FormatError as exc:
                if self.strict:
                    raise
                event_file.broken = str(exc)
                self.warnings.append(f"{exc}; the rest of this file is skipped")

    def _entries(self, event_file: EventFile) -> Iterator[Entry]:
        prefix = event_file.prefix
        for data, data_crc in event_file.records():
            try:
                decoded = decode_event(data)
            except FormatError as exc:
                raise FormatError(f"{event_file.tail.path}: not a readable TensorBoard event ({exc})") from None
            if decoded is None:
                continue
            step, wall_time, values, hparams = decoded
            if (values or hparams) and masked_crc32c(data) != data_crc:
                raise FormatError(
                    f"{event_file.tail.path}: damaged record at byte {event_file.tail.offset} (data checksum mismatch)"
                )
            if hparams is not None or event_file.hparams:
                event_file.hparams = True
                if hparams:
                    self.config.update(hparams)
                continue
            if values:
                yield Entry(
                    step, wall_time, {prefix + tag: value for tag, value in values.items()} if prefix else values
                )

    def position(self) -> dict[str, Any]:
        files = {key: {**f.tail.position(), "hparams": f.hparams} for key, f in self.files.items()}
        return {"files": {**self._kept, **files}, "config": dict(self.config)}

    def restore(self, position: dict[str, Any]) -> None:
        self._kept = dict(position.get("files") or {})
        self.config.update(position.get("config") or {})
        for key, kept in list(self.files.items()):
            self.files[key] = self._event_file(kept.tail.path, kept.prefix, key, root=kept.tail.root)

    def written(self) -> object:
        self._discover()
        return tuple(f.tail.size() for f in self.files.values())

    def progress(self) -> float | None:
        files = list(self.files.values())
        total = sum(f.tail.size() for f in files)
        return min(1.0, sum(f.tail.offset for f in files) / total) if total else None


def decode_event(data: bytes) -> tuple[int, float | None, dict[str, float], dict[str, Any] | None] | None:
    """(step, wall time, scalars by tag, hparams or None) of one `Event`; None for an event
    without a summary (the file version, a graph, a log message)."""
    quick = _one_simple_value(data)
    if quick is not None:
        return quick
    wall_time: float | None = None
    step = 0
    summary = None
    for number, wire, raw in pb.fields(data):
        if number == 1 and wire == pb.FIXED64:
            wall_time = pb.double(raw) or None
        elif number == 2 and wire == pb.VARINT:
            step = pb.signed64(raw)  # type: ignore[arg-type]
        elif number == 5 and wire == pb.LENGTH:
            summary = raw
    if summary is None:
        return None
    values: dict[str, float] = {}
    hparams: dict[str, Any] | None = None
    for number, wire, raw in pb.fields(summary):  # type: ignore[arg-type]
        if number != 1 or wire != pb.LENGTH:
            continue
        tag, value, plugin, content = _summary_value(raw)  # type: ignore[arg-type]
        if plugin == HPARAMS_PLUGIN:
            found = _session_start_hparams(content)
            hparams = {**(hparams or {}), **found}
        elif value is not None:
            values[tag] = value
    return step, wall_time, values, hparams


def _one_simple_value(data: bytes) -> tuple[int, float | None, dict[str, float], None] | None:
    """The common event, decoded without the general parser: a wall time, a step and a summary
    of one `simple_value` (SummaryWriter.add_scalar, tensorboardX), fields in their usual order;
    None for anything else."""
    end = len(data)
    if end < 16 or data[0] != 0x09 or data[9] != 0x10:
        return None
    try:
        step, pos = pb.varint(data, 10)
        if data[pos] != 0x2A:
            return None
        length, pos = pb.varint(data, pos + 1)
        if pos + length != end or data[pos] != 0x0A:
            return None
        length, pos = pb.varint(data, pos + 1)
        if pos + length != end or data[pos] != 0x0A:
            return None
        tag_length, tag_start = pb.varint(data, pos + 1)
        value_at = tag_start + tag_length
        if value_at + 5 != end or data[value_at] != 0x15:
            return None
    except IndexError:
        return None
    wall_time = _WALL_TIME.unpack_from(data, 1)[0] or None
    value = _VALUE.unpack_from(data, value_at + 1)[0]
    tag = data[tag_start:value_at].decode("utf-8", "replace")
    return pb.signed64(step), wall_time, {tag: value}, None


def _summary_value(data: bytes) -> tuple[str, float | None, bytes | None, bytes]:
    """(tag, scalar or None, plugin name, plugin content) of one `Summary.Value`."""
    tag = ""
    simple: float | None = None
    tensor = None
    plugin: bytes | None = None
    content = b""
    for number, wire, raw in pb.fields(data):
        if number == 1 and wire == pb.LENGTH:
            tag = pb.text(raw)
        elif number == 2 and wire == pb.FIXED32:
            simple = pb.single(raw)
        elif number == 8 and wire == pb.LENGTH:
            tensor = raw
        elif number == 9 and wire == pb.LENGTH:
            plugin, content = _plugin_of(raw)  # type: ignore[arg-type]
    if simple is None and tensor is not None and plugin != HPARAMS_PLUGIN:
        simple = tensor_scalar(tensor)  # type: ignore[arg-type]
    return tag, simple, plugin, content


def _plugin_of(metadata: bytes) -> tuple[bytes | None, bytes]:
    for number, wire, raw in pb.fields(metadata):
        if number == 1 and wire == pb.LENGTH:  # plugin_data
            name, content = None, b""
            for inner, inner_wire, value in pb.fields(raw):  # type: ignore[arg-type]
                if inner == 1 and inner_wire == pb.LENGTH:
                    name = bytes(value)  # type: ignore[call-overload]
                elif inner == 2 and inner_wire == pb.LENGTH:
                    content = value  # type: ignore[assignment]
            return name, content
    return None, b""


def tensor_scalar(data: bytes) -> float | None:
    """The number of a rank-0 numeric `TensorProto`; None for any other tensor (never decoded)."""
    dtype = 0
    content = None
    typed: dict[int, tuple[int, object]] = {}
    for number, wire, raw in pb.fields(data):
        if number == 1 and wire == pb.VARINT:
            dtype = raw  # type: ignore[assignment]
        elif number == 2 and wire == pb.LENGTH:
            for dim, _, _ in pb.fields(raw):  # type: ignore[arg-type]
                if dim in (2, 3):  # a dimension, or unknown_rank: not a scalar
                    return None
        elif number == 4 and wire == pb.LENGTH:
            content = raw
        elif number not in typed:
            typed[number] = (wire, raw)
    described = _DTYPES.get(dtype)
    if described is None:
        return None
    layout, field = described
    if content:
        if layout == "bfloat16":
            return float(struct.unpack("<f", b"\x00\x00" + bytes(content))[0]) if len(content) == 2 else None  # type: ignore[call-overload,arg-type]  # tensor_content is bytes
        size = struct.calcsize(layout)
        return float(struct.unpack(layout, content)[0]) if len(content) == size else None  # type: ignore[arg-type]
    if field not in typed:
        return None
    wire, raw = typed[field]
    if field == 5:
        first = pb.first_fixed(wire, raw, 4)
        return pb.single(first) if first is not None else None
    if field == 6:
        first = pb.first_fixed(wire, raw, 8)
        return pb.double(first) if first is not None else None
    varint = pb.first_varint(wire, raw)
    if varint is None:
        return None
    if layout == "<e":
        return float(struct.unpack("<e", struct.pack("<H", varint & 0xFFFF))[0])
    if layout == "bfloat16":
        return float(struct.unpack("<f", struct.pack("<I", (varint & 0xFFFF) << 16))[0])
    if field in (7, 10):  # int32/int64 and the small ints travel sign-extended to 64 bits
        return float(pb.signed64(varint))
    return float(varint)


def _session_start_hparams(content: bytes) -> dict[str, Any]:
    """The hyperparameters of an hparams plugin's `session_start_info` (HParamsPluginData field 3,
    its `hparams` map, field 1, of google.protobuf.Value); {} for the plugin's other summaries."""
    found: dict[str, Any] = {}
    for number, wire, raw in pb.fields(content):
        if number != 3 or wire != pb.LENGTH:
            continue
        for field, field_wire, entry in pb.fields(raw):  # type: ignore[arg-type]
            if field != 1 or field_wire != pb.LENGTH:
                continue
            key, value = "", None
            for part, part_wire, item in pb.fields(entry):  # type: ignore[arg-type]
                if part == 1 and part_wire == pb.LENGTH:
                    key = pb.text(item)
                elif part == 2 and part_wire == pb.LENGTH:
                    value = _protobuf_value(item)  # type: ignore[arg-type]
            if key:
                found[key] = value
    return found


def _protobuf_value(data: bytes) -> Any:
    """A google.protobuf.Value holding a number, a string or a bool (None otherwise)."""
    for number, wire, raw in pb.fields(data):
        if number == 2 and wire == pb.FIXED64:
            value = pb.double(raw)
            return int(value) if value.is_integer() and abs(value) < 2**53 else value
        if number == 3 and wire == pb.LENGTH:
            return pb.text(raw)
        if number == 4 and wire == pb.VARINT:
            return bool(raw)
    return None
