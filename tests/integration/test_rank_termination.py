"""A rank stopped by its launcher's SIGTERM says so before it goes (holter/termination.py): its
part of the run ends crashed, "terminated by SIGTERM", and the process still dies of the signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import httpx

from tests.servers import InProcessServer
from tests.waiting import wait_until

RANK = textwrap.dedent(
    """
    import signal, sys, time
    import holter
    if sys.argv[1] == "own-handler":
        signal.signal(signal.SIGTERM, lambda *a: (print("own handler", flush=True), sys.exit(3)))
    run = holter.init(project="terminated", name="job")
    for step in range(5):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    run.flush()
    print("logged", flush=True)
    time.sleep(120)
    """
)


def rank_process(url: str, spool: Path, *, handler: str = "default") -> tuple[subprocess.Popen[str], str]:
    job = uuid.uuid4().hex
    env = {
        **os.environ,
        "HOLTER_URL": url,
        "HOLTER_SPOOL_DIR": str(spool),
        "RANK": "1",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "2",
        "TORCHELASTIC_RUN_ID": job,
    }
    process = subprocess.Popen(
        [sys.executable, "-c", RANK, handler], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    for line in process.stdout:
        if line.strip() in ("logged",):
            break
    return process, job


def rank_of(api: httpx.Client, rank: int) -> dict | None:
    runs = api.get("/runs", params={"project": "terminated"}).json()["data"]
    for run in runs:
        for found in api.get(f"/runs/{run['id']}/ranks").json()["data"]:
            if found["rank"] == rank and found["status"] == "crashed":
                return {**found, "run": run["id"]}
    return None


def test_a_rank_terminated_by_sigterm_ends_its_part_crashed_and_dies_of_the_signal(
    server: InProcessServer, api: httpx.Client, tmp_path: Path
) -> None:
    process, _job = rank_process(server.url, tmp_path)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)
    assert process.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM)
    found = wait_until(lambda: rank_of(api, 1), timeout=30)
    assert found["reason"] == "terminated by SIGTERM"
    run = api.get(f"/runs/{found['run']}").json()
    assert run["status"] == "crashed"
    (crash,) = api.get(f"/runs/{found['run']}/events", params={"kind": "run_crashed"}).json()["data"]
    assert "rank 1" in crash["summary"] and "terminated by SIGTERM" in crash["summary"]


def test_a_program_with_its_own_sigterm_handler_keeps_it(server: InProcessServer, tmp_path: Path) -> None:
    process, _job = rank_process(server.url, tmp_path, handler="own-handler")
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 3 and "own handler" in output
