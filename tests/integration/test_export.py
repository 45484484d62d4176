"""Export through the real server on SQLite and Postgres: CSV and Parquet, streamed."""

from __future__ import annotations

import csv
import io
import math

import httpx
import pyarrow.parquet as pq
import pytest

from tests.conftest import new_run_id

LOSS = [2.5, "NaN", "Infinity", "-Infinity", 1e-300]


@pytest.fixture
def run_id(api: httpx.Client) -> str:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "export"}).raise_for_status()
    batch = {
        "metrics": {
            "loss": {"steps": [0, 1, 2, 3, 4], "values": LOSS},
            "lr": {"steps": list(range(120_000)), "values": [0.1] * 120_000},
        },
        "step_times": {"steps": [0, 1], "times": [100.5, 101.5]},
    }
    api.post(f"/runs/{run_id}/points", json=batch).raise_for_status()
    return run_id


def test_csv_export_of_one_series_keeps_non_finite_values_and_wall_times(api: httpx.Client, run_id: str) -> None:
    answer = api.get(f"/runs/{run_id}/export", params={"format": "csv", "metric": "loss"})
    assert answer.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(answer.text)))
    assert rows[0] == ["metric", "step", "value", "wall_time"]
    assert rows[1:] == [
        ["loss", "0", "2.5", "100.5"],
        ["loss", "1", "NaN", "101.5"],
        ["loss", "2", "Infinity", ""],
        ["loss", "3", "-Infinity", ""],
        ["loss", "4", "1e-300", ""],
    ]


def test_parquet_export_of_a_whole_run_holds_every_point(api: httpx.Client, run_id: str) -> None:
    with api.stream("GET", f"/runs/{run_id}/export", params={"format": "parquet"}) as answer:
        assert answer.headers.get("transfer-encoding") == "chunked"  # streamed, not built whole
        body = b"".join(answer.iter_bytes())
    parquet = pq.ParquetFile(io.BytesIO(body))
    assert parquet.metadata.num_row_groups >= 3  # one per chunk of points
    table = parquet.read().to_pydict()
    assert table["metric"].count("lr") == 120_000 and table["metric"].count("loss") == 5
    loss = [v for m, v in zip(table["metric"], table["value"]) if m == "loss"]
    assert loss[0] == 2.5 and math.isnan(loss[1]) and loss[2:4] == [math.inf, -math.inf]


def test_export_of_an_unknown_metric_is_404(api: httpx.Client, run_id: str) -> None:
    answer = api.get(f"/runs/{run_id}/export", params={"metric": "nothing"})
    assert answer.status_code == 404 and "nothing" in answer.json()["detail"]


@pytest.mark.slow
def test_a_run_of_thousands_of_small_series_exports_every_point_once(api: httpx.Client) -> None:
    """3,000 metrics × 20 points: read across metrics a chunk at a time (60,000 points, past one
    chunk of 50,000), each point once, under its own metric's name, in CSV and Parquet alike."""
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "export"}).raise_for_status()
    batch = {
        "metrics": {
            f"act/{i}": {"steps": list(range(20)), "values": [i + s / 100 for s in range(20)]} for i in range(3_000)
        }
    }
    api.post(f"/runs/{run_id}/points", json=batch, timeout=120).raise_for_status()
    expected = sorted((f"act/{i}", s, i + s / 100) for i in range(3_000) for s in range(20))
    rows = list(csv.DictReader(io.StringIO(api.get(f"/runs/{run_id}/export", timeout=120).text)))
    assert sorted((r["metric"], int(r["step"]), float(r["value"])) for r in rows) == expected
    table = pq.read_table(
        io.BytesIO(api.get(f"/runs/{run_id}/export", params={"format": "parquet"}, timeout=120).content)
    )
    assert sorted(zip(table["metric"].to_pylist(), table["step"].to_pylist(), table["value"].to_pylist())) == expected
    some = api.get(f"/runs/{run_id}/export", params={"metric": ["act/7", "act/2999"], "start": 5, "end": 6}).text
    assert sorted((r["metric"], int(r["step"])) for r in csv.DictReader(io.StringIO(some))) == [
        ("act/2999", 5),
        ("act/2999", 6),
        ("act/7", 5),
        ("act/7", 6),
    ]


def test_parquet_without_pyarrow_is_a_501_naming_the_extra(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyarrow is the `parquet` extra: a service without it says so before any byte is streamed."""
    from holter_server.app import create_app
    from holter_server.services import export
    from holter_server.settings import Settings
    from starlette.testclient import TestClient

    monkeypatch.setattr(export, "parquet_available", lambda: False)  # as in an install without the extra
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'holter.db'}", data_dir=tmp_path, background="off")
    with TestClient(create_app(settings), base_url="http://127.0.0.1:8765") as client:
        created = client.post("/api/v1/runs", json={"project": "p", "id": "r1"})
        assert created.status_code in (200, 201), created.text
        answer = client.get("/api/v1/runs/r1/export", params={"format": "parquet"})
        csv_answer = client.get("/api/v1/runs/r1/export", params={"format": "csv"})
    assert answer.status_code == 501
    assert "pip install 'holter[parquet]'" in answer.json()["detail"]
    assert csv_answer.status_code == 200
