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


def test_a_hung_job_still_shows_its_gpus_and_cpu(
    server: ServerProcess, spool_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    utilisation = gpu_with_utilisation_file(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)
    monkeypatch.setenv("HOLTER_SYSTEM_INTERVAL", "0.05")
    run = holter.init(project="vitals", name="hangs", url=server.url, system_vitals=True)
    for step in range(5):
        run.log({"loss": 2.0 - step / 10}, step=step)
        time.sleep(0.06)

    def summary() -> dict:
        return httpx.get(f"{server.url}/api/v1/runs/{run.id}").json()["summary"]

    # the job hangs after step 4 (stuck in a collective: the GPU spins at 100%), and no step comes
    utilisation.write_text("100")
    first = wait_until(lambda: (s := summary()).get("holter/system/gpu.0.utilization") == 100.0 and s)
    assert first["holter/system/quiet_since_step"] == 4 and "holter/system/memory.used_frac" in first
    assert {"holter/system/cpu.percent", "holter/system/gpu.0.memory_used_frac"} & set(first)
    later = wait_until(lambda: (s := summary())["holter/system/quiet_for_s"] > first["holter/system/quiet_for_s"] and s)
    assert later["holter/system/sampled_at"] >= first["holter/system/sampled_at"]  # live, sample after sample
    points = httpx.get(f"{server.url}/api/v1/runs/{run.id}/metrics/holter/system/gpu.0.utilization/points").json()
    assert max(points["steps"]) <= 4  # no point at a step the job never took
    # the job comes back and trains on: the quiet machine leaves the summary
    steps = iter(range(5, 10_000))

    def training_again() -> bool:
        for _ in range(3):
            run.log({"loss": 1.4}, step=next(steps))
            time.sleep(0.02)
        run.flush()
        return not any(key.startswith("holter/system/") for key in summary())

    wait_until(training_again)
    run.finish()
