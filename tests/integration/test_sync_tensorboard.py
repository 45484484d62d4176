"""`holter.init(..., sync_tensorboard=True)` in a real job process: what it writes through torch's
SummaryWriter reaches a real service while it runs, and all of it by the time it exits."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import httpx
import pytest

from tests.servers import ServerProcess
from tests.waiting import wait_until

# A CleanRL-shaped job: `import holter as wandb`, init before the writer, scalars at the
# environment's global step, a second writer for evaluations; it pauses halfway (the test looks
# at the run then) and ends without finishing the run or closing its eval writer.
JOB = """
import math, sys, time
from pathlib import Path
import holter as wandb
url, project, logdir, flag = sys.argv[1:5]
wandb.init(project=project, name="tb-job", url=url, sync_tensorboard=True, config={"lr": 2.5e-4})
from torch.utils.tensorboard import SummaryWriter
writer = SummaryWriter(logdir)
evaluation = SummaryWriter(logdir + "/eval")
for update in range(1, 101):
    global_step = update * 128
    writer.add_scalar("charts/learning_rate", 2.5e-4, global_step)
    writer.add_scalar("losses/value_loss", 3.0 * math.exp(-update / 30) + 0.1, global_step)
    writer.add_scalar("charts/SPS", 1000 + update, global_step)
    if update % 10 == 0:
        evaluation.add_scalar("episodic_return", 10.0 * update, global_step)
    if update == 50:
        Path(flag).write_text("half")
        while Path(flag).exists():  # the test removes it once it has looked at the run
            time.sleep(0.1)
writer.close()
"""


def run_named(server: ServerProcess, project: str) -> dict | None:
    runs = httpx.get(f"{server.url}/api/v1/runs", params={"project": project}).json()["data"]
    return httpx.get(f"{server.url}/api/v1/runs/{runs[0]['id']}").json() if runs else None


def counts(run: dict | None) -> dict[str, int]:
    return {m["name"]: m["count"] for m in (run or {}).get("metrics", [])}


def test_a_jobs_tensorboard_scalars_stream_into_its_run_live_and_whole(server: ServerProcess, tmp_path: Path) -> None:
    pytest.importorskip("torch.utils.tensorboard")
    project = f"tbsync-{uuid.uuid4().hex[:8]}"
    flag = tmp_path / "half"
    env = {**os.environ, "HOLTER_SPOOL_DIR": str(tmp_path / "spool")}
    job = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(JOB), server.url, project, str(tmp_path / "runs" / "ppo"), str(flag)],
        env=env,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(flag.exists, timeout=120)
        # halfway, the job still running: its first 50 updates are in the run within seconds
        live = wait_until(lambda: counts(run_named(server, project)).get("losses/value_loss", 0) >= 50, timeout=30)
        assert live and job.poll() is None and run_named(server, project)["status"] == "running"
        flag.unlink()
        assert job.wait(120) == 0, job.stderr.read()
    finally:
        job.kill()
    run = run_named(server, project)
    assert run["status"] == "finished" and run["config"] == {"lr": 2.5e-4}
    assert counts(run) == {
        "charts/learning_rate": 100,
        "losses/value_loss": 100,
        "charts/SPS": 100,
        "eval/episodic_return": 10,  # the writer never closed: flushed and read when the run finished
    }
    loss = httpx.get(f"{server.url}/api/v1/runs/{run['id']}/metrics/losses/value_loss/points").json()
    assert loss["steps"] == [u * 128 for u in range(1, 101)] and all(t > 1.6e9 for t in loss["times"])


def test_without_sync_tensorboard_nothing_is_followed(server: ServerProcess, tmp_path: Path) -> None:
    pytest.importorskip("torch.utils.tensorboard")
    project = f"tbsync-{uuid.uuid4().hex[:8]}"
    script = JOB.replace("sync_tensorboard=True", "sync_tensorboard=False").replace("if update == 50:", "if False:")
    env = {**os.environ, "HOLTER_SPOOL_DIR": str(tmp_path / "spool")}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(script),
            server.url,
            project,
            str(tmp_path / "runs"),
            str(tmp_path / "f"),
        ],
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    assert done.returncode == 0 and counts(run_named(server, project)) == {}
