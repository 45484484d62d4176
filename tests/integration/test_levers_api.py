"""The lever finder over runs streamed into the real service, on SQLite and Postgres."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import holter
import httpx

from tests.integration.test_live_detection import settled_events
from tests.servers import InProcessServer, ServerProcess


def stream_runs(server: ServerProcess, project: str, periods: dict[int, int], seeds: list[int]) -> None:
    """One run per config; logprob_mismatch spikes every `period` steps."""
    rng = random.Random(0)
    for (rollouts, period), seed in zip(periods.items(), seeds):
        run = holter.init(project=project, config={"rollouts_num": rollouts, "seed": seed, "lr": 1e-6}, url=server.url)
        for step in range(900):
            run.log(
                {
                    "logprob_mismatch": 0.002
                    + abs(rng.gauss(0, 0.0005))
                    + (0.1 if step % period == 0 and step >= 100 else 0.0)
                },
                step=step,
            )
        run.finish()
        settled_events(server.url, run.id)


def test_the_planted_lever_is_recovered(server: ServerProcess, api: httpx.Client, spool_dir: Path) -> None:
    project = f"levers-{uuid.uuid4().hex[:6]}"
    stream_runs(server, project, {8: 16, 16: 32, 32: 64, 64: 128}, seeds=[3, 1, 4, 2])
    report = api.get("/levers", params={"project": project}).json()
    assert report["runs"] == 4 and "rollouts_num" in report["varying_keys"]
    top = report["candidates"][0]
    assert (top["key"], top["feature"], top["relation"]) == ("rollouts_num", "period", "proportional")
    assert "proportional to rollouts_num" in top["evidence"]


def test_runs_without_a_lever_get_none(server: ServerProcess, api: httpx.Client, spool_dir: Path) -> None:
    project = f"levers-{uuid.uuid4().hex[:6]}"
    stream_runs(server, project, {8: 40, 16: 40, 32: 40}, seeds=[1, 2, 3])
    report = api.get("/levers", params={"project": project}).json()
    assert report["candidates"] == [] and report["note"]


def test_a_lever_in_a_nested_config_is_found_by_its_dotted_key(
    server: ServerProcess, api: httpx.Client, spool_dir: Path
) -> None:
    # Lightning-style nested hyperparameters: the lever sits at rollout.num, beside optimizer.betas (a list)
    project = f"levers-{uuid.uuid4().hex[:6]}"
    rng = random.Random(0)
    for rollouts, period, beta2 in ((8, 16, 0.95), (16, 32, 0.999), (32, 64, 0.95), (64, 128, 0.999)):
        config = {"optimizer": {"name": "adamw", "betas": [0.9, beta2]}, "rollout": {"num": rollouts}}
        run = holter.init(project=project, config=config, url=server.url)
        for step in range(900):
            run.log(
                {
                    "logprob_mismatch": 0.002
                    + abs(rng.gauss(0, 0.0005))
                    + (0.1 if step % period == 0 and step >= 100 else 0.0)
                },
                step=step,
            )
        run.finish()
        settled_events(server.url, run.id)
    report = api.get("/levers", params={"project": project}).json()
    assert {"rollout.num", "optimizer.betas"} <= set(report["varying_keys"]) and "optimizer.name" not in report[
        "varying_keys"
    ]
    assert report["candidates"][0]["key"] == "rollout.num"


def test_levers_need_a_selection(api: httpx.Client) -> None:
    assert api.get("/levers").status_code == 422


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_configs_of_twelve_thousand_keys_are_refused_before_the_finder_groups_them(
    store_url: str, tmp_path: Path
) -> None:
    """Last round's attack: 12,000 keys that all move together (141 KiB, under the config limit)
    took 66 s and +915 MiB on the API process despite the 10 s limit. Now: a 413 at once.
    (A server process of its own: its memory is what is measured.)"""
    project = f"levers-keys-{uuid.uuid4().hex[:6]}"
    server = ServerProcess(store_url, log_path=tmp_path / "server.log").start()
    try:
        with server.api() as api:
            for i in range(1, 4):
                config = {f"k{j}": i * (j + 1) for j in range(12_000)}
                api.post("/runs", json={"project": project, "config": config}).raise_for_status()
            assert server.process is not None
            before = rss_mib(server.process.pid)
            answer = api.get("/levers", params={"project": project}, timeout=20)
            assert answer.status_code == 413
            assert "HOLTER_MAX_LEVER_KEYS" in answer.json()["detail"]
            assert rss_mib(server.process.pid) - before < 150
    finally:
        server.stop()


def test_configs_larger_together_than_the_limit_are_refused_unread(store_url: str, tmp_path: Path) -> None:
    from tests.conftest import own_store

    server = InProcessServer(own_store(store_url, tmp_path), settings={"max_lever_config_bytes": 100_000}).start()
    try:
        with server.api() as api:
            for i in range(3):
                api.post("/runs", json={"project": "big", "config": {"notes": "x" * 40_000, "i": i}}).raise_for_status()
            answer = api.get("/levers", params={"project": "big"})
            assert answer.status_code == 413
            assert "HOLTER_MAX_LEVER_CONFIG_BYTES" in answer.json()["detail"]
            two = [run["id"] for run in api.get("/runs", params={"project": "big"}).json()["data"][:2]]
            assert api.get("/levers", params={"run_id": two}).status_code == 200
    finally:
        server.stop()
