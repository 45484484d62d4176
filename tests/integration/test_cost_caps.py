"""Analysis routes have cost caps, each a clear 413 naming its setting (on a real server with low caps)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import new_run_id
from tests.servers import ServerProcess

CAPS = {"HOLTER_MAX_COMPARE_POINTS": "1000", "HOLTER_MAX_FAMILY_CELLS": "1000"}


@pytest.fixture(scope="module")
def capped(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    server = ServerProcess(store_url, env=CAPS, log_path=tmp_path_factory.mktemp("caps") / "server.log").start()
    with server.api() as api:
        yield api
    server.stop()


def logged(api: httpx.Client, metrics: dict[str, int]) -> str:
    run_id = new_run_id()
    api.post("/runs", json={"id": run_id, "project": "caps"}).raise_for_status()
    batch = {"metrics": {name: {"steps": list(range(n)), "values": [1.0 + i / n for i in range(n)]} for name, n in metrics.items()}}
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
