"""CSV and JSONL read as they grow, and the inputs that must end in a clear error, not a crash."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from holter_readers import FormatError, points_of
from holter_readers.entries import MAX_METRICS
from holter_readers.tabular import CsvReader, JsonlReader


def append(path: Path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text)


def test_a_growing_csv_gives_each_row_once_and_waits_for_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    reader = CsvReader(path, strict=False)
    assert list(reader.read()) == []  # not there yet
    append(path, "step,loss,grad_norm\n0,2.5,1.0\n1,2.4")
    assert [(e.step, e.values) for e in reader.read()] == [(0, {"loss": 2.5, "grad_norm": 1.0})]
    append(path, ",0.9\n2,nan,inf\n")
    rows = list(reader.read())
    assert [e.step for e in rows] == [1, 2] and math.isnan(rows[1].values["loss"])
    assert list(reader.read()) == []


def test_a_restarted_reader_goes_on_from_the_kept_position(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step;loss\n0;2.5\n1;2.4\n")
    first = CsvReader(path)
    assert len(list(first.read())) == 2
    append(path, "2;2.3\n")
    second = CsvReader(path)
    second.restore(json.loads(json.dumps(first.position())))
    assert [(e.step, e.values) for e in second.read()] == [(2, {"loss": 2.3})]


def test_a_file_replaced_under_the_same_name_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,loss\n0,2.5\n1,2.4\n2,2.3\n")
    reader = CsvReader(path)
    assert len(list(reader.read())) == 3
    path.unlink()
    path.write_text("step,acc\n0,0.1\n")
    assert [(e.step, e.values) for e in reader.read()] == [(0, {"acc": 0.1})]


def test_long_form_is_one_point_per_row_as_holter_exports_it(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text("metric,step,value,wall_time\nloss,0,2.5,1700000000.5\nloss,1,NaN,\ngrad_norm,0,Infinity,\n")
    points = list(points_of(CsvReader(path).read(final=True)))
    assert [(p.metric, p.step, p.wall_time) for p in points] == [
        ("loss", 0, 1700000000.5),
        ("loss", 1, None),
        ("grad_norm", 0, None),
    ]
    assert math.isnan(points[1].value) and points[2].value == math.inf


def test_a_field_beyond_the_csv_limit_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,loss,note\n0,2.5," + "x" * 200_000 + "\n")
    with pytest.raises(FormatError, match=r"metrics.csv:2: not a CSV row \(field larger than field limit"):
        list(CsvReader(path).read(final=True))


def test_a_csv_with_more_columns_than_a_run_may_have_metrics_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    columns = 100_000
    path.write_text(
        "step," + ",".join(f"m{i}" for i in range(columns)) + "\n0," + ",".join("1" for _ in range(columns)) + "\n"
    )
    started = time.perf_counter()
    with pytest.raises(FormatError, match=f"100,000 metric columns, more than the {MAX_METRICS:,} one run may have"):
        list(CsvReader(path).read(final=True))
    assert time.perf_counter() - started < 5


def test_deep_json_is_a_format_error_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"step": 1, "loss": 2.0}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(FormatError, match=r"log\.jsonl:2: JSON nested too deeply"):
        list(JsonlReader(path).read(final=True))


def test_a_jsonl_line_naming_more_metrics_than_a_run_may_have_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps({"step": 0, **{f"m{i}": 1.0 for i in range(MAX_METRICS + 5)}}) + "\n")
    with pytest.raises(FormatError, match="more than 10,000 metrics"):
        list(JsonlReader(path).read(final=True))
    lenient = JsonlReader(path, strict=False)
    (entry,) = lenient.read()
    assert len(entry.values) == MAX_METRICS and "more than 10,000 metrics" in lenient.warnings[0]


def test_a_bad_line_of_a_followed_jsonl_is_said_once_and_passed_over(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"step": 0, "loss": 2.0}\n{torn\n{"step": 1, "loss": 1.9}\n')
    reader = JsonlReader(path, strict=False)
    assert [e.step for e in reader.read()] == [0, 1] and reader.warnings == [
        f"{path}:2: not JSON (Expecting property name enclosed in double quotes)"
    ]
