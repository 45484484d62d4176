"""The points wire format through the real server, on SQLite and Postgres."""

from __future__ import annotations

import math

import httpx
import msgpack
import pytest

from tests.conftest import new_run_id


@pytest.fixture
def run_id(api: httpx.Client) -> str:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "points"}).raise_for_status()
    return run_id


def read(api: httpx.Client, run_id: str, metric: str, **params: int) -> dict:
    answer = api.get(f"/runs/{run_id}/metrics/{metric}/points", params=params)
    answer.raise_for_status()
    return answer.json()


def test_json_batch_round_trips_nan_and_infinities_exactly(api: httpx.Client, run_id: str) -> None:
    values = [2.31, "NaN", "Infinity", "-Infinity", 1e-300, -0.5]
    stored = api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [0, 1, 2, 3, 4, 5], "values": values}}})
    assert stored.json() == {"received": 6, "stored": 6, "duplicates": 0}
    assert read(api, run_id, "loss")["values"] == values


def test_bare_nan_tokens_from_python_json_are_accepted(api: httpx.Client, run_id: str) -> None:
    body = b'{"metrics": {"loss": {"steps": [0, 1], "values": [NaN, -Infinity]}}}'
    assert api.post(f"/runs/{run_id}/points", content=body, headers={"content-type": "application/json"}).status_code == 200
    assert read(api, run_id, "loss")["values"] == ["NaN", "-Infinity"]


def test_msgpack_batch_and_msgpack_read_carry_floats_natively(api: httpx.Client, run_id: str) -> None:
    body = msgpack.packb({"metrics": {"grad_norm": {"steps": [10, 20, 30], "values": [0.8, math.nan, math.inf], "times": [1.5, 2.5, 3.5]}}})
    stored = api.post(f"/runs/{run_id}/points", content=body, headers={"content-type": "application/msgpack"})
    assert stored.json()["stored"] == 3
    answer = api.get(f"/runs/{run_id}/metrics/grad_norm/points", headers={"accept": "application/msgpack"})
    assert answer.headers["content-type"] == "application/msgpack"
    series = msgpack.unpackb(answer.content)
    assert series["steps"] == [10, 20, 30]
    assert series["values"][0] == 0.8 and math.isnan(series["values"][1]) and series["values"][2] == math.inf
    assert series["times"] == [1.5, 2.5, 3.5]


def test_step_times_give_wall_times_to_metrics_without_their_own(api: httpx.Client, run_id: str) -> None:
    batch = {
        "metrics": {"loss": {"steps": [1, 2], "values": [1.0, 2.0]}, "lr": {"steps": [2], "values": [0.1], "times": [99.0]}},
        "step_times": {"steps": [1, 2], "times": [10.5, 11.5]},
    }
    api.post(f"/runs/{run_id}/points", json=batch).raise_for_status()
    assert read(api, run_id, "loss")["times"] == [10.5, 11.5]
    assert read(api, run_id, "lr")["times"] == [99.0]


def test_resent_batch_stores_nothing_twice(api: httpx.Client, run_id: str) -> None:
    batch = {"metrics": {"loss": {"steps": list(range(100)), "values": [float(i) for i in range(100)]}, "lr": {"steps": [0], "values": [0.1]}}}
    assert api.post(f"/runs/{run_id}/points", json=batch).json()["stored"] == 101
    assert api.post(f"/runs/{run_id}/points", json=batch).json() == {"received": 101, "stored": 0, "duplicates": 101}
    assert len(read(api, run_id, "loss")["steps"]) == 100
    metrics = {m["name"]: m for m in api.get(f"/runs/{run_id}").json()["metrics"]}
    assert metrics["loss"]["count"] == 100


def test_same_step_with_another_value_keeps_the_first(api: httpx.Client, run_id: str) -> None:
    api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [5], "values": [1.0]}}})
    again = api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [5, 6], "values": [9.0, 2.0]}}}).json()
    assert again == {"received": 2, "stored": 1, "duplicates": 1}
    assert read(api, run_id, "loss")["values"] == [1.0, 2.0]


def test_run_summary_tracks_counts_and_latest_values(api: httpx.Client, run_id: str) -> None:
    api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [3, 4], "values": [3.0, 4.0]}}})
    api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": [1], "values": [1.0]}}})  # late arrival
    run = api.get(f"/runs/{run_id}").json()
    assert run["last_step"] == 4
    assert run["metrics"] == [{"name": "loss", "count": 3, "first_step": 1, "last_step": 4, "last_value": 4.0}]


