"""Incidents through a real `holter serve` on each store: a CPU training with a NaN planted in one
attention layer, watched with the tripwire on, is one incident led by that layer's module, its
loss, gradient-norm and activation-norm divergences folded under it."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from tests.servers import ServerProcess
from tests.waiting import wait_until

pytest.importorskip("torch")

from tests.integration.test_tripwires import train_with_a_nan


def incidents_of(url: str, run_id: str) -> dict:
    answer = httpx.get(f"{url}/api/v1/runs/{run_id}/incidents", timeout=30)
    answer.raise_for_status()
    return answer.json()


def test_a_planted_nan_is_one_incident_led_by_its_module(server: ServerProcess, spool_dir: Path) -> None:
    run_id = train_with_a_nan(server.url, project="incidents")

    def settled() -> dict | None:
        # the loss, the whole-model and per-layer gradient norms all diverged, with the tripwire
        # (the loss's divergence may be read a pass after the gradients': wait for it too)
        found = incidents_of(server.url, run_id)
        told = {(e["kind"], e["metric"]) for i in found["data"] for e in [i["leader"], *i["folded"]]}
        return found if found["events"] >= 8 and ("divergence", "loss") in told else None

    found = wait_until(settled)
    first = found["data"][0]
    assert first["rule"] == "nonfinite" and first["severity"] == "critical"
    assert first["leader"]["kind"] == "first_nonfinite"
    assert first["title"] == "NaN from `layers.1.attn` at step 80"
    assert "head.bias" not in first["title"] + first["cause"] + first["leader"]["summary"]
    folded = {(e["kind"], e["metric"]) for e in first["folded"]}
    assert ("divergence", "loss") in folded and ("divergence", "holter/grad_norm/layers.1") in folded
    # nothing else went wrong: every event of the run is in this one incident
    assert found["count"] == 1 and found["events"] == 1 + len(first["folded"])


def test_the_post_mortem_of_a_nan_run_leads_with_its_module(server: ServerProcess, spool_dir: Path) -> None:
    run_id = train_with_a_nan(server.url, project="incidents")
    wait_until(lambda: incidents_of(server.url, run_id)["events"] >= 8)
    answer = httpx.get(f"{server.url}/api/v1/runs/{run_id}/postmortem", timeout=60)
    answer.raise_for_status()
    told = answer.json()["summary"].split(": ", 1)[1]
    assert told.startswith("the forward pass of `layers.1.attn` made the first non-finite value at step 80")
    assert "head.bias" not in told


def test_incidents_of_an_unknown_run_are_a_404(api: httpx.Client) -> None:
    answer = api.get("/api/v1/runs/no-such-run/incidents")
    assert answer.status_code == 404


def test_a_data_order_sawtooth_is_one_incident_with_its_config_cause(api: httpx.Client) -> None:
    # a from-scratch loss that dives at each epoch's first batches (seen before) and climbs back:
    # period 40 = dataset_size / batch_size; its dives are not "too good", its climbs no divergence
    import numpy as np

    run_id = f"saw-{uuid.uuid4().hex[:8]}"
    config = {"dataset_size": 320, "batch_size": 8}
    api.post("/runs", json={"id": run_id, "project": "incidents", "config": config}).raise_for_status()
    steps = np.arange(560)
    rng = np.random.default_rng(0)
    loss = 0.6 + 3.0 * np.exp(-steps / 60) - 0.55 * (steps % 40 < 8) + rng.normal(0, 0.02, steps.size)
    body = {"metrics": {"loss": {"steps": steps.tolist(), "values": np.maximum(loss, 0.001).tolist()}}}
    api.post(f"/runs/{run_id}/points", json=body).raise_for_status()
    api.post(f"/runs/{run_id}/finish", json={"status": "finished"}).raise_for_status()

    def sawtooth() -> list[dict]:
        return [i for i in api.get(f"/runs/{run_id}/incidents").json()["data"] if i["rule"] == "sawtooth"]

    (incident,) = wait_until(sawtooth)
    assert incident["title"].startswith("sawtooth, period 40 steps (period 40 = dataset_size / batch_size")
    kinds = {e["kind"] for e in api.get(f"/runs/{run_id}/events").json()["data"]}
    assert not kinds & {"too_good", "divergence"}


def test_a_runs_badge_counts_one_problem_however_many_events_it_made(api: httpx.Client) -> None:
    # issue 46: one NaN made a dozen events, and the header said CRITICAL · 12
    run_id = api.post("/runs", json={"project": "problems"}).json()["id"]
    steps = list(range(300))
    nan_from = lambda s, v: "NaN" if s >= 200 else v  # noqa: E731
    metrics = {
        "loss": {"steps": steps, "values": [nan_from(s, 3.0 - s / 300) for s in steps]},
        "holter/grad_norm": {"steps": steps, "values": [nan_from(s, 1.0) for s in steps]},
        **{
            f"holter/grad_norm/layers.{i}": {"steps": steps, "values": [nan_from(s, 0.3) for s in steps]}
            for i in range(4)
        },
    }
    api.post(f"/runs/{run_id}/points", json={"metrics": metrics}).raise_for_status()
    wait_until(lambda: api.get(f"/runs/{run_id}").json()["open_events"] >= 4, timeout=60)
    run = api.get(f"/runs/{run_id}").json()
    assert run["open_events"] >= 4 and run["problems"] == {"critical": 1}
    (listed,) = api.get("/runs", params={"project": "problems"}).json()["data"]
    assert listed["problems"] == {"critical": 1}
    healthy = api.post("/runs", json={"project": "problems-none"}).json()["id"]
    assert api.get(f"/runs/{healthy}").json()["problems"] == {}
