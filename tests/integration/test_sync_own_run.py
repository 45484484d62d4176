"""`holter sync` sends a spool folder with the syncing person's key, so it sends only what the
folder's run would send itself: its registration, points, summary, alerts and finish. A folder
planted with other requests (a global channel, another run's finish, another run's
registration) has those set aside unsent and said. A real server with auth on, an admin key,
the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from holter.sender import encode_entry
from holter.spool import Spool

from tests.conftest import ADMIN_TOKEN, new_run_id
from tests.servers import ServerProcess


def plant(spool: Spool, path: str, body: dict) -> None:
    spool.put(encode_entry(path, json.dumps(body).encode()))


def test_sync_sends_the_folders_own_run_and_sets_aside_the_rest(secured: ServerProcess, tmp_path: Path) -> None:
    mine, victim = new_run_id(), new_run_id()
    with secured.api(key=ADMIN_TOKEN) as admin:
        admin.post("/runs", json={"id": victim, "project": "sync-victim"}).raise_for_status()
        channels_before = len(admin.get("/channels").json())
    spool = Spool(tmp_path / "spool", mine)
    plant(spool, "/api/v1/runs", {"id": mine, "project": "sync-mine"})
    plant(spool, f"/api/v1/runs/{mine}/points", {"metrics": {"loss": {"steps": [0, 1], "values": [2.0, 1.5]}}})
    plant(spool, "/api/v1/channels", {"name": "planted", "kind": "webhook", "target": "http://127.0.0.1:9/x"})
    plant(spool, f"/api/v1/runs/{victim}/finish", {"status": "crashed"})
    plant(spool, "/api/v1/runs", {"id": victim, "project": "sync-victim", "tags": ["planted"]})
    plant(spool, f"/api/v1/runs/{mine}/../{victim}/finish", {"status": "crashed"})
    plant(spool, f"/api/v1/runs/{mine}/finish", {"status": "finished"})

    synced = subprocess.run(
        [sys.executable, "-m", "holter.cli", "sync", str(spool.path), "--url", secured.url],
        env={**os.environ, "HOLTER_API_KEY": ADMIN_TOKEN},
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    with secured.api(key=ADMIN_TOKEN) as admin:
        assert len(admin.get("/channels").json()) == channels_before
        victim_run = admin.get(f"/runs/{victim}").json()
        assert (victim_run["status"], victim_run["tags"]) == ("running", [])
        own = admin.get(f"/runs/{mine}").json()
        assert own["status"] == "finished" and own["metrics"][0]["count"] == 2
    assert synced.returncode == 0, synced.stderr
    assert "4 request(s) are not run" in synced.stderr
    assert len(list((spool.path / "rejected").iterdir())) == 4
    assert not list(spool.path.glob("*.json"))


def test_a_folder_named_for_no_run_sends_nothing(server: ServerProcess, tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool", "bad name")
    plant(spool, "/api/v1/runs", {"id": "bad name", "project": "sync"})
    synced = subprocess.run(
        [sys.executable, "-m", "holter.cli", "sync", str(spool.path), "--url", server.url],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "1 request(s) are not run 'bad name'" in synced.stderr
    assert len(list((spool.path / "rejected").iterdir())) == 1


def test_an_offline_ranks_folder_is_sent_into_its_jobs_run(server: ServerProcess, tmp_path: Path) -> None:
    # each rank of a job spools apart, rank r > 0 in `<run id>@rank<r>`: sync sends it into the run
    run_id = new_run_id()
    spool = Spool(tmp_path / "spool", f"{run_id}@rank2")
    rank = {"rank": 2, "world_size": 4, "host": "node-1"}
    plant(spool, "/api/v1/runs", {"id": run_id, "project": "sync-ranks", "rank": rank})
    plant(
        spool,
        f"/api/v1/runs/{run_id}/points",
        {"metrics": {"holter/rank/2/loss": {"steps": [0, 1], "values": [2.0, 1.5]}}},
    )
    plant(spool, f"/api/v1/runs/{run_id}/finish", {"status": "finished", "rank": 2})
    synced = subprocess.run(
        [sys.executable, "-m", "holter.cli", "sync", str(spool.path), "--url", server.url],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert synced.returncode == 0, synced.stderr
    with server.api() as api:
        (joined,) = api.get(f"/runs/{run_id}/ranks").json()["data"]
        assert (joined["rank"], joined["status"], joined["host"]) == (2, "finished", "node-1")
        points = api.get(f"/runs/{run_id}/metrics/holter/rank/2/loss/points").json()
        assert points["steps"] == [0, 1]
        assert api.get(f"/runs/{run_id}").json()["status"] == "running"  # rank 2 of 4 ended only its part
