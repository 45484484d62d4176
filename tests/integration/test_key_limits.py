"""One API key has at most `HOLTER_MAX_REQUESTS_PER_KEY` requests under way (issue 47: one key's
flood slowed another project's request from 6 ms to 200 ms): past it, a 429 with Retry-After,
while another key's requests are answered."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import ADMIN_TOKEN, migrated_sqlite, new_run_id
from tests.servers import InProcessServer

LIMIT = 2


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[InProcessServer]:
    settings = {"auth": "on", "admin_token": ADMIN_TOKEN, "max_requests_per_key": LIMIT}
    server = InProcessServer(migrated_sqlite(tmp_path / "limited.db"), settings=settings).start()
    yield server
    server.stop()


def test_a_keys_flood_past_its_limit_gets_429_and_another_key_is_answered(limited: InProcessServer) -> None:
    with limited.api(key=ADMIN_TOKEN) as admin:
        flooder = admin.post("/keys", json={"name": "flood", "scope": "ingest", "project": "flood"}).json()["key"]
        reader = admin.post("/keys", json={"name": "calm", "scope": "read", "project": "calm"}).json()["key"]
        calm_run = new_run_id()
        admin.post("/runs", json={"id": calm_run, "project": "calm"}).raise_for_status()
    flood_run = new_run_id()
    batch = {"metrics": {f"m{i}": {"steps": list(range(20_000)), "values": [1.0] * 20_000} for i in range(10)}}
    with limited.api(key=flooder, timeout=120) as api:
        api.post("/runs", json={"id": flood_run, "project": "flood"}).raise_for_status()
        with ThreadPoolExecutor(12) as pool:
            sent = [pool.submit(api.post, f"/runs/{flood_run}/points", json=batch) for _ in range(12)]
            with limited.api(key=reader) as calm:
                assert calm.get(f"/runs/{calm_run}").status_code == 200
            answers = [future.result() for future in sent]
    statuses = [answer.status_code for answer in answers]
    assert 429 in statuses and 200 in statuses and set(statuses) <= {200, 429}
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert refused.headers["retry-after"] == "1" and "HOLTER_MAX_REQUESTS_PER_KEY" in refused.json()["detail"]
    with limited.api(key=flooder) as api:  # the flood over, the key is answered again
        assert api.post(f"/runs/{flood_run}/heartbeat").status_code == 200
