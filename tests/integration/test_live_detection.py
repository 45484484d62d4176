"""Live detection in the service, on SQLite and Postgres: events appear within seconds, once
each; they agree with the batch classifier; a restart changes nothing."""

from __future__ import annotations

import math
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

import holter
from holter_server.demo.synthetic import SyntheticRun
from tests.conftest import own_store
from tests.servers import ServerProcess
from tests.waiting import wait_until

STEPS = 3000


def stream(run: holter.Run, synthetic: SyntheticRun, start: int, stop: int) -> None:
    for step in range(start, stop):
        run.log(synthetic.metrics(step), step=step)
        if step % 100 == 0:
            run.log({"eval_loss": synthetic.eval_loss(step)}, step=step)


def events_of(url: str, run_id: str, **params: str) -> list[dict]:
    answer = httpx.get(f"{url}/api/v1/runs/{run_id}/events", params={"limit": 1000, **params})
    answer.raise_for_status()
    return answer.json()["data"]


def settled_events(url: str, run_id: str) -> list[dict]:
    """Events once detection has caught up with every stored point (no change over 2 passes)."""
    previous: list[dict] | None = None
    deadline = time.monotonic() + 60
    while True:
        current = sorted(events_of(url, run_id), key=lambda e: e["id"])
        stamp = [(e["id"], e["updated_at"]) for e in current]
        if previous is not None and stamp == previous and current:
            return current
        assert time.monotonic() < deadline
        previous = stamp
        time.sleep(1.2)


PLANTED = {
    ("spike", "loss"), ("spike", "grad_norm"), ("grad_norm_precursor", "loss"), ("sawtooth", "logprob_mismatch"),
    ("mismatch_off_zero", "logprob_mismatch"), ("level_shift", "tokens_per_s"), ("systems_slowdown", "tokens_per_s"),
    ("divergence", "act_norm/layer.5"), ("activation_growth", "act_norm/layer.5"), ("layer_dominance", "act_norm/layer.5"),
}


def test_planted_problems_are_named_within_seconds_once_each(server: ServerProcess, spool_dir: Path) -> None:
    run = holter.init(project="live", name="planted", url=server.url)
    stream(run, SyntheticRun(STEPS, seed=1), 0, STEPS)
    run.flush()
    logged = time.monotonic()
    wait_until(lambda: PLANTED <= {(e["kind"], e["metric"]) for e in events_of(server.url, run.id)})
    assert time.monotonic() - logged < 10
    run.finish()
    events = settled_events(server.url, run.id)
    assert {(e["kind"], e["metric"]) for e in events} == PLANTED
    assert Counter((e["kind"], e["metric"], e["start_step"]) for e in events).most_common(1)[0][1] == 1
    by_kind = {e["kind"]: e for e in events}
    assert by_kind["sawtooth"]["period"] == pytest.approx(64, rel=0.1)
    assert "64" in by_kind["mismatch_off_zero"]["summary"]
    assert "grad_norm" in by_kind["grad_norm_precursor"]["summary"] and "loss" in by_kind["grad_norm_precursor"]["summary"]
    assert "tokens_per_s" in by_kind["systems_slowdown"]["summary"] and "loss" in by_kind["systems_slowdown"]["summary"]
    assert "layer.5" in by_kind["layer_dominance"]["summary"]
    assert all(e["detector_version"] for e in events)


def test_a_healthy_run_raises_nothing(server: ServerProcess, spool_dir: Path) -> None:
    run = holter.init(project="live", name="healthy", url=server.url)
    stream(run, SyntheticRun(STEPS, seed=2, planted=False), 0, STEPS)
    run.finish()
    time.sleep(3)
    assert events_of(server.url, run.id) == []
    assert httpx.get(f"{server.url}/api/v1/runs/{run.id}").json()["health"] == "healthy"


def test_live_events_agree_with_the_batch_classifier(server: ServerProcess, spool_dir: Path) -> None:
    run = holter.init(project="live", name="agree", url=server.url)
    stream(run, SyntheticRun(STEPS, seed=3), 0, STEPS)
    run.finish()
    live = settled_events(server.url, run.id)
    batch = httpx.post(f"{server.url}/api/v1/runs/{run.id}/analyze", timeout=60).json()
    batch_events = [e for series in batch["series"] for e in series["events"]] + batch["findings"]

    def key(e: dict) -> tuple:
        start = None if e["kind"] == "layer_dominance" else e["start_step"]  # judged on latest values
        return (e["kind"], e["metric"], start, e["severity"])

    assert sorted(map(key, live)) == sorted(map(key, batch_events))
    per_metric = {(e["kind"], e["metric"], e["start_step"]): e for e in live}
    for e in (e for series in batch["series"] for e in series["events"]):
        assert per_metric[(e["kind"], e["metric"], e["start_step"])]["summary"] == e["summary"]


def test_a_growing_divergence_is_updated_not_duplicated(server: ServerProcess, spool_dir: Path) -> None:
    run = holter.init(project="live", name="nan", url=server.url)
    for step in range(300):
        run.log({"loss": 3.0 - step / 300}, step=step)
    for step in range(300, 320):
        run.log({"loss": math.nan}, step=step)
    run.flush()
    wait_until(lambda: any(e["kind"] == "divergence" for e in events_of(server.url, run.id)))
    first = [e for e in events_of(server.url, run.id) if e["kind"] == "divergence"]
    for step in range(320, 400):
        run.log({"loss": math.nan}, step=step)
    run.finish()
    wait_until(lambda: [e["end_step"] for e in events_of(server.url, run.id, kind="divergence")] == [399])
    (grown,) = events_of(server.url, run.id, kind="divergence")
    assert grown["id"] == first[0]["id"] and grown["start_step"] == 300
    assert "NaN" in grown["summary"] and "300" in grown["summary"]


def test_a_restart_mid_run_neither_misses_nor_repeats_events(store_url: str, spool_dir: Path, tmp_path: Path) -> None:
    server = ServerProcess(own_store(store_url, tmp_path), log_path=tmp_path / "server.log").start()
    try:
        synthetic = SyntheticRun(STEPS, seed=4)
        run = holter.init(project="live", name="restart", url=server.url)
        stream(run, synthetic, 0, 1500)  # the loss spike at step 1,200 is in the first half
        run.flush()
        wait_until(lambda: any(e["kind"] == "spike" and e["metric"] == "loss" for e in events_of(server.url, run.id)))
        server.kill()
        server.start()
        stream(run, synthetic, 1500, STEPS)
        run.finish(timeout=60)
        live = settled_events(server.url, run.id)
        batch = httpx.post(f"{server.url}/api/v1/runs/{run.id}/analyze", timeout=60).json()
        expected = {(e["kind"], e["metric"], e["start_step"]) for s in batch["series"] for e in s["events"]}
        detector_kinds = {"spike", "divergence", "plateau", "sawtooth", "too_good", "level_shift"}
        per_metric = [(e["kind"], e["metric"], e["start_step"]) for e in live if e["kind"] in detector_kinds]
        assert sorted(per_metric) == sorted(expected)
        assert len(per_metric) == len(set(per_metric))
    finally:
        server.stop()
