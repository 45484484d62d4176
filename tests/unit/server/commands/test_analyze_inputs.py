"""Inputs that used to crash or balloon `holter analyze` end in a clear error and exit 2, in bounded
time and memory (memory measured on the command's own process)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from holter.cli import main


def analyze(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["analyze", str(path)])
    return code, capsys.readouterr().err


def test_deeply_nested_json_exits_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text("[" * 200_000 + "]" * 200_000 + "\n")
    assert analyze(path, capsys) == (2, f"holter analyze: {path}:1: JSON nested too deeply\n")


def test_a_deeply_nested_trainer_state_exits_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "trainer_state.json"
    path.write_text('{"log_history": ' + "[" * 200_000 + "]" * 200_000 + "}")
    code, err = analyze(path, capsys)
    assert code == 2 and "JSON nested too deeply" in err


def test_a_huge_csv_field_exits_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,loss,note\n0,2.5," + "x" * 500_000 + "\n")
    code, err = analyze(path, capsys)
    assert code == 2 and "metrics.csv:2: not a CSV row (field larger than field limit" in err


def test_a_malformed_wandb_record_exits_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("wandb")
    import struct
    import zlib

    data = b"\x0a\xff\xff\xff\xff\x0f"  # a field that claims more bytes than the record has
    record = struct.pack("<IHB", zlib.crc32(data, zlib.crc32(b"\x01")) & 0xFFFFFFFF, len(data), 1) + data
    path = tmp_path / "run-x.wandb"
    path.write_bytes(b":W&B\x00\x00\x01" + record)
    code, err = analyze(path, capsys)
    assert code == 2 and "malformed record at byte 7" in err


def test_a_hundred_thousand_column_csv_is_refused_quickly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "wide.csv"
    columns = 100_000
    path.write_text("step," + ",".join(f"m{i}" for i in range(columns)) + "\n0," + ",".join(["1.5"] * columns) + "\n")
    started = time.perf_counter()
    code, err = analyze(path, capsys)
    assert code == 2 and "100,000 metric columns, more than the 10,000 one run may have" in err
    assert time.perf_counter() - started < 10


def tiny_tensorboard_bomb(folder: Path) -> Path:
    """A TensorBoard event file of a few hundred bytes whose one tensor claims 2**29 floats."""
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1 << 29)])
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape, float_val=[1.0])
    writer = EventFileWriter(str(folder))
    writer.add_event(
        event_pb2.Event(step=1, summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="x", tensor=tensor)]))
    )
    writer.close()
    (file,) = folder.glob("*tfevents*")
    return file


def test_a_tiny_tensorboard_file_claiming_a_huge_tensor_stays_small(tmp_path: Path) -> None:
    bomb = tiny_tensorboard_bomb(tmp_path)
    assert bomb.stat().st_size < 400
    # the command in a process of its own, its peak memory read by its parent when it ends
    probe = (
        "import resource, subprocess, sys\n"
        "command = [sys.executable, '-m', 'holter.cli', 'analyze', sys.argv[1]]\n"
        "done = subprocess.run(command, capture_output=True, text=True)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, repr(done.stderr))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(bomb)], capture_output=True, text=True, timeout=300, check=True
    )
    code, peak_kib, err = done.stdout.split(" ", 2)
    assert int(code) == 2 and "no numeric metric found" in err
    assert int(peak_kib) < 400 * 1024, f"peak RSS {int(peak_kib) / 1024:.0f} MiB"


def test_json_lines_of_numbers_still_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps({"step": s, "loss": 2.0 - s / 100}) + "\n" for s in range(50)))
    assert main(["analyze", str(path)]) == 0
