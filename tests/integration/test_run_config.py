"""`Run.update_config` merges into the config the service stores (wandb's `config.update`)."""

from __future__ import annotations

from pathlib import Path

import httpx

import holter
from tests.servers import ServerProcess


def test_update_config_merges_into_the_stored_config(server: ServerProcess, spool_dir: Path) -> None:
    run = holter.init(project="config", name="merge", config={"lr": 0.1, "layers": 2}, url=server.url)
    run.log({"loss": 1.0}, step=0)
    run.update_config({"lr": 0.05, "batch_size": 32})
    run.log({"loss": 0.9}, step=1)
    run.finish()
    stored = httpx.get(f"{server.url}/api/v1/runs/{run.id}").json()
    assert stored["config"] == {"lr": 0.05, "layers": 2, "batch_size": 32} == run.config
    assert stored["status"] == "finished" and stored["name"] == "merge"
    assert httpx.get(f"{server.url}/api/v1/runs/{run.id}/metrics/loss/points").json()["steps"] == [0, 1]
