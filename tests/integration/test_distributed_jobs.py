"""Real distributed jobs: `torchrun --standalone --nproc_per_node 4` (gloo, on the CPU) running
tests/integration/jobs/ddp_job.py, each rank calling plain `holter.init()` and `run.watch(model)`.
Each job is one run; the slow rank, the hung job, the rank whose batch held a NaN and the rank
killed with SIGKILL are each named, with the rank, within the times the ranks watch promises."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from tests.servers import InProcessServer
from tests.waiting import wait_until

pytest.importorskip("torch")

JOB = Path(__file__).parent / "jobs" / "ddp_job.py"
pytestmark = pytest.mark.slow


def launch(url: str, spool: Path, **env: str) -> subprocess.Popen[str]:
    """torchrun with 4 ranks of the job, its output captured, in a process group of its own."""
    environment = {
        **os.environ,
        "HOLTER_URL": url,
        "HOLTER_SPOOL_DIR": str(spool),
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        **env,
    }
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "4", str(JOB)]
    return subprocess.Popen(
        command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def finished(job: subprocess.Popen[str], timeout: float = 240) -> str:
    output, _ = job.communicate(timeout=timeout)
    return output


def stop(job: subprocess.Popen[str], pids: list[int]) -> str:
    """Stop the job as its launcher would be stopped (SIGTERM to torchrun, which stops its ranks),
    and SIGKILL whatever is left after 30 s: torchrun starts each rank in a session of its own."""
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGTERM)
    try:
        output, _ = job.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        for pid in [job.pid, *pids]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        output, _ = job.communicate(timeout=30)
    return output


def runs_named(api: httpx.Client, project: str) -> list[dict]:
    return api.get("/runs", params={"project": project}).json()["data"]


def the_run(api: httpx.Client, project: str, job: subprocess.Popen[str] | None = None) -> dict:
    """The job's one run, once it is registered (failing at once with the job's output if it died first)."""

    def registered() -> list[dict] | None:
        if job is not None and job.poll() not in (None, 0) and not runs_named(api, project):
            raise AssertionError(f"the job ended with {job.returncode}:\n{job.communicate()[0][-3000:]}")
        return runs_named(api, project) or None

    (run,) = wait_until(registered, timeout=120)
    return api.get(f"/runs/{run['id']}").json()


def events(api: httpx.Client, run_id: str, kind: str) -> list[dict]:
    return api.get(f"/runs/{run_id}/events", params={"kind": kind}).json()["data"]


def at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_a_slow_rank_is_named_straggler_within_30_s_of_the_start(
    server: InProcessServer, api: httpx.Client, tmp_path: Path
) -> None:
    project = f"straggler-{tmp_path.name[-12:]}"
    job = launch(server.url, tmp_path, PROJECT=project, FAULT="straggler", ON_RANK="2", STEPS="400")
    try:
        run = the_run(api, project, job)
        (found,) = wait_until(lambda: events(api, run["id"], "straggler") or None, timeout=60)
    finally:
        output = finished(job)
    assert job.returncode == 0, output[-3000:]
    assert "logged again" not in output
    assert len(runs_named(api, project)) == 1  # four ranks, one run
    assert found["details"]["ranks"] == [2] and found["summary"].startswith("rank 2")
    assert "computes" in found["summary"] and "every rank waits for it" in found["summary"]
    assert at(found["created_at"]) - at(run["created_at"]) <= 30
    assert all(e["details"]["ranks"] == [2] for e in events(api, run["id"], "straggler"))
    run = api.get(f"/runs/{run['id']}").json()
    assert run["status"] == "finished"
    assert run["job"]["world_size"] == 4 and run["job"]["finished"] == 4
    ranks = api.get(f"/runs/{run['id']}/ranks").json()
    assert [r["rank"] for r in ranks["data"]] == [0, 1, 2, 3]
    assert ranks["launcher"] == "torchrun" and sum(len(v) for v in ranks["hosts"].values()) == 4
    # every rank's points kept: rank 0's as the run's curve, the others' as their own series
    for rank in (1, 2, 3):
        series = api.get(f"/runs/{run['id']}/metrics/holter/rank/{rank}/loss/points").json()
        assert series["steps"] == list(range(400))
    assert api.get(f"/runs/{run['id']}/metrics/loss/points").json()["steps"] == list(range(400))
    assert all(not m["name"].startswith("holter/rank/") for m in run["metrics"])


def test_a_hung_rank_is_named_with_where_it_is_stuck_within_30_s_of_the_job_stopping(
    server: InProcessServer, api: httpx.Client, tmp_path: Path
) -> None:
    project = f"hang-{tmp_path.name[-12:]}"
    job = launch(server.url, tmp_path, PROJECT=project, FAULT="hang", ON_RANK="3", AT_STEP="60", STEPS="400")
    try:
        run = the_run(api, project, job)
        (found,) = wait_until(lambda: events(api, run["id"], "rank_hung") or None, timeout=90)
        points = api.get(f"/runs/{run['id']}/metrics/loss/points").json()
    finally:
        ranks = api.get(f"/runs/{run['id']}/ranks").json()["data"] if "run" in locals() else []
        output = stop(job, [r["pid"] for r in ranks if r["pid"]])
    assert "logged again" not in output
    assert found["details"]["ranks"] == [3] and found["details"]["waiting"] == [0, 1, 2]
    assert found["summary"].startswith("ranks 0, 1 and 2 wait in all_reduce")
    assert "rank 3" in found["summary"] and "`forward`" in found["summary"] and "time.sleep" in found["summary"]
    assert found["start_step"] == 60 and points["steps"][-1] == 59
    stopped = max(t for t in points["times"] if t is not None)  # the job's last step logged
    assert at(found["created_at"]) - stopped <= 30
    (incident,) = [i for i in api.get(f"/runs/{run['id']}/incidents").json()["data"] if i["rule"] == "ranks"]
    assert incident["title"].startswith("job hung: rank 3")
    assert events(api, run["id"], "straggler") == []  # no rank was slow before it stopped


def test_a_nan_from_one_ranks_batch_is_named_from_that_rank(
    server: InProcessServer, api: httpx.Client, tmp_path: Path
) -> None:
    project = f"nan-{tmp_path.name[-12:]}"
    job = launch(
        server.url, tmp_path, PROJECT=project, FAULT="nan", ON_RANK="1", AT_STEP="80", STEPS="120", WATCH="tripwire"
    )
    output = finished(job)
    assert job.returncode == 0, output[-3000:]
    assert "logged again" not in output
    run = the_run(api, project)

    def origin() -> dict | None:
        found = events(api, run["id"], "first_nonfinite")
        return found[0] if found and len(found[0]["details"].get("rank_reports") or {}) == 4 else None

    tripwire = wait_until(origin, timeout=60)
    assert tripwire["details"]["rank"] == 1 and tripwire["start_step"] == 80
    assert tripwire["summary"].startswith("first non-finite output at step 80 on rank 1")
    assert "ranks 0, 2 and 3 followed (from step 81" in tripwire["summary"]

    # the loss leaves its peers' band on rank 1; its local gradient norm may too, as a second
    # finding of the same incident, depending on which steps the watch's pass reads
    def on_the_loss() -> list[dict] | None:
        return [e for e in events(api, run["id"], "rank_outlier") if e["metric"] == "loss"] or None

    (outlier,) = wait_until(on_the_loss, timeout=60)
    assert outlier["details"]["ranks"] == [1] and outlier["start_step"] == 80
    assert all(e["details"]["ranks"] == [1] for e in events(api, run["id"], "rank_outlier"))
    incidents = api.get(f"/runs/{run['id']}/incidents").json()["data"]
    assert events(api, run["id"], "straggler") == [] and events(api, run["id"], "rank_lost") == []
    (nan,) = [i for i in incidents if i["rule"] == "nonfinite"]
    assert nan["title"].startswith("NaN from `layers.0` on rank 1 at step 80") or "rank 1" in nan["title"]


def test_a_rank_killed_with_sigkill_is_named_lost_and_the_run_crashed(
    server: InProcessServer, api: httpx.Client, tmp_path: Path
) -> None:
    project = f"kill-{tmp_path.name[-12:]}"
    job = launch(server.url, tmp_path, PROJECT=project, FAULT="kill", ON_RANK="3", AT_STEP="60", STEPS="400")
    output = finished(job)
    assert job.returncode != 0
    assert "logged again" not in output
    run = the_run(api, project)

    # torchrun stops the other ranks once rank 3 died; one held in the all-reduce by it may be
    # killed without a word at the same moment (a busy box): it is as lost as rank 3, and named so.
    # Every rank that said it crashed is off the event, which is replaced in place as they say so.
    def lost_settled() -> dict | None:
        found = events(api, run["id"], "rank_lost")
        ranks = {r["rank"]: r for r in api.get(f"/runs/{run['id']}/ranks").json()["data"]}
        said = {rank for rank, r in ranks.items() if r["status"] == "crashed"}
        if len(found) == 1 and 3 in found[0]["details"]["ranks"] and not said & set(found[0]["details"]["ranks"]):
            return {"event": found[0], "ranks": ranks}
        return None

    settled = wait_until(lost_settled, timeout=60)
    lost, ranks = settled["event"], settled["ranks"]
    assert lost["summary"].startswith("rank 3") or lost["summary"].startswith("ranks ")
    run = api.get(f"/runs/{run['id']}").json()
    assert run["status"] == "crashed" and len(runs_named(api, project)) == 1
    assert ranks[3]["status"] == "running" and not ranks[3]["alive"]
    for rank in (0, 1, 2):  # each rank said it crashed, or is named lost beside rank 3
        assert (ranks[rank]["status"] == "crashed" and ranks[rank]["reason"]) or rank in lost["details"]["ranks"]
    assert len(events(api, run["id"], "run_crashed")) == 1
