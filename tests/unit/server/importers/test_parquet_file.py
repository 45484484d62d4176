"""Parquet files of metrics: long form (Holter's own export) and wide."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from holter_server.importers import ImportFormatError, detect_format, open_source, read_series

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def test_long_form_as_the_export_writes_it(tmp_path: Path) -> None:
    path = tmp_path / "run.parquet"
    table = pa.table(
        {
            "metric": ["loss", "loss", "grad_norm"],
            "step": pa.array([0, 1, 0], pa.int64()),
            "value": [2.5, math.nan, math.inf],
            "wall_time": [1_700_000_000.5, None, 1_700_000_001.0],
        }
    )
    pq.write_table(table, path)
    assert detect_format(path) == "parquet"
    points = list(open_source(path).points)
    assert [(p.metric, p.step, p.wall_time) for p in points] == [
        ("loss", 0, 1_700_000_000.5),
        ("loss", 1, None),
        ("grad_norm", 0, 1_700_000_001.0),
    ]
    assert math.isnan(points[1].value) and points[2].value == math.inf


def test_wide_form_a_column_per_metric(tmp_path: Path) -> None:
    path = tmp_path / "history.parquet"
    pq.write_table(pa.table({"step": [0, 1, 2], "loss": [2.0, 1.9, None], "note": ["a", "b", "c"]}), path)
    series = read_series(path)
    assert list(series) == ["loss"] and series["loss"].steps.tolist() == [0, 1]


def test_a_file_that_is_not_parquet_says_so(tmp_path: Path) -> None:
    path = tmp_path / "run.parquet"
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(ImportFormatError, match="not a readable Parquet file"):
        list(open_source(path).points)
