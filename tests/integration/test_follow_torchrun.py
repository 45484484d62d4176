"""`holter follow` on a real torchrun log: tests/integration/jobs/ddp_job.py under `torchrun
--standalone --nproc_per_node 4 --tee 3` (gloo, on the CPU), each rank printing `step N | loss X`
and sending nothing itself (HOLTER_MODE=disabled), rank 1's batch holding a NaN at step 80. Its
output, every rank's lines behind torchrun's prefix (`[default3]:`, or `[rank3]:` with
TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE), is followed into the service: one run, every rank's
points kept as that rank's series, the four ranks joined, and rank 1 named at step 80 as the job
that sent its own points would have it named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.servers import InProcessServer
from tests.waiting import wait_until

pytest.importorskip("torch")

JOB = Path(__file__).parent / "jobs" / "ddp_job.py"
STEPS = 120
pytestmark = pytest.mark.slow

PREFIXES = {
    "tee": {},  # `[default3]:`: torchrun's role and local rank, the global rank on one node
    "rank_template": {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "[rank${rank}]:"},
}


def torchrun_log(log: Path, tmp_path: Path, **env: str) -> str:
    """Run the job to its end with its output (torchrun's and its ranks') written to `log`."""
    environment = {
        **os.environ,
        "HOLTER_MODE": "disabled",  # the job sends nothing: its log is all the service gets
        "HOLTER_URL": "http://127.0.0.1:9",
        "HOLTER_SPOOL_DIR": str(tmp_path / "job-spool"),
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        "FAULT": "nan",
        "ON_RANK": "1",
        "AT_STEP": "80",
        "STEPS": str(STEPS),
        "PRINT": "1",
        **env,
    }
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "4", "--tee", "3"]
    with log.open("w") as handle:
        job = subprocess.run(
            [*command, str(JOB)], env=environment, stdout=handle, stderr=subprocess.STDOUT, timeout=240, check=False
        )
    text = log.read_text()
    assert job.returncode == 0, text[-3000:]
    return text


def follow(server: InProcessServer, log: Path, project: str, tmp_path: Path) -> str:
    """`holter follow LOG` until the log has been quiet a second; its stderr."""
    command = [sys.executable, "-m", "holter.cli", "follow", str(log), "--project", project, "--url", server.url]
    command += ["--poll", "0.2", "--idle", "1", "--state", str(tmp_path / "follow-state.json")]
    env = {**os.environ, "HOLTER_SPOOL_DIR": str(tmp_path / "follow-spool")}
    follower = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert follower.returncode == 0, follower.stderr
    return follower.stderr


def events(api: httpx.Client, run_id: str, kind: str) -> list[dict]:
    return api.get(f"/runs/{run_id}/events", params={"kind": kind}).json()["data"]


@pytest.mark.parametrize("prefix", list(PREFIXES))
def test_a_torchrun_log_is_one_run_with_every_ranks_series_and_the_nan_rank_named(
    server: InProcessServer, api: httpx.Client, tmp_path: Path, prefix: str
) -> None:
    log = tmp_path / "torchrun.log"
    text = torchrun_log(log, tmp_path, **PREFIXES[prefix])
    first = "[rank3]:step 0 | loss" if prefix == "rank_template" else "[default3]:step 0 | loss"
    assert first in text  # the lines this test means to read, as torchrun prints them
    project = f"follow-torchrun-{tmp_path.name[-12:]}"
    said = follow(server, log, project, tmp_path)
    assert "logged again" not in said and "reading the log as keyvalue lines" in said

    (listed,) = api.get("/runs", params={"project": project}).json()["data"]  # four ranks, one run
    run = api.get(f"/runs/{listed['id']}").json()
    assert run["status"] == "finished"
    assert [m["name"] for m in run["metrics"]] == ["loss"]  # the run's curve is rank 0's
    for name in ("loss", "holter/rank/1/loss", "holter/rank/2/loss", "holter/rank/3/loss"):
        points = api.get(f"/runs/{run['id']}/metrics/{name}/points").json()
        assert points["steps"] == list(range(STEPS)), name
    rank_1 = api.get(f"/runs/{run['id']}/metrics/holter/rank/1/loss/points").json()["values"]
    rank_0 = api.get(f"/runs/{run['id']}/metrics/loss/points").json()["values"]
    assert rank_1[80] == "NaN" and rank_0[80] != "NaN"  # rank 1's batch, and the others after the all-reduce
    assert rank_0[81:] == ["NaN"] * (STEPS - 81)

    ranks = api.get(f"/runs/{run['id']}/ranks").json()
    assert [r["rank"] for r in ranks["data"]] == [0, 1, 2, 3]
    assert ranks["launcher"] == "follow" and run["job"]["world_size"] == 4
    assert [r["status"] for r in ranks["data"]] == ["finished"] * 4  # ended with the run they were read into

    (outlier,) = wait_until(lambda: events(api, run["id"], "rank_outlier") or None, timeout=60)
    assert outlier["details"]["ranks"] == [1] and outlier["start_step"] == 80 and outlier["metric"] == "loss"
    # ranks read from a log send no beat: their silence names no one
    assert events(api, run["id"], "rank_lost") == [] and events(api, run["id"], "rank_hung") == []
    assert events(api, run["id"], "straggler") == []


def test_a_torchrun_log_imported_keeps_every_ranks_series_and_its_ranks(
    server: InProcessServer, api: httpx.Client, tmp_path: Path
) -> None:
    log = tmp_path / "torchrun.log"
    torchrun_log(log, tmp_path)
    project = f"import-torchrun-{tmp_path.name[-12:]}"
    command = [sys.executable, "-m", "holter.cli", "import", str(log), "--project", project, "--url", server.url]
    env = {**os.environ, "HOLTER_SPOOL_DIR": str(tmp_path / "import-spool")}
    imported = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert imported.returncode in (0, 1), imported.stderr  # 1: the import found problems (the NaN)
    (listed,) = api.get("/runs", params={"project": project}).json()["data"]
    for name in ("loss", "holter/rank/1/loss", "holter/rank/2/loss", "holter/rank/3/loss"):
        points = api.get(f"/runs/{listed['id']}/metrics/{name}/points").json()
        assert points["steps"] == list(range(STEPS)), name
    ranks = api.get(f"/runs/{listed['id']}/ranks").json()
    assert [(r["rank"], r["status"]) for r in ranks["data"]] == [(r, "finished") for r in range(4)]
    assert ranks["launcher"] == "import" and ranks["world_size"] == 4
