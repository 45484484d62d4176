"""System vitals: /proc readings, and GPU readings parsed from recorded real nvidia-smi output."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
from holter.system import (
    NvmlReader,
    ProcReader,
    SmiReader,
    SystemSampler,
    gpu_metrics,
    open_gpu_reader,
    parse_nvidia_smi_csv,
)

RECORDED = Path(__file__).resolve().parents[2] / "data" / "nvidia_smi"


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


def test_h100_under_load_is_read_by_column_name_with_units_stripped():
    metrics = parse_nvidia_smi_csv(recorded("h100-80gb-hbm3__590.48.01__load.csv"))
    assert metrics["gpu.0.utilization"] == 100.0
    assert metrics["gpu.0.memory_used_gib"] == pytest.approx(19818 / 1024)
    assert metrics["gpu.0.memory_used_frac"] == pytest.approx(19818 / 81559)
    assert metrics["gpu.0.temperature_c"] == 59.0
    assert metrics["gpu.0.power_w"] == 631.95
    assert metrics["gpu.0.sm_clock_mhz"] == 1980.0
    assert metrics["gpu.0.throttle.thermal"] == 0.0 and metrics["gpu.0.throttle.power"] == 0.0


def test_mig_has_no_utilisation_and_it_is_left_out_not_zero():
    metrics = parse_nvidia_smi_csv(recorded("h100-mig__590.48.01__load.csv"))
    assert "gpu.0.utilization" not in metrics and metrics["gpu.0.memory_used_gib"] == pytest.approx(11125 / 1024)


def test_the_software_power_cap_is_not_throttling():
    # this consumer card reports the software power cap (0x4) while idle at 39 W
    metrics = parse_nvidia_smi_csv(recorded("geforce-rtx-2080-super__595.71.05__idle.csv"))
    assert metrics["gpu.0.throttle.power"] == 0.0 and metrics["gpu.0.power_w"] == 39.32


@pytest.mark.parametrize(
    ("reasons", "thermal", "power"),
    [
        (0x20, 1.0, 0.0),  # SW thermal slowdown
        (0x40, 1.0, 0.0),  # HW thermal slowdown
        (0x08, 0.0, 1.0),  # HW slowdown
        (0x80, 0.0, 1.0),  # HW power brake
        (0x05, 0.0, 0.0),  # idle + SW power cap
    ],
)
def test_throttle_reason_bits(reasons, thermal, power):
    metrics = gpu_metrics(0, throttle_reasons=reasons)
    assert (metrics["gpu.0.throttle.thermal"], metrics["gpu.0.throttle.power"]) == (thermal, power)


def test_every_recorded_capture_parses():
    for capture in sorted(RECORDED.glob("*.csv")):
        metrics = parse_nvidia_smi_csv(capture.read_text())
        assert "gpu.0.memory_used_frac" in metrics and 0.0 <= metrics["gpu.0.memory_used_frac"] <= 1.0, capture.name


def test_header_less_or_empty_output_gives_nothing():
    assert parse_nvidia_smi_csv("") == {}
    assert parse_nvidia_smi_csv("index, utilization.gpu [%]\n") == {}


def test_proc_reader_gives_levels_then_rates():
    reader = ProcReader()
    first = reader.read()
    assert 0.0 < first["memory.used_frac"] < 1.0 and first["memory.process_rss_gib"] > 0 and "cpu.percent" not in first
    time.sleep(0.05)
    second = reader.read()
    assert 0.0 <= second["cpu.percent"] <= 100.0
    assert {"disk.read_mb_per_s", "disk.write_mb_per_s", "network.recv_mb_per_s", "network.sent_mb_per_s"} <= set(
        second
    )


def test_proc_reader_on_a_machine_without_proc_gives_nothing(tmp_path):
    assert set(ProcReader(proc=str(tmp_path)).read()) <= {"disk.used_frac"}


def test_nvml_without_a_driver_is_no_gpu_reader():
    pytest.importorskip("pynvml")  # nvidia-ml-py installs, but this machine has no NVIDIA driver
    assert NvmlReader.open() is None


def fake_nvidia_smi(folder: Path, capture: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An `nvidia-smi` on the PATH that prints a recorded capture, whatever it is asked."""
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ncat '{RECORDED / capture}'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return script