def test_range_read_honours_start_end_and_limit(api: httpx.Client, run_id: str) -> None:
    api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": list(range(0, 1000, 10)), "values": list(range(100))}}})
    window = read(api, run_id, "loss", start=100, end=200)
    assert window["steps"] == list(range(100, 201, 10))
    limited = read(api, run_id, "loss", start=100, limit=3)
    assert limited["steps"] == [100, 110, 120] and limited["truncated"] is True


def test_metric_names_with_slashes_are_readable(api: httpx.Client, run_id: str) -> None:
    api.post(f"/runs/{run_id}/points", json={"metrics": {"act_norm/layer.3": {"steps": [1], "values": [2.0]}}})
    assert read(api, run_id, "act_norm/layer.3")["values"] == [2.0]


def test_unknown_metric_read_is_404(api: httpx.Client, run_id: str) -> None:
    answer = api.get(f"/runs/{run_id}/metrics/nothing/points")
    assert answer.status_code == 404 and "nothing" in answer.json()["detail"]


def test_points_for_an_unknown_run_are_404_and_store_nothing(api: httpx.Client) -> None:
    answer = api.post("/runs/ghost-run/points", json={"metrics": {"loss": {"steps": [1], "values": [1.0]}}})
    assert answer.status_code == 404
    assert "ghost-run" in answer.json()["detail"]
    assert api.get("/runs/ghost-run").status_code == 404


BAD_BATCHES = {
    "malformed JSON": (b'{"metrics": {"loss": ', 400, "malformed JSON"),
    "empty body": (b"", 400, "empty"),
    "non-integer step": (b'{"metrics": {"loss": {"steps": [1.5], "values": [1]}}}', 422, "valid integer"),
    "string step": (b'{"metrics": {"loss": {"steps": ["7"], "values": [1]}}}', 422, "valid integer"),
    "negative step": (b'{"metrics": {"loss": {"steps": [-1], "values": [1]}}}', 422, "greater than or equal"),
    "lengths differ": (b'{"metrics": {"loss": {"steps": [1, 2], "values": [1]}}}', 422, "values has 1"),
    "value not a number": (b'{"metrics": {"loss": {"steps": [1], "values": ["abc"]}}}', 422, "number"),
    "unknown field": (b'{"metrics": {}, "extra": 1}', 422, "Extra inputs"),
    "bad metric name": (b'{"metrics": {"bad\\nname": {"steps": [1], "values": [1]}}}', 422, "pattern"),
}


@pytest.mark.parametrize("body,status,says", BAD_BATCHES.values(), ids=BAD_BATCHES.keys())
def test_bad_batch_gets_a_clear_4xx_and_disturbs_nothing(api: httpx.Client, run_id: str, body: bytes, status: int, says: str) -> None:
    good = {"metrics": {"loss": {"steps": [0, 1], "values": [1.0, 2.0]}}}
    api.post(f"/runs/{run_id}/points", json=good).raise_for_status()
    answer = api.post(f"/runs/{run_id}/points", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == status
    assert says in str(answer.json()["detail"])
    assert read(api, run_id, "loss")["values"] == [1.0, 2.0]
    assert [m["count"] for m in api.get(f"/runs/{run_id}").json()["metrics"]] == [2]


def test_malformed_msgpack_is_400(api: httpx.Client, run_id: str) -> None:
    answer = api.post(f"/runs/{run_id}/points", content=b"\xc1\xc1", headers={"content-type": "application/msgpack"})
    assert answer.status_code == 400 and "msgpack" in answer.json()["detail"]


def test_batch_over_the_point_limit_is_413_and_stores_nothing(api: httpx.Client, run_id: str) -> None:
    steps = list(range(200_001))  # the test server allows 200,000 points per batch
    answer = api.post(f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": steps, "values": [0.0] * len(steps)}}})
    assert answer.status_code == 413
    assert "200000" in answer.json()["detail"]
    assert api.get(f"/runs/{run_id}").json()["metrics"] == []


def test_openapi_documents_the_batch_in_json_and_msgpack(api: httpx.Client, server) -> None:
    schema = httpx.get(f"{server.url}/openapi.json").json()
    body = schema["paths"]["/api/v1/runs/{run_id}/points"]["post"]["requestBody"]["content"]
    assert set(body) == {"application/json", "application/msgpack"}
    batch = schema["components"]["schemas"]["PointsBatch"]
    assert "#/components/schemas/SeriesPoints" in str(batch["properties"]["metrics"])
    assert "NaN" in str(schema["components"]["schemas"]["SeriesPoints"])
