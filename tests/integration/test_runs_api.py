"""Runs through the real server, on SQLite and Postgres."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.conftest import new_run_id


def test_create_run_then_read_it_back(api: httpx.Client) -> None:
    run_id = new_run_id()
    created = api.post(
        "/runs",
        json={
            "id": run_id,
            "project": "vision",
            "name": "baseline",
            "config": {"lr": 0.001, "layers": 12},
            "tags": ["a"],
        },
    )
    assert created.status_code == 200
    assert created.json()["resumed"] is False
    run = api.get(f"/runs/{run_id}").json()
    assert (run["project"], run["name"], run["status"], run["tags"]) == ("vision", "baseline", "running", ["a"])
    assert run["config"] == {"lr": 0.001, "layers": 12}
    assert run["metrics"] == []
    assert run["created_at"].endswith(("+00:00", "Z"))


def test_create_without_id_gets_one_from_the_service(api: httpx.Client) -> None:
    created = api.post("/runs", json={"project": "p"}).json()
    assert api.get(f"/runs/{created['id']}").status_code == 200


def test_create_with_existing_id_resumes_and_merges_config(api: httpx.Client) -> None:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "p", "config": {"lr": 1, "seed": 3}, "tags": ["x"]})
    api.post(f"/runs/{run_id}/finish", json={"status": "crashed"})
    resumed = api.post("/runs", json={"id": run_id, "project": "p", "config": {"lr": 2}, "tags": ["y"]}).json()
    assert resumed["resumed"] is True
    assert resumed["status"] == "running"
    assert resumed["config"] == {"lr": 2, "seed": 3}
    assert resumed["tags"] == ["x", "y"]


def test_create_with_existing_id_in_another_project_is_409(api: httpx.Client) -> None:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "p"})
    answer = api.post("/runs", json={"id": run_id, "project": "q"})
    assert answer.status_code == 409
    assert "already taken by another project" in answer.json()["detail"] and "'p'" not in answer.json()["detail"]


def test_create_with_bad_id_is_422(api: httpx.Client) -> None:
    assert api.post("/runs", json={"id": "../etc", "project": "p"}).status_code == 422
    assert api.post("/runs", json={"id": "x" * 65, "project": "p"}).status_code == 422


def test_list_runs_filters_by_project_and_status(api: httpx.Client) -> None:
    project = new_run_id()
    ids = [new_run_id() for _ in range(3)]
    for run_id in ids:
        api.post("/runs", json={"id": run_id, "project": project})
    api.post(f"/runs/{ids[0]}/finish", json={"status": "finished"})
    every = api.get("/runs", params={"project": project}).json()
    assert every["count"] == 3
    assert {run["id"] for run in every["data"]} == set(ids)
    finished = api.get("/runs", params={"project": project, "status": "finished"}).json()
    assert [run["id"] for run in finished["data"]] == [ids[0]]
    page = api.get("/runs", params={"project": project, "limit": 2}).json()
    assert (page["count"], len(page["data"])) == (3, 2)


def test_list_runs_with_unknown_status_is_422(api: httpx.Client) -> None:
    assert api.get("/runs", params={"status": "exploded"}).status_code == 422


def test_finish_marks_the_run_crashed_when_told(api: httpx.Client) -> None:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "p"})
    finished = api.post(f"/runs/{run_id}/finish", json={"status": "crashed"}).json()
    assert finished["status"] == "crashed"
    assert finished["finished_at"] is not None


def test_heartbeat_moves_the_heartbeat_time(api: httpx.Client) -> None:
    run_id = new_run_id()
    before = api.post("/runs", json={"id": run_id, "project": "p"}).json()["heartbeat_at"]
    assert api.post(f"/runs/{run_id}/heartbeat").json() == {"status": "ok"}
    assert api.get(f"/runs/{run_id}").json()["heartbeat_at"] > before


def test_unknown_run_is_404_on_every_run_route(api: httpx.Client) -> None:
    for method, path in [
        ("GET", "/runs/nope"),
        ("POST", "/runs/nope/heartbeat"),
        ("POST", "/runs/nope/finish"),
        ("GET", "/runs/nope/metrics/loss/points"),
    ]:
        answer = api.request(method, path, json={} if method == "POST" else None)
        assert answer.status_code == 404, (method, path)
        assert "nope" in answer.json()["detail"]


def test_health_names_the_store(api: httpx.Client, store_url: str) -> None:
    health = api.get("/health").json()
    assert health["status"] == "ok"
    assert health["database"] == ("sqlite" if store_url.startswith("sqlite") else "postgresql")


def test_the_runs_list_carries_chosen_metrics_last_and_best_and_a_loss_sparkline(api: httpx.Client) -> None:
    run_id = f"tab{uuid.uuid4().hex[:10]}"
    project = f"table-{uuid.uuid4().hex[:6]}"
    api.post("/runs", json={"id": run_id, "project": project}).raise_for_status()
    steps = list(range(5000))
    loss = [3.0 - s / 2500 if s != 4000 else float("nan") for s in steps]  # best 1.0004 at step 4999, a NaN left out
    api.post(
        f"/runs/{run_id}/points",
        json={
            "metrics": {
                "loss": {"steps": steps, "values": [v if v == v else "NaN" for v in loss]},
                "reward": {"steps": [0, 1, 2], "values": [0.1, 0.9, 0.3]},
            }
        },
    ).raise_for_status()
    answer = api.get(
        "/runs",
        params=[
            ("project", project),
            ("metric", "loss"),
            ("metric", "reward"),
            ("metric", "absent"),
            ("sparkline_kind", "loss"),
            ("names", "true"),
        ],
    ).json()
    (run,) = answer["data"]
    assert (
        run["columns"]["loss"]["best"] == pytest.approx(3.0 - 4999 / 2500)
        and run["columns"]["loss"]["best_step"] == 4999
    )
    assert run["columns"]["reward"] == {"kind": "reward", "last": 0.3, "best": 0.9, "best_step": 1}
    assert "absent" not in run["columns"]
    spark = run["sparkline"]
    assert spark["metric"] == "loss" and 10 < len(spark["values"]) <= 48 and spark["values"][0] == 3.0
    assert answer["metric_names"] == ["loss", "reward"]
    plain = api.get("/runs", params={"project": project}).json()["data"][0]
    assert plain["columns"] is None and plain["sparkline"] is None


def test_a_tag_filter_matches_whole_tags_only(api: httpx.Client) -> None:
    # issue 47: ?tag=y also matched a run tagged x"y (the JSON text holds "y" inside its element)
    project = f"tags-{uuid.uuid4().hex[:8]}"
    for tags in (['x"y'], ["y"], ["a", "y", "b"], ["ya"], ["a", 'y"'], ["y%"], []):
        api.post("/runs", json={"project": project, "tags": tags}).raise_for_status()
    found = api.get("/runs", params={"project": project, "tag": "y"}).json()["data"]
    assert sorted(tuple(run["tags"]) for run in found) == [("a", "y", "b"), ("y",)]
    assert [run["tags"] for run in api.get("/runs", params={"project": project, "tag": "y%"}).json()["data"]] == [
        ["y%"]
    ]
    assert [run["tags"] for run in api.get("/runs", params={"project": project, "tag": 'x"y'}).json()["data"]] == [
        ['x"y']
    ]