def test_without_nvml_nvidia_smi_on_the_path_is_read(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, "h200__590.48.01__load.csv", monkeypatch)
    reader = SmiReader.open()
    assert reader is not None and "clocks_event_reasons.active" in reader.fields
    assert reader.read()["gpu.0.memory_used_gib"] == pytest.approx(32362 / 1024)


def test_no_gpu_tools_means_no_gpu_reader(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert SmiReader.open() is None and (open_gpu_reader() is None or isinstance(open_gpu_reader(), NvmlReader))


class StepRun:
    """What the sampler asks of a run: its step, a place for points, and its summary."""

    id = "sampled"

    def __init__(self) -> None:
        self.step = 0
        self.logged: list[tuple[int, dict]] = []
        self.summaries: list[dict] = []

    def log_at(self, metrics, *, step, wall_time=None):
        self.logged.append((step, metrics))

    def _send_summary(self, values):
        self.summaries.append(values)


def test_sampler_logs_points_once_per_step_reached_and_never_before_the_first(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, "h100-80gb-hbm3__590.48.01__load.csv", monkeypatch)
    run = StepRun()
    sampler = SystemSampler(run, gpus=SmiReader.open())  # type: ignore[arg-type]
    gpus = sampler._gpus
    assert not sampler.sample(gpus)  # nothing logged yet
    run.step = 6  # steps 0..5 logged
    assert sampler.sample(gpus)
    assert not sampler.sample(gpus)  # the step has not moved: no second point at step 5
    run.step = 9
    assert sampler.sample(gpus)
    assert [step for step, _ in run.logged] == [5, 8]
    _, metrics = run.logged[0]
    assert metrics["holter/system/gpu.0.utilization"] == 100.0 and "holter/system/memory.used_frac" in metrics


def test_a_quiet_job_shows_its_machine_in_the_summary_until_steps_move_again(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, "h100-80gb-hbm3__590.48.01__load.csv", monkeypatch)
    run = StepRun()
    sampler = SystemSampler(run, gpus=SmiReader.open())  # type: ignore[arg-type]
    gpus = sampler._gpus
    run.step = 4
    assert sampler.sample(gpus)
    sampler.sample(gpus)  # one interval without a step: not yet quiet
    assert run.summaries == []
    sampler.sample(gpus)
    sampler.sample(gpus)
    assert len(run.summaries) == 2 and [step for step, _ in run.logged] == [3]  # no point beyond or at step 3 again
    latest = run.summaries[-1]
    assert latest["holter/system/gpu.0.utilization"] == 100.0 and latest["holter/system/quiet_since_step"] == 3
    assert latest["holter/system/quiet_for_s"] >= 0 and latest["holter/system/sampled_at"].endswith("+00:00")
    run.step = 5
    assert sampler.sample(gpus)
    removed = run.summaries[-1]
    assert set(removed) == set(run.summaries[0]) | set(latest) and set(removed.values()) == {None}


def test_a_job_quiet_before_its_first_step_is_reported_too(tmp_path):
    run = StepRun()
    sampler = SystemSampler(run, gpus=None)  # type: ignore[arg-type]
    for _ in range(3):
        sampler.sample(None)
    assert run.logged == [] and "holter/system/memory.used_frac" in run.summaries[-1]
    assert "holter/system/quiet_since_step" not in run.summaries[-1]


def test_a_finished_run_takes_its_quiet_machine_out_of_the_summary_and_a_crashed_one_keeps_it():
    for finished, expected in ((True, 2), (False, 1)):
        run = StepRun()
        sampler = SystemSampler(run, gpus=None)  # type: ignore[arg-type]
        for _ in range(2):
            sampler.sample(None)
        sampler.stop(finished=finished)
        assert len(run.summaries) == expected


def test_sampler_thread_samples_at_its_interval_and_stops(tmp_path):
    run = StepRun()
    sampler = SystemSampler(run, interval=0.02, gpus=None)  # type: ignore[arg-type]
    sampler.start()
    for step in range(1, 40):
        run.step = step
        time.sleep(0.005)
    sampler.stop()
    assert not sampler.is_alive() and 2 <= len(run.logged) < 40
