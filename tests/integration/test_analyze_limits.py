"""`POST /runs/{id}/analyze` knows its cost before it starts (the metrics and their stored
points) and refuses more than its caps with a 413 naming them, before reading a point; the
metrics to analyse can be named instead. A real server on SQLite and Postgres."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.conftest import new_run_id, own_store
from tests.servers import InProcessServer


def run_with_metrics(api: httpx.Client, count: int, points: int = 3) -> str:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "analyze-limits"}).raise_for_status()
    batch = {"metrics": {f"loss/{i}": {"steps": list(range(points)), "values": [1.0] * points} for i in range(count)}}
    api.post(f"/runs/{run_id}/points", json=batch, timeout=120).raise_for_status()
    return run_id


def test_a_run_with_more_metrics_than_the_cap_is_refused_before_any_is_read(api: httpx.Client) -> None:
    run_id = run_with_metrics(api, 1_001)
    answer = api.post(f"/runs/{run_id}/analyze", timeout=30)
    assert answer.status_code == 413
    assert "1,001 metrics" in answer.json()["detail"] and "HOLTER_MAX_ANALYZE_METRICS" in answer.json()["detail"]


def test_the_metrics_to_analyse_can_be_named(api: httpx.Client) -> None:
    run_id = run_with_metrics(api, 1_001)
    answer = api.post(f"/runs/{run_id}/analyze", params={"metric": ["loss/3", "loss/1000"]})
    assert answer.status_code == 200
    assert sorted(series["metric"] for series in answer.json()["series"]) == ["loss/1000", "loss/3"]
    missing = api.post(f"/runs/{run_id}/analyze", params={"metric": ["loss/3", "nope"]})
    assert missing.status_code == 404 and "'nope'" in missing.json()["detail"]


def test_a_run_with_more_points_than_the_cap_is_refused(store_url: str, tmp_path: Path) -> None:
    server = InProcessServer(own_store(store_url, tmp_path), settings={"max_analyze_points": 5000}).start()
    try:
        with server.api() as api:
            run_id = run_with_metrics(api, 2, points=3_000)
            answer = api.post(f"/runs/{run_id}/analyze")
            assert answer.status_code == 413 and "HOLTER_MAX_ANALYZE_POINTS" in answer.json()["detail"]
            assert api.post(f"/runs/{run_id}/analyze", params={"metric": "loss/0"}).status_code == 200
    finally:
        server.stop()
