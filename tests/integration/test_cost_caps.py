"""Analysis routes have cost caps, each a clear 413 naming its setting (on a real server with low caps)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import new_run_id
from tests.servers import InProcessServer
from tests.waiting import wait_until

CAPS: dict[str, object] = {
    "max_compare_points": 1000,
    "max_family_cells": 1000,
    "max_lever_pairs": 20,
    "max_report_events": 5,
    "max_group_points": 1000,
}


@pytest.fixture(scope="module")
def capped(store_url: str) -> Iterator[httpx.Client]:
    server = InProcessServer(store_url, settings=CAPS).start()
    with server.api() as api:
        yield api
    server.stop()


def logged(api: httpx.Client, metrics: dict[str, int]) -> str:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "caps"}).raise_for_status()
    batch = {
        "metrics": {
            name: {"steps": list(range(n)), "values": [1.0 + i / n for i in range(n)]} for name, n in metrics.items()
        }
    }
    api.post(f"/runs/{run_id}/points", json=batch).raise_for_status()
    return run_id


def test_a_comparison_reading_more_points_than_its_cap_is_413(capped: httpx.Client) -> None:
    run, reference = logged(capped, {"loss": 600}), logged(capped, {"loss": 600})
    answer = capped.get(f"/runs/{run}/compare", params={"metric": "loss", "reference": reference})
    assert answer.status_code == 413 and "HOLTER_MAX_COMPARE_POINTS" in answer.json()["detail"]
    small = logged(capped, {"loss": 300})
    assert capped.get(f"/runs/{small}/compare", params={"metric": "loss", "reference": reference}).status_code == 200


def test_a_family_read_of_more_cells_than_its_cap_is_413(capped: httpx.Client) -> None:
    run = logged(capped, {f"act/layer.{i}": 5 for i in range(20)})
    answer = capped.get(f"/runs/{run}/family", params={"prefix": "act/", "max_buckets": 100})
    assert answer.status_code == 413 and "HOLTER_MAX_FAMILY_CELLS" in answer.json()["detail"]
    assert capped.get(f"/runs/{run}/family", params={"prefix": "act/", "max_buckets": 50}).status_code == 200


def test_a_lever_search_over_more_pairs_than_its_cap_is_413(capped: httpx.Client) -> None:
    def project_of_runs(config_keys: int) -> str:
        """Four runs whose configs differ in `config_keys - 1` keys, each with a loss that went NaN."""
        project = f"caps-levers-{uuid.uuid4().hex[:6]}"
        run_ids = []
        for i in range(4):
            run_ids.append(run_id := new_run_id())
            config = {f"key{k}": i * k for k in range(config_keys)}
            capped.post("/runs", json={"id": run_id, "project": project, "config": config}).raise_for_status()
            values = [2.0 - step / 100 if step < 50 + i else "NaN" for step in range(80)]
            capped.post(
                f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": list(range(80)), "values": values}}}
            ).raise_for_status()
        wait_until(lambda: all(capped.get(f"/runs/{r}/events").json()["count"] for r in run_ids), timeout=60)
        return project

    answer = capped.get("/levers", params={"project": project_of_runs(config_keys=30)})
    assert answer.status_code == 413 and "HOLTER_MAX_LEVER_PAIRS" in answer.json()["detail"]
    assert capped.get("/levers", params={"project": project_of_runs(config_keys=3)}).status_code == 200


def test_a_report_marks_at_most_its_cap_of_events_and_lists_them_all(capped: httpx.Client) -> None:
    run_id = new_run_id()
    capped.post("/runs", json={"id": run_id, "project": "caps"}).raise_for_status()
    spikes = [97, 211, 340, 455, 601, 703, 866, 941, 1090, 1187, 1244, 1351]  # one-step spikes, spaced irregularly
    values = [20.0 if step in spikes else 2.0 + (step % 7) * 0.001 for step in range(1400)]
    capped.post(
        f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": list(range(1400)), "values": values}}}
    ).raise_for_status()
    capped.post(f"/runs/{run_id}/finish", json={"status": "finished"}).raise_for_status()
    events = wait_until(
        lambda: (found := capped.get(f"/runs/{run_id}/events").json()["data"]) and len(found) >= 10 and found,
        timeout=60,
    )
    html = capped.get(f"/runs/{run_id}/report.html").text
    assert html.count('"type":"rect"') + html.count('"type":"line"') <= 5
    assert all(event["summary"] in html for event in events)


def test_a_seed_group_holding_more_points_than_its_cap_is_413_and_the_report_says_why_it_leaves_it_out(
    capped: httpx.Client,
) -> None:
    def seed_runs(points: int) -> list[str]:
        """Four finished runs of one config, seeds 0-3, each with `points` eval losses."""
        project, run_ids = f"caps-seeds-{uuid.uuid4().hex[:6]}", []
        for seed in range(4):
            run_ids.append(run_id := new_run_id())
            capped.post(
                "/runs", json={"id": run_id, "project": project, "config": {"lr": 1e-3, "seed": seed}}
            ).raise_for_status()
            values = [3.0 - step / points + seed * 0.01 for step in range(points)]
            capped.post(
                f"/runs/{run_id}/points",
                json={"metrics": {"eval_loss": {"steps": list(range(points)), "values": values}}},
            ).raise_for_status()
            capped.post(f"/runs/{run_id}/finish", json={"status": "finished"}).raise_for_status()
        return run_ids

    big = seed_runs(points=400)  # 1,600 points in the group, 1,200 in any run's siblings
    answer = capped.get("/compare", params={"metric": "eval_loss", "a": f"group:{big[0]}", "b": f"run:{big[1]}"})
    assert answer.status_code == 413 and "HOLTER_MAX_GROUP_POINTS" in answer.json()["detail"]
    report = capped.get(f"/runs/{big[0]}/report.html")
    assert report.status_code == 200 and "Not compared:" in report.text and "HOLTER_MAX_GROUP_POINTS" in report.text
    small = seed_runs(points=100)
    assert (
        capped.get(
            "/compare", params={"metric": "eval_loss", "a": f"group:{small[0]}", "b": f"run:{small[1]}"}
        ).status_code
        == 200
    )
    assert "Not compared:" not in capped.get(f"/runs/{small[0]}/report.html").text
