"""A job with the system-vitals sampler on: its `holter/system/` metrics reach the service at the
job's steps, and the live detector names a GPU whose utilisation collapses while steps go on.

The GPU is an `nvidia-smi` on the PATH that prints a recorded real H100 capture (there is no GPU
here), with the utilisation cell set by the test: busy, then idle.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import holter
import httpx
import pytest

from tests.servers import ServerProcess
from tests.waiting import wait_until

CAPTURE = Path(__file__).resolve().parents[1] / "data" / "nvidia_smi" / "h100-80gb-hbm3__590.48.01__load.csv"


def gpu_with_utilisation_file(folder: Path) -> Path:
    """An nvidia-smi printing the recorded H100 capture with the utilisation read from a file."""
    header, row = CAPTURE.read_text().splitlines()[:2]
    cells = row.split(", ")
    column = [name.strip() for name in header.split(",")].index("utilization.gpu [%]")
    cells[column] = "UTIL %"
    (folder / "row.csv").write_text(f"{header}\n{', '.join(cells)}\n")
    utilisation = folder / "utilisation"
    utilisation.write_text("97")
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\nsed \"s/UTIL/$(cat '{utilisation}')/\" '{folder / 'row.csv'}'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return utilisation


def test_sampled_vitals_land_at_the_jobs_steps_and_a_collapse_is_named(
    server: ServerProcess, spool_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    utilisation = gpu_with_utilisation_file(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # as on a machine without nvidia-ml-py
    monkeypatch.setenv("HOLTER_SYSTEM_INTERVAL", "0.05")
    run = holter.init(project="vitals", url=server.url, system_vitals=True)
    step = 0
    for phase, value in (("busy", "97"), ("idle", "3")):
        utilisation.write_text(value)
        deadline = time.monotonic() + 30
        while run._vitals.samples < (30 if phase == "busy" else 38) and time.monotonic() < deadline:  # type: ignore[union-attr]
            run.log({"loss": 2.0}, step=step)
            step += 1
            time.sleep(0.005)
    run.finish()
    metrics = {m["name"]: m for m in httpx.get(f"{server.url}/api/v1/runs/{run.id}").json()["metrics"]}
    assert {
        "holter/system/cpu.percent",
        "holter/system/memory.used_frac",
        "holter/system/gpu.0.utilization",
        "holter/system/gpu.0.memory_used_frac",
        "holter/system/gpu.0.throttle.thermal",
    } <= set(metrics)
    assert metrics["holter/system/gpu.0.memory_used_gib"]["last_value"] == pytest.approx(19818 / 1024)
    assert metrics["holter/system/gpu.0.utilization"]["last_step"] <= step
    events = wait_until(
        lambda: [
            e for e in httpx.get(f"{server.url}/api/v1/runs/{run.id}/events").json()["data"] if e["kind"] == "gpu_idle"
        ]
    )
    assert events[0]["metric"] == "holter/system/gpu.0.utilization" and "fell from 97% to 3%" in events[0]["summary"]
