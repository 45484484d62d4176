"""Reference runs: a run that drifts from its reference is flagged once it finishes (by the
service's reference-drift loop, moments after); one that tracks it is not. On SQLite and Postgres."""

from __future__ import annotations

import math
import random
import uuid
from pathlib import Path

import holter
import httpx

from tests.servers import ServerProcess
from tests.waiting import wait_until


def stream(
    server: ServerProcess,
    project: str,
    eval_gap: float,
    seed: int,
    tags: list[str] | None = None,
    name: str | None = None,
) -> holter.Run:
    """A finished run of train and eval loss; from step 2,000 the eval loss runs `eval_gap` higher."""
    rng = random.Random(seed)
    run = holter.init(project=project, name=name, url=server.url, tags=tags)
    for step in range(0, 4000, 10):
        loss = 2.0 + 8.0 * math.exp(-step / 600) + rng.gauss(0, 0.01)
        run.log({"loss": loss}, step=step)
        if step % 50 == 0:
            run.log({"eval_loss": loss + 0.1 + (eval_gap if step >= 2000 else 0.0) + rng.gauss(0, 0.005)}, step=step)
    run.finish()
    return run


def test_a_run_whose_eval_loss_drifts_from_the_reference_is_flagged(
    server: ServerProcess, api: httpx.Client, spool_dir: Path
) -> None:
    project = f"ref-{uuid.uuid4().hex[:6]}"
    reference = stream(server, project, eval_gap=0.0, seed=1)
    assert api.put(f"/projects/{project}/reference", json={"run_id": reference.id, "by": "ana"}).status_code == 200
    drifting = stream(server, project, eval_gap=0.12, seed=2)
    (drift,) = wait_until(
        lambda: api.get(f"/runs/{drifting.id}/events", params={"kind": "reference_drift"}).json()["data"]
    )
    assert drift["metric"] == "eval_loss" and 1950 <= drift["start_step"] <= 2100
    assert "above the reference" in drift["summary"] and "while loss matches" in drift["summary"]
    comparison = api.get(f"/runs/{drifting.id}/compare", params={"metric": "eval_loss"}).json()
    assert comparison["reference_id"] == reference.id and len(comparison["steps"]) == len(comparison["low"]) > 50
    assert [d["direction"] for d in comparison["drifts"]] == ["above"]


def test_a_run_that_tracks_its_reference_is_not_flagged(
    server: ServerProcess, api: httpx.Client, spool_dir: Path
) -> None:
    project = f"ref-{uuid.uuid4().hex[:6]}"
    reference = stream(server, project, eval_gap=0.0, seed=3)
    api.put(f"/projects/{project}/reference", json={"run_id": reference.id})
    tracking = stream(server, project, eval_gap=0.0, seed=4)
    assert api.get(f"/runs/{tracking.id}/events", params={"kind": "reference_drift"}).json()["count"] == 0
    assert api.get(f"/runs/{tracking.id}/compare", params={"metric": "eval_loss"}).json()["drifts"] == []


def test_a_tag_reference_wins_over_the_project_reference(
    server: ServerProcess, api: httpx.Client, spool_dir: Path
) -> None:
    project = f"ref-{uuid.uuid4().hex[:6]}"
    base = stream(server, project, eval_gap=0.0, seed=5)
    tagged = stream(server, project, eval_gap=0.12, seed=6, tags=["long-context"])
    api.put(f"/projects/{project}/reference", json={"run_id": base.id})
    api.put(f"/projects/{project}/reference", json={"run_id": tagged.id, "tag": "long-context"})
    follower = stream(server, project, eval_gap=0.12, seed=7, tags=["long-context"])
    assert api.get(f"/runs/{follower.id}/compare", params={"metric": "eval_loss"}).json()["reference_id"] == tagged.id
    refs = api.get(f"/projects/{project}/references").json()
    assert {(r["tag"], r["run_id"]) for r in refs} == {(None, base.id), ("long-context", tagged.id)}


def test_comparing_without_a_reference_is_404(server: ServerProcess, api: httpx.Client, spool_dir: Path) -> None:
    run = stream(server, f"ref-{uuid.uuid4().hex[:6]}", eval_gap=0.0, seed=8)
    answer = api.get(f"/runs/{run.id}/compare", params={"metric": "eval_loss"})
    assert answer.status_code == 404 and "no reference" in answer.json()["detail"]


def test_a_reference_from_another_project_is_refused(server: ServerProcess, api: httpx.Client, spool_dir: Path) -> None:
    run = stream(server, f"ref-{uuid.uuid4().hex[:6]}", eval_gap=0.0, seed=9)
    assert api.put("/projects/elsewhere/reference", json={"run_id": run.id}).status_code == 422
