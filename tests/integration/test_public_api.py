"""`holter.Api()`, wandb's public API shape, reading runs back from a live service."""

from __future__ import annotations

import math
from pathlib import Path

import holter
import pytest

from tests.servers import ServerProcess


def test_scan_history_pages_through_every_point_and_history_downsamples(
    server: ServerProcess, spool_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOLTER_URL", server.url)
    run = holter.init(project="public-api", tags=["read-me"])
    for step in range(2500):
        run.log({"loss": math.nan if step == 1234 else 1.0 / (step + 1)}, step=step)
        if step % 500 == 0:
            run.log({"eval_loss": 2.0 / (step + 1)}, step=step)
    run.finish()
    api = holter.Api()
    read = api.run(run.id)
    rows = list(read.scan_history(keys=["loss", "eval_loss"], page_size=1000))
    assert [row["_step"] for row in rows] == list(range(2500))
    assert math.isnan(rows[1234]["loss"]) and rows[10]["loss"] == pytest.approx(1 / 11)
    assert [row["_step"] for row in rows if "eval_loss" in row] == [0, 500, 1000, 1500, 2000]
    sampled = read.history(keys=["loss"], samples=100, pandas=False)
    assert 50 <= len(sampled) <= 200 and sampled[0] == {"_step": 0, "loss": 1.0}
    assert read.state == "finished" and read.tags == ["read-me"] and read.url == f"{server.url}/runs/{run.id}"
    assert [r.id for r in api.runs("public-api", filters={"tags": {"$in": ["read-me"]}, "state": "finished"})] == [
        run.id
    ]


def test_a_missing_run_is_a_comm_error(server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLTER_URL", server.url)
    with pytest.raises(holter.errors.CommError, match="no-such-run"):
        holter.Api().run("p/no-such-run")
