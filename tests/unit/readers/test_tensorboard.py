"""The standard-library TensorBoard reader against the `tensorboard` package's own reader, on files
written by torch's SummaryWriter, TensorBoard's writer and its TF2-style tensor summaries; and on
hostile files: lengths no event has, huge and torn records, links out of the folder, FIFOs."""

from __future__ import annotations

import math
import os
import struct
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from holter_readers import FormatError, points_of
from holter_readers.tensorboard import TensorBoardReader, decode_event, masked_crc32c, tensor_scalar

tensorboard = pytest.importorskip("tensorboard")
np = pytest.importorskip("numpy")
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter


def reference_points(folder: Path) -> list[tuple[str, int, float]]:
    """What the tensorboard package reads: every rank-0 numeric scalar, by file name order, a
    subfolder's (add_scalars writes one per key) tags under its name."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    found = []
    for file in sorted(folder.rglob("*tfevents*")):
        run = file.parent.relative_to(folder).as_posix()
        prefix = "" if run == "." else f"{run}/"
        for event in EventFileLoader(str(file)).Load():
            for value in event.summary.value:
                if value.WhichOneof("value") == "simple_value":
                    found.append((prefix + value.tag, event.step, value.simple_value))
                elif value.HasField("tensor"):
                    array = tensor_util.make_ndarray(value.tensor)
                    if array.ndim == 0 and array.dtype.kind in "fiu":
                        found.append((prefix + value.tag, event.step, float(array)))
    return found


def ours(folder: Path) -> list[tuple[str, int, float]]:
    return [(p.metric, p.step, p.value) for p in points_of(TensorBoardReader(folder).read(final=True))]


def same(a: list[tuple[str, int, float]], b: list[tuple[str, int, float]]) -> bool:
    return len(a) == len(b) and all(
        x[:2] == y[:2] and (x[2] == y[2] or (math.isnan(x[2]) and math.isnan(y[2]))) for x, y in zip(a, b)
    )


def write(folder: Path, values: list[tuple[int, summary_pb2.Summary.Value]]) -> None:
    writer = EventFileWriter(str(folder))
    for step, value in values:
        writer.add_event(
            event_pb2.Event(step=step, wall_time=1_700_000_000.0 + step, summary=summary_pb2.Summary(value=[value]))
        )
    writer.close()


def test_summary_writer_scalars_read_as_the_tensorboard_package_reads_them(tmp_path: Path) -> None:
    torch_tensorboard = pytest.importorskip("torch.utils.tensorboard")
    with torch_tensorboard.SummaryWriter(str(tmp_path)) as writer:
        for step in range(200):
            writer.add_scalar("train/loss", 3.0 / (1 + step) if step != 150 else math.nan, step)
            writer.add_scalar("charts/SPS", 1000 + step, step * 128)
            writer.add_scalars("pair", {"a": step, "b": -step}, step)
    assert same(ours(tmp_path), reference_points(tmp_path))


@pytest.mark.parametrize(
    "value",
    [np.float32(2.5), np.float64(-1.25e-7), np.int32(-7), np.int64(2**40), np.float16(0.5), np.uint8(200)],
    ids=["float32", "float64", "int32", "int64", "float16", "uint8"],
)
def test_tensor_scalars_of_every_numeric_type(tmp_path: Path, value: np.generic) -> None:
    from tensorboard.util import tensor_util

    proto = tensor_util.make_tensor_proto(value)
    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    write(tmp_path, [(3, summary_pb2.Summary.Value(tag="x", tensor=proto, metadata=metadata))])
    assert same(ours(tmp_path), reference_points(tmp_path)) and ours(tmp_path) == [("x", 3, float(value))]


def test_tf2_scalar_summaries_are_read(tmp_path: Path) -> None:
    from tensorboard.plugins.scalar.summary_v2 import scalar_pb

    writer = EventFileWriter(str(tmp_path))
    for step in range(5):
        writer.add_event(event_pb2.Event(step=step, summary=scalar_pb("eval/acc", 0.5 + step / 10)))
    writer.close()
    assert [(m, s) for m, s, _ in ours(tmp_path)] == [("eval/acc", s) for s in range(5)]
    assert same(ours(tmp_path), reference_points(tmp_path))


def test_typed_value_fields_packed_or_not_and_bfloat16() -> None:
    unpacked = (
        b"\x08\x01" + b"\x12\x00" + b"\x2d" + np.float32(1.5).tobytes()
    )  # DT_FLOAT, shape [], float_val 1.5 unpacked
    assert tensor_scalar(unpacked) == 1.5
    bfloat16 = tensor_pb2.TensorProto(dtype=types_pb2.DT_BFLOAT16, half_val=[0x3FC0])  # 1.5 in bfloat16
    assert tensor_scalar(bfloat16.SerializeToString()) == 1.5
    negative = tensor_pb2.TensorProto(dtype=types_pb2.DT_INT32, int_val=[-3])
    assert tensor_scalar(negative.SerializeToString()) == -3.0


def test_a_tensor_claiming_a_huge_shape_is_not_a_scalar_and_costs_nothing() -> None:
    shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1 << 40)])
    bomb = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape, float_val=[1.0]).SerializeToString()
    started = time.perf_counter()
    assert tensor_scalar(bomb) is None
    assert time.perf_counter() - started < 0.1


def test_strings_histograms_and_images_are_not_curves(tmp_path: Path) -> None:
    from tensorboard.util import tensor_util

    text = summary_pb2.Summary.Value(tag="notes", tensor=tensor_util.make_tensor_proto("hello"))
    image = summary_pb2.Summary.Value(tag="img", image=summary_pb2.Summary.Image(height=1, width=1))
    histogram = summary_pb2.Summary.Value(tag="w", histo=summary_pb2.HistogramProto(min=0, max=1, num=3))
    vector = summary_pb2.Summary.Value(tag="v", tensor=tensor_util.make_tensor_proto(np.ones(3, np.float32)))
    write(
        tmp_path,
        [
            (1, text),
            (1, image),
            (1, histogram),
            (1, vector),
            (2, summary_pb2.Summary.Value(tag="loss", simple_value=2.0)),
        ],
    )
    assert ours(tmp_path) == [("loss", 2, 2.0)]


def test_a_growing_file_is_read_record_by_record_as_it_is_written(tmp_path: Path) -> None:
    source = tmp_path / "source"
    write(source, [(s, summary_pb2.Summary.Value(tag="loss", simple_value=float(s))) for s in range(10)])
    (whole,) = source.glob("*tfevents*")
    data = whole.read_bytes()
    target = tmp_path / "live" / whole.name
    target.parent.mkdir()
    reader = TensorBoardReader(target.parent)
    seen: list[int] = []
    for cut in range(0, len(data) + 1, 7):  # the file grows 7 bytes at a time, records torn between reads
        target.write_bytes(data[:cut])
        seen += [e.step for e in reader.read()]
    target.write_bytes(data)
    seen += [e.step for e in reader.read()]
    assert seen == list(range(10))


def test_the_position_goes_on_where_an_earlier_reader_stopped(tmp_path: Path) -> None:
    write(tmp_path, [(s, summary_pb2.Summary.Value(tag="loss", simple_value=float(s))) for s in range(5)])
    first = TensorBoardReader(tmp_path)
    assert [e.step for e in first.read()] == list(range(5))
    write(tmp_path / "eval", [(7, summary_pb2.Summary.Value(tag="loss", simple_value=1.0))])
    second = TensorBoardReader(tmp_path)
    second.restore(first.position())
    assert [(e.step, list(e.values)) for e in second.read()] == [(7, ["eval/loss"])]


def test_a_damaged_record_is_an_error_naming_its_byte(tmp_path: Path) -> None:
    write(tmp_path, [(s, summary_pb2.Summary.Value(tag="loss", simple_value=float(s))) for s in range(5)])
    (file,) = tmp_path.glob("*tfevents*")
    data = bytearray(file.read_bytes())
    data[-6] ^= 0xFF  # inside the last record's value
    file.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="damaged record at byte"):
        list(TensorBoardReader(tmp_path).read(final=True))
    lenient = TensorBoardReader(tmp_path, strict=False)
    assert [e.step for e in lenient.read()] == [0, 1, 2, 3] and "damaged record" in lenient.warnings[0]


def test_garbage_is_not_an_event_file(tmp_path: Path) -> None:
    (tmp_path / "events.out.tfevents.1.host").write_bytes(b"\x00" * 8 + b"\x01\x02\x03\x04" + b"junk" * 10)
    with pytest.raises(FormatError, match="damaged record"):
        list(TensorBoardReader(tmp_path).read(final=True))


def test_checksums_are_tensorflows() -> None:
    # tensorflow/core/lib/hash/crc32c_test.cc: CRC-32C of 32 zero bytes is 0x8a9136aa; masked as TFRecord masks it
    crc = 0x8A9136AA
    assert masked_crc32c(bytes(32)) == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_events_without_a_summary_are_passed_over() -> None:
    assert decode_event(event_pb2.Event(wall_time=1.0, file_version="brain.Event:2").SerializeToString()) is None


def record(data: bytes, *, length: int | None = None) -> bytes:
    """One TFRecord of `data`, its length (as claimed: `length`, a lie a hostile file may tell)
    with a checksum that matches it."""
    header = struct.pack("<Q", len(data) if length is None else length)
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data))


def scalars(steps: range, tag: str = "loss") -> bytes:
    return b"".join(
        record(
            event_pb2.Event(
                step=s,
                wall_time=1.7e9 + s,
                summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=s)]),
            ).SerializeToString()
        )
        for s in steps
    )


def peak_bytes_while(work: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_length_beyond_any_event_ends_that_file_and_the_later_files_are_read(tmp_path: Path) -> None:
    """A record claiming 2^63 bytes (with a matching length checksum) used to end the follower:
    the seek past it overflowed, and the later event file was never read (issue 47)."""
    header = struct.pack("<Q", 2**63)
    hostile = header + struct.pack("<I", masked_crc32c(header)) + b"junk" * 8
    (tmp_path / "events.out.tfevents.1.a").write_bytes(scalars(range(5)) + hostile + scalars(range(5, 8)))
    (tmp_path / "events.out.tfevents.2.b").write_bytes(scalars(range(100, 103)))
    reader = TensorBoardReader(tmp_path, strict=False)
    assert [e.step for e in reader.read()] == [0, 1, 2, 3, 4, 100, 101, 102]
    (warning,) = reader.warnings
    assert "events.out.tfevents.1.a: damaged record at byte" in warning and "9,223,372,036,854,775,808 bytes" in warning
    with pytest.raises(FormatError, match="no event is 2 GiB or longer"):
        list(TensorBoardReader(tmp_path).read(final=True))  # an import stops there


def test_a_record_longer_than_64_mib_is_skipped_unread_and_the_rest_of_the_file_read(tmp_path: Path) -> None:
    """A 100 MiB record of junk (a sparse file: no disk spent) is passed by a seek: it used to be
    read whole (three times its size in memory) and then end the file (issue 47)."""
    path = tmp_path / "events.out.tfevents.1.host"
    big = 100 << 20
    header = struct.pack("<Q", big)
    with path.open("wb") as handle:
        handle.write(scalars(range(3)) + header + struct.pack("<I", masked_crc32c(header)))
        handle.seek(big + 4, os.SEEK_CUR)  # the junk: a hole, and a data checksum of zeros
        handle.write(scalars(range(3, 6)))
    reader = TensorBoardReader(tmp_path, strict=False)
    steps: list[int] = []
    assert peak_bytes_while(lambda: steps.extend(e.step for e in reader.read())) < 8 << 20
    assert steps == list(range(6))
    (note,) = reader.warnings
    assert "a record of 100 MiB at byte" in note and "skipped unread" in note


def test_a_torn_record_is_waited_for_by_the_size_alone(tmp_path: Path) -> None:
    """The end of a live file: a 4 MiB record of which 2.5 MiB are written. It used to be read
    again, whole as far as written, at every poll; now only the file's size is looked at until
    the record is all there, and then it is read once."""
    path = tmp_path / "events.out.tfevents.1.host"
    blob = event_pb2.Event(
        step=9,
        summary=summary_pb2.Summary(
            value=[
                summary_pb2.Summary.Value(
                    tag="img", image=summary_pb2.Summary.Image(encoded_image_string=b"x" * (4 << 20))
                )
            ]
        ),
    ).SerializeToString()
    torn = record(blob)
    path.write_bytes(scalars(range(3)) + torn[: 5 << 19])
    reader = TensorBoardReader(tmp_path)
    assert [e.step for e in reader.read()] == [0, 1, 2]
    for _ in range(3):
        assert peak_bytes_while(lambda: list(reader.read())) < 256 << 10
    with path.open("ab") as handle:
        handle.write(torn[5 << 19 :] + scalars(range(3, 5)))
    assert [e.step for e in reader.read()] == [3, 4]


def test_event_files_below_the_folder_that_resolve_outside_it_are_not_read(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "run").mkdir(parents=True)
    (elsewhere / "events.out.tfevents.1.x").write_bytes(scalars(range(3), "secret"))
    (elsewhere / "run" / "events.out.tfevents.1.y").write_bytes(scalars(range(3), "secret"))
    logdir = tmp_path / "logdir"
    (logdir / "train").mkdir(parents=True)
    (logdir / "train" / "events.out.tfevents.2.z").write_bytes(scalars(range(2)))
    (logdir / "events.out.tfevents.1.x").symlink_to(elsewhere / "events.out.tfevents.1.x")
    (logdir / "linked").symlink_to(elsewhere / "run")
    (logdir / "events.out.tfevents.3.inside").symlink_to(logdir / "train" / "events.out.tfevents.2.z")
    (logdir / "again").symlink_to(logdir)  # a loop back up: not walked
    reader = TensorBoardReader(logdir, strict=False)
    points = [(p.metric, p.step) for p in points_of(reader.read())]
    assert points == [("loss", 0), ("loss", 1), ("train/loss", 0), ("train/loss", 1)]  # the inside link is read
    assert sorted(reader.warnings) == [
        f"{logdir / 'events.out.tfevents.1.x'} resolves outside {logdir}; it is not read",
        f"{logdir / 'linked'} resolves outside {logdir}; it is not read",
    ]
    list(reader.read())
    assert len(reader.warnings) == 2  # said once


def test_a_fifo_named_as_an_event_file_is_not_opened(tmp_path: Path) -> None:
    (tmp_path / "events.out.tfevents.1.real").write_bytes(scalars(range(2)))
    os.mkfifo(tmp_path / "events.out.tfevents.2.fifo")
    reader = TensorBoardReader(tmp_path, strict=False)
    assert [e.step for e in reader.read()] == [0, 1]
    fifo = tmp_path / "events.out.tfevents.2.fifo"
    assert reader.warnings == [f"{fifo} is not a regular file (a FIFO, a device or a socket); it is not read"]
