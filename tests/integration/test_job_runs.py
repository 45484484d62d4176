"""Processes started the way a launcher starts a job's ranks (RANK, LOCAL_RANK, WORLD_SIZE and
the job's id in the environment, no torch needed) each calling plain `holter.init()`: one run,
every rank's points kept apart, the run's end following its ranks' (holter/job.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import httpx
import pytest

from tests.servers import InProcessServer

RANK = textwrap.dedent(
    """
    import json, sys
    import holter
    options = json.loads(sys.argv[1])
    run = holter.init(project=options["project"], name="job", **options.get("init", {}))
    rank = int(__import__("os").environ["RANK"])
    for step in range(20):
        run.log({"loss": 2.0 - step / 20 + rank}, step=step)  # every rank logs loss at the same steps
    print(run.id)
    run.finish(options.get("status", {}).get(str(rank), "finished"))
    """
)


def launch_job(url: str, spool: Path, options: dict, ranks: int = 4) -> list[tuple[str, str]]:
    """Start `ranks` processes as one job's ranks and wait for them; (run id, stderr) of each."""
    job = uuid.uuid4().hex
    processes = []
    for rank in range(ranks):
        env = {
            **os.environ,
            "HOLTER_URL": url,
            "HOLTER_SPOOL_DIR": str(spool / f"r{rank}"),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(ranks),
            "TORCHELASTIC_RUN_ID": job,
        }
        processes.append(
            subprocess.Popen(
                [sys.executable, "-c", RANK, __import__("json").dumps(options)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    done = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        done.append((out.strip(), err))
    return done


def test_a_jobs_ranks_make_one_run_and_keep_each_ranks_points(
    server: InProcessServer, api: httpx.Client, tmp_path: Path
) -> None:
    project = f"ranks-{uuid.uuid4().hex[:8]}"
    done = launch_job(server.url, tmp_path, {"project": project})
    assert len({run_id for run_id, _ in done}) == 1
    assert not any("logged again" in err for _, err in done)
    (run,) = api.get("/runs", params={"project": project}).json()["data"]
    assert run["status"] == "finished"
    assert api.get(f"/runs/{run['id']}/metrics/loss/points").json()["values"][0] == pytest.approx(2.0)
    for rank in (1, 2, 3):
        series = api.get(f"/runs/{run['id']}/metrics/holter/rank/{rank}/loss/points").json()
        assert series["steps"] == list(range(20)) and series["values"][0] == pytest.approx(2.0 + rank)
    ranks = api.get(f"/runs/{run['id']}/ranks").json()
    assert ranks["world_size"] == 4 and [r["status"] for r in ranks["data"]] == ["finished"] * 4


def test_an_explicit_id_still_names_the_run_and_the_ranks_do_not_collide(
    server: InProcessServer, api: httpx.Client, tmp_path: Path
) -> None:
    run_id = f"shared-{uuid.uuid4().hex[:8]}"
    done = launch_job(server.url, tmp_path, {"project": "ranks-id", "init": {"id": run_id}})
    assert {found for found, _ in done} == {run_id}
    assert not any("logged again" in err for _, err in done)
    assert len(api.get(f"/runs/{run_id}/ranks").json()["data"]) == 4
    assert api.get(f"/runs/{run_id}/metrics/holter/rank/3/loss/points").json()["steps"] == list(range(20))


def test_a_group_keeps_wandbs_way_one_run_per_process(
    server: InProcessServer, api: httpx.Client, tmp_path: Path
) -> None:
    project = f"ranks-group-{uuid.uuid4().hex[:8]}"
    done = launch_job(server.url, tmp_path, {"project": project, "init": {"group": "ddp"}})
    assert len({run_id for run_id, _ in done}) == 4
    assert all(api.get(f"/runs/{run_id}/ranks").json()["data"] == [] for run_id, _ in done)


def test_one_crashed_rank_crashes_the_run_even_after_rank_0_finished(
    server: InProcessServer, api: httpx.Client, tmp_path: Path
) -> None:
    project = f"ranks-crash-{uuid.uuid4().hex[:8]}"
    ((run_id, _), *_rest) = launch_job(server.url, tmp_path, {"project": project, "status": {"2": "crashed"}})
    run = api.get(f"/runs/{run_id}").json()
    assert run["status"] == "crashed" and run["job"]["crashed"] == 1
    (crash,) = api.get(f"/runs/{run_id}/events", params={"kind": "run_crashed"}).json()["data"]
    assert "rank 2" in crash["summary"]
