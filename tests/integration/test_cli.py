"""`holter runs` lists runs with the ids other commands take; `holter.init` names the run's page."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import holter
import pytest
from holter.cli import main

from tests.servers import ServerProcess


def test_runs_lists_ids_names_and_status(
    server: ServerProcess, spool_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = holter.init(project="cli-runs", name="listed", url=server.url)
    run.log({"loss": 1.0}, step=41)
    run.finish()
    assert main(["runs", "--project", "cli-runs", "--url", server.url]) == 0
    out = capsys.readouterr().out
    header, row = out.splitlines()[:2]
    assert header.split()[:4] == ["ID", "PROJECT", "NAME", "STATUS"]
    assert row.split()[:4] == [run.id, "cli-runs", "listed", "finished"] and "41" in row
    assert f"{server.url}/runs/<ID>" in out


def test_runs_with_an_unknown_status_names_the_service_s_statuses(
    server: ServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "--status", "exploded", "--url", server.url]) == 2
    err = capsys.readouterr().err
    assert "holter runs: HTTP 422" in err and all(
        status in err for status in ("running", "finished", "crashed", "stalled")
    )


def test_runs_against_no_service_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", "http://127.0.0.1:9", "runs"]) == 2 and "holter runs:" in capsys.readouterr().err


def test_init_prints_the_runs_page_unless_quiet(server: ServerProcess, spool_dir: Path) -> None:
    script = (
        f"import holter; r = holter.init(project='cli', name='printed', url={server.url!r}); r.finish(); "
        f"holter.init(project='cli', url={server.url!r}, quiet=True).finish()"
    )
    env = {k: v for k, v in os.environ.items() if k != "HOLTER_QUIET"} | {"HOLTER_SPOOL_DIR": str(spool_dir)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env, check=True
    )
    lines = [line for line in done.stderr.splitlines() if "View run" in line]
    assert len(lines) == 1 and lines[0].startswith(f"holter: View run printed at {server.url}/runs/")


def test_demo_points_at_the_runs_page(
    server: ServerProcess, spool_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["demo", "--synthetic", "--steps", "30", "--rate", "1000", "--project", "cli-demo", "--url", server.url])
        == 0
    )
    out = capsys.readouterr().out
    streaming = next(line for line in out.splitlines() if line.startswith("streaming run "))
    run_id = streaming.split()[2]
    assert streaming.endswith(f": {server.url}/runs/{run_id}")
    assert f"run {run_id} finished; see it at {server.url}/runs/{run_id}" in out
    with server.api() as api:
        assert api.get(f"/runs/{run_id}").json()["status"] == "finished"
