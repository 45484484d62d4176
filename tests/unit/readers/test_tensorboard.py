"""The standard-library TensorBoard reader against the `tensorboard` package's own reader, on files
written by torch's SummaryWriter, TensorBoard's writer and its TF2-style tensor summaries."""

from __future__ import annotations

import math
import time
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
