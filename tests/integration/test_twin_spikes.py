"""Twin-run spike attribution through the real service, on SQLite and Postgres: a spike at the
same step in runs with the same data order (whatever else differs: another width too) is the
batch, and says so with links to the twins; a run with another data seed spiking at that step is
no twin; a run's twins are listed for its page."""

from __future__ import annotations

import uuid

import httpx
import numpy as np
import pytest
from holter_server.services import compare as compare_service
from holter_server.services import detection
from holter_server.store import points as points_store
from holter_server.store import runs as runs_store
from holter_server.store.database import make_engine, make_session_factory, session_scope, upgrade

from tests.waiting import wait_until

STEPS = np.arange(0, 2_000)


def post_run(api: httpx.Client, project: str, config: dict, spike_at: int) -> str:
    run_id = f"w{uuid.uuid4().hex[:12]}"
    api.post("/runs", json={"id": run_id, "project": project, "name": run_id, "config": config}).raise_for_status()
    rng = np.random.default_rng(int(run_id[1:], 16) % 2**32)
    loss = 2 + 3 * np.exp(-STEPS / 400) + rng.normal(0, 0.01, len(STEPS))
    loss[spike_at] += 3.0
    api.post(
        f"/runs/{run_id}/points", json={"metrics": {"loss": {"steps": STEPS.tolist(), "values": loss.tolist()}}}
    ).raise_for_status()
    api.post(f"/runs/{run_id}/finish", json={"status": "finished"}).raise_for_status()
    return run_id


def spikes(api: httpx.Client, run_id: str) -> list[dict]:
    return api.get(f"/runs/{run_id}/events", params={"kind": "spike"}).json()["data"]


def test_a_spike_at_the_same_step_in_runs_with_the_same_data_order_is_attributed_to_the_batch(
    api: httpx.Client,
) -> None:
    project = f"twin-{uuid.uuid4().hex[:6]}"
    base = {"model": "gpt2-small", "data": {"data_seed": 7, "path": "fineweb"}, "batch_size": 32}
    first = post_run(api, project, {**base, "optim": {"lr": 3e-4}, "seed": 1}, 946)
    second = post_run(api, project, {**base, "optim": {"lr": 6e-4}, "seed": 2}, 946)
    third = post_run(api, project, {**base, "optim": {"lr": 3e-4}, "weight_decay": 0.1, "seed": 3}, 947)
    other_data = post_run(
        api, project, {**base, "data": {"data_seed": 8, "path": "fineweb"}, "optim": {"lr": 3e-4}, "seed": 1}, 946
    )
    for run_id, twins in ((first, {second, third}), (second, {first, third}), (third, {first, second})):
        found = wait_until(
            lambda r=run_id, t=twins: [
                s for s in spikes(api, r) if {x["run_id"] for x in s["details"].get("twins", [])} == t
            ]
        )
        (spike,) = found
        assert "in 2 runs with the same data order: the batch, not the optimiser" in spike["summary"]
        assert spike["details"]["twin_note"] in spike["summary"]
    (unrelated,) = wait_until(lambda: spikes(api, other_data))
    assert "twins" not in unrelated["details"] and "same data order" not in unrelated["summary"]


def test_the_same_data_order_at_another_width_is_a_twin_and_listed_for_the_page(api: httpx.Client) -> None:
    project = f"twin-{uuid.uuid4().hex[:6]}"
    data = {"data": {"path": "shakespeare", "data_seed": 3}, "batch_size": 16, "block_size": 128}
    narrow = post_run(api, project, {**data, "model": {"width": 128}, "lr": 1e-3, "seed": 0}, 700)
    wide = post_run(api, project, {**data, "model": {"width": 256}, "lr": 3e-4, "seed": 1}, 700)
    other = post_run(api, project, {**data, "data": {"path": "shakespeare", "data_seed": 4}, "seed": 0}, 700)
    (spike,) = wait_until(
        lambda: [s for s in spikes(api, wide) if [t["run_id"] for t in s["details"].get("twins", [])] == [narrow]]
    )
    assert "in 1 run with the same data order: the batch, not the optimiser" in spike["summary"]
    twins = api.get(f"/runs/{narrow}/twins").json()
    assert twins["data_order"] == {"data.path": "shakespeare", "data.data_seed": 3, "batch_size": 16, "block_size": 128}
    assert [t["run_id"] for t in twins["twins"]] == [wide] and twins["twins"][0]["status"] == "finished"
    assert [c["key"] for c in twins["twins"][0]["differs"]] == ["lr", "model.width", "seed"]
    assert twins["sentence"].startswith("1 run shares this run's data order") and other not in str(twins)


def test_a_run_that_names_no_data_has_no_twins_and_is_told_why(api: httpx.Client) -> None:
    run_id = post_run(api, f"twin-{uuid.uuid4().hex[:6]}", {"lr": 3e-4, "batch_size": 8}, 100)
    twins = api.get(f"/runs/{run_id}/twins").json()
    assert twins["data_order"] is None and twins["twins"] == []
    assert twins["sentence"].startswith("this run's config names no data")


def test_a_spike_at_another_step_in_a_twin_is_not_attributed(api: httpx.Client) -> None:
    project = f"twin-{uuid.uuid4().hex[:6]}"
    first = post_run(api, project, {"lr": 3e-4, "data_seed": 1}, 500)
    second = post_run(api, project, {"lr": 6e-4, "data_seed": 1}, 900)
    for run_id in (first, second):
        (spike,) = wait_until(lambda r=run_id: spikes(api, r))
        assert "twins" not in spike["details"]


def test_a_pass_that_changes_no_spike_reads_no_other_run(empty_store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # attribution reads every run of the project; in a lab of 200 live jobs, doing that on every
    # detection pass of every run that once spiked would cost more than the detection itself
    upgrade(empty_store_url)
    engine = make_engine(empty_store_url)
    factory = make_session_factory(engine)
    live_detectors = detection.LiveDetectors()  # this test's detection loop
    reads: list[str] = []
    project_runs = compare_service.project_runs
    monkeypatch.setattr(compare_service, "project_runs", lambda **kw: reads.append(kw["project"]) or project_runs(**kw))
    loss = 2 + 3 * np.exp(-STEPS / 400) + np.random.default_rng(3).normal(0, 0.01, len(STEPS))
    loss[946] += 3.0

    def log(start: int, end: int) -> None:
        with session_scope(factory) as session:
            points_store.add_points(
                session=session,
                run_id="r",
                max_metrics=100,
                columns={"loss": (STEPS[start:end].tolist(), loss[start:end].tolist(), [None] * (end - start))},
            )
            runs_store.record_activity(session=session, run_id="r", last_step=int(STEPS[end - 1]))  # as ingest does
        while detection.detect_pending(session_factory=factory, live=live_detectors):
            pass

    try:
        with session_scope(factory) as session:
            runs_store.create_or_resume_run(
                session=session, run_id="r", project="p", name=None, config={"data_seed": 1, "lr": 1e-3}, tags=[]
            )
        log(0, 1_000)
        assert reads == ["p"]  # the spike at step 946 was looked up once
        log(1_000, 2_000)
        assert reads == ["p"]
    finally:
        engine.dispose()
